/**
 * `minReplicas`: with Redis replicas, a resolved submit is on a replica too (Redis WAIT on the
 * producer's connection after the add), so a failover to that replica keeps the job. When fewer
 * replicas acknowledge in time the submit rejects with NotReplicatedError: the job is on the primary,
 * and submitting again is the safe answer. cancel() waits the same way: a cancel a failover loses
 * would let the job send after all. A primary and one replica on loopback.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor, NotReplicatedError, TransferProducer } from '../../packages/producer/src/index.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';

describe('producer minReplicas', () => {
  let primary: RedisServerHandle;
  let replica: RedisServerHandle;

  beforeAll(async () => {
    primary = await startRedisServer();
    [replica] = (await startReplicas(primary, 1)) as [RedisServerHandle];
  });
  afterAll(async () => {
    await closeAllRedis();
    await replica?.stop();
    await primary?.stop();
  });

  it('resolves once the replica acknowledged the add, and the job is on the replica', async () => {
    const prefix = uniquePrefix('producer-replicas');
    const producer = new TransferProducer({ connection: newRedis({ url: primary.url }), prefix, minReplicas: 1 });
    const payload = samplePayload();
    const jobId = await producer.submit(payload);
    const onReplica = new Queue('submit-transaction', { connection: newRedis({ url: replica.url }), prefix });
    expect((await onReplica.getJob(jobId))?.id).toBe(jobIdFor(payload.halfSigned.sequenceId));
    await onReplica.close();
    await producer.close();
  });

  it('rejects with NotReplicatedError when fewer replicas acknowledge in time, the job added on the primary', async () => {
    const prefix = uniquePrefix('producer-replicas');
    const producer = new TransferProducer({ connection: newRedis({ url: primary.url }), prefix, minReplicas: 2, replicaTimeoutMs: 200 });
    const payload = samplePayload();
    const error = await producer.submit(payload).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NotReplicatedError);
    expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 1, required: 2, jobId: jobIdFor(payload.halfSigned.sequenceId) });
    const onPrimary = new Queue('submit-transaction', { connection: newRedis({ url: primary.url }), prefix });
    expect(await onPrimary.getJob(jobIdFor(payload.halfSigned.sequenceId))).toBeDefined();
    await onPrimary.close();
    await producer.close();
  });

  it('cancel(): resolves cancelled once the replica has it; with too few replicas NotReplicatedError, and cancelling again answers', async () => {
    const prefix = uniquePrefix('producer-replicas');
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const ledger = new Ledger(newRedis({ url: primary.url }), keys, { eventsMaxLen: 1_000, retentionMs: 60_000 });
    await ledger.epoch.init();
    await ledger.recordSettings('replace');
    const settings = { eventsMaxLen: 1_000, retentionMs: 60_000 };
    const replicated = new TransferProducer({ connection: newRedis({ url: primary.url }), prefix, minReplicas: 1, ledger: settings });
    const sequenceId = samplePayload().halfSigned.sequenceId;
    expect(await replicated.cancel(sequenceId, { reason: 'OPS-77' })).toMatchObject({ outcome: 'cancelled' });
    // Resolved: the replica has the cancel (a failover to it keeps it).
    expect(await newRedis({ url: replica.url }).get(keys.tombstone(sequenceId))).toBe('cancelled:1');

    const short = new TransferProducer({
      connection: newRedis({ url: primary.url }),
      prefix,
      minReplicas: 2,
      replicaTimeoutMs: 200,
      ledger: settings,
    });
    const other = samplePayload().halfSigned.sequenceId;
    const error = await short.cancel(other, { reason: 'OPS-78' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NotReplicatedError);
    expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 1, required: 2, cancel: other });
    // Decided on the primary: a cancel again (with enough replicas) answers it.
    expect(await replicated.cancel(other, { reason: 'OPS-78' })).toEqual({ outcome: 'already-ended', state: 'cancelled' });
    await replicated.close();
    await short.close();
  });

  it('with minReplicas 1 and a second replica listed but paused, rejects: every listed replica must acknowledge', async () => {
    const [second] = (await startReplicas(primary, 1)) as [RedisServerHandle];
    process.kill(second.pid, 'SIGSTOP');
    try {
      const prefix = uniquePrefix('producer-replicas');
      const producer = new TransferProducer({ connection: newRedis({ url: primary.url }), prefix, minReplicas: 1, replicaTimeoutMs: 200 });
      const error = await producer.submit(samplePayload()).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ code: 'NOT_REPLICATED', acknowledged: 1, required: 2 });
      await producer.close();
    } finally {
      process.kill(second.pid, 'SIGCONT');
      await second.stop();
    }
  });

  it('refuses a bad minReplicas at construction', () => {
    expect(() => new TransferProducer({ connection: 'redis://127.0.0.1:1', minReplicas: -1 })).toThrow(RangeError);
  });
});
