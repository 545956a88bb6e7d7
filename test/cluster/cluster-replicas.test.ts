/**
 * REDIS_MIN_REPLICAS and the producer's minReplicas on a Redis Cluster (docs/contract.md section 2):
 * WAIT counts the replicas of the connection it is sent on, so it must go to the master of the shard
 * that holds the worker's hash tag, the one that took the write. Three masters with a replica each;
 * the replica of that one shard is stopped (SIGSTOP) while the other shards' replicas keep answering:
 * a WAIT sent to any other master would count one replica and let the send through.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor, NotReplicatedError, TransferProducer } from '../../packages/producer/src/index.ts';
import { TransferState } from '../../src/ledger/ledger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startClusterHarness, type ClusterHarness } from '../helpers/cluster-harness.ts';
import { until } from '../helpers/wait.ts';

const SUBMITTED = new Set(['transfer.submitted']);

let h: ClusterHarness;

beforeAll(async () => {
  h = await startClusterHarness({
    name: 'cluster-replicas',
    logLevel: 'info',
    cluster: { replicas: 1 },
    env: { REDIS_MIN_REPLICAS: '1', REDIS_REPLICA_TIMEOUT: '100ms' },
  });
});

afterAll(async () => {
  await h?.close();
});

/** The shard holding the worker's keys, its replica paused for the duration of `body`. */
async function withShardReplicaStopped<T>(body: () => Promise<T>): Promise<T> {
  const shard = await h.cluster.shardOf(`${h.prefix}:transfer:x`);
  expect(shard.replicas).toHaveLength(1);
  const replica = shard.replicas[0]!;
  process.kill(replica.pid, 'SIGSTOP');
  try {
    return await body();
  } finally {
    process.kill(replica.pid, 'SIGCONT');
  }
}

async function waitFailures(): Promise<number> {
  const text = await h.app.metrics.registry.getSingleMetricAsString('custody_redis_replica_wait_failures_total');
  return Number(/custody_redis_replica_wait_failures_total (\d+)/.exec(text)?.[1] ?? 0);
}

describe('REDIS_MIN_REPLICAS on a Redis Cluster: WAIT goes to the shard of the hash tag', () => {
  it('sends once the replica of that shard acknowledged the send in flight; the record is on that replica', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 20_000, SUBMITTED);
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 20_000)).event).toBe('transfer.broadcast');
    // Sent once whatever the replica's lag: a wait that timed out (REDIS_REPLICA_TIMEOUT is 100 ms, and a
    // busy machine can lag more) only retries. How many did is a timing, not asserted; the next test
    // shows the waits going to this shard.
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });

    const { replicas } = await h.cluster.shardOf(`${h.prefix}:transfer:${sequenceId}`);
    const onReplica = new Redis({ port: replicas[0]!.port });
    await onReplica.call('READONLY');
    expect(await onReplica.exists(`${h.prefix}:transfer:${sequenceId}`)).toBe(1);
    onReplica.disconnect();
  });

  it("sends nothing while that shard's replica is stopped, though every other shard's replica answers; sends once it is back", async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    const before = await waitFailures();
    await withShardReplicaStopped(async () => {
      await h.producer.submit(payload);
      await until('two refused waits', 15_000, async () => ((await waitFailures()) >= before + 2 ? true : undefined), 50);
      expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      const record = (await h.app.ledger.get(sequenceId))!;
      expect(record.state).toBe(TransferState.SUBMITTING);
      expect(record.lastError).toBe('REPLICAS_NOT_ACKNOWLEDGED');
    });
    await h.producer.waitForTerminal(sequenceId, 20_000, SUBMITTED);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});

describe('the producer’s minReplicas on a Redis Cluster', () => {
  it("resolves once the queue's shard replica acknowledged the add, and rejects with NotReplicatedError while it is stopped", async () => {
    const producer = new TransferProducer({ connection: h.redis, prefix: h.prefix, minReplicas: 1, replicaTimeoutMs: 200 });
    try {
      const acknowledged = samplePayload();
      expect(await producer.submit(acknowledged)).toBe(jobIdFor(acknowledged.halfSigned.sequenceId));

      const refused = samplePayload();
      const error = await withShardReplicaStopped(() =>
        producer.submit(refused).then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
      expect(error).toBeInstanceOf(NotReplicatedError);
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 0, required: 1 });
    } finally {
      await producer.close();
    }
  });
});
