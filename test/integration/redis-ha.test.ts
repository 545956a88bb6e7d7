/**
 * Redis with replicas (docs/contract.md section 2): the worker reaches Redis through Sentinel
 * (REDIS_SENTINELS), and with REDIS_MIN_REPLICAS it sends nothing until that many replicas
 * acknowledged the record of the send in flight (WAIT). Private redis-servers on loopback: a primary,
 * a replica of it, and one Sentinel watching the primary.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer } from '../../packages/producer/src/index.ts';
import { TransferState } from '../../src/ledger/ledger.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { startSentinel } from '../helpers/sentinel.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

const SUBMITTED = new Set(['transfer.submitted']);

/** Resolves once the worker counted `count` sends refused for want of replica acknowledgements. */
async function refusedWaits(h: Harness, count: number): Promise<void> {
  const name = 'custody_redis_replica_wait_failures_total';
  const counted = async () =>
    Number(new RegExp(`${name} (\\d+)`).exec(await h.app!.metrics.registry.getSingleMetricAsString(name))?.[1] ?? 0);
  await until(`${count} refused waits`, 10_000, async () => ((await counted()) >= count ? true : undefined), 50);
}

describe('Redis through Sentinel, with a replica acknowledging every send in flight', () => {
  let primary: RedisServerHandle;
  let replica: RedisServerHandle;
  let sentinel: { port: number; stop(): Promise<void> };
  let h: Harness;
  beforeAll(async () => {
    primary = await startRedisServer();
    [replica] = (await startReplicas(primary, 1)) as [RedisServerHandle];
    sentinel = await startSentinel(primary.port);
    h = await startHarness({
      name: 'redis-ha',
      redisUrl: primary.url,
      env: {
        REDIS_URL: '',
        REDIS_SENTINELS: `127.0.0.1:${sentinel.port}`,
        REDIS_SENTINEL_MASTER: 'mymaster',
        REDIS_MIN_REPLICAS: '1',
        REDIS_REPLICA_TIMEOUT: '2s',
      },
    });
  });
  afterAll(async () => {
    await h?.close();
    await sentinel?.stop();
    await replica?.stop();
    await primary?.stop();
  });

  it('submits and broadcasts through the master Sentinel names, each send acknowledged by the replica', async () => {
    expect(h.config.redis.sentinel).toMatchObject({ master: 'mymaster', nodes: [{ host: '127.0.0.1', port: sentinel.port }] });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, SUBMITTED);
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 15_000)).event).toBe('transfer.broadcast');
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    // The worker's data is on the master Sentinel named, and replicated.
    const onReplica = new Redis(replica.url);
    expect(await onReplica.exists(`${h.prefix}:transfer:${sequenceId}`)).toBe(1);
    onReplica.disconnect();
  });

  it('moves to the promoted replica while the old master is only cut off (SIGSTOP), not crashed', { timeout: 60_000 }, async () => {
    // The Sentinel must know the replica before it can promote it.
    const ask = new Redis({ port: sentinel.port });
    await until(
      'the Sentinel knows the replica',
      15_000,
      async () => (((await ask.call('SENTINEL', 'replicas', 'mymaster')) as string[][]).length === 1 ? true : undefined),
      100,
    );
    const masterPort = async () => Number(((await ask.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')) as string[])[1]);
    // The worker's connections to the stopped master stay open and unanswered: ioredis moves on when
    // the Sentinels announce the new master (failoverDetector), not when the old one comes back.
    process.kill(primary.pid, 'SIGSTOP');
    let producer: TransferProducer | undefined;
    const connection = new Redis({
      sentinels: [{ host: '127.0.0.1', port: sentinel.port }],
      name: 'mymaster',
      maxRetriesPerRequest: null,
      lazyConnect: true,
    });
    try {
      await until('the replica promoted', 20_000, async () => ((await masterPort()) === replica.port ? true : undefined), 100);
      producer = new TransferProducer({ connection, prefix: h.prefix, eventsStream: h.config.queue.eventsStream });
      // WAIT needs a replica of the new master: there is none while the old one is stopped.
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await producer.submit(payload);
      await until(
        'the worker on the new master refusing to send without a replica',
        20_000,
        async () => ((await h.app!.ledger.get(sequenceId))?.lastError === 'REPLICAS_NOT_ACKNOWLEDGED' ? true : undefined),
        100,
      );
      expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      // The old master runs again, is reconfigured as the new master's replica, and acknowledges.
      process.kill(primary.pid, 'SIGCONT');
      await producer.waitForTerminal(sequenceId, 30_000, SUBMITTED);
      h.sim.setTxid(sequenceId);
      expect((await producer.waitForTerminal(sequenceId, 20_000)).event).toBe('transfer.broadcast');
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    } finally {
      process.kill(primary.pid, 'SIGCONT');
      await producer?.close();
      connection.disconnect();
      ask.disconnect();
    }
  });
});

describe('REDIS_MIN_REPLICAS when no replica acknowledges', () => {
  let h: Harness;
  beforeAll(async () => {
    // The tests' Redis has no replica: WAIT never reaches 1.
    h = await startHarness({ name: 'no-replica', env: { REDIS_MIN_REPLICAS: '1', REDIS_REPLICA_TIMEOUT: '50ms' } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('sends nothing, releases the lease, counts it, and keeps retrying', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await refusedWaits(h, 3);
    expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
    expect(h.sim.stats().requests.sendTransaction).toEqual({});
    const record = (await h.app!.ledger.get(sequenceId))!;
    expect(record.state).toBe(TransferState.SUBMITTING);
    expect(record.sends).toBe(0);
    expect(record.pending).toBe(false);
    expect(record.unknownSince).toBeUndefined();
    expect(record.lastError).toBe('REPLICAS_NOT_ACKNOWLEDGED');
    expect(await h.eventsOf(sequenceId)).toEqual([]);
  });
});

describe('REDIS_MIN_REPLICAS=1 with two replicas, one of them paused', () => {
  let primary: RedisServerHandle;
  let replicas: RedisServerHandle[] = [];
  let h: Harness;
  beforeAll(async () => {
    primary = await startRedisServer();
    replicas = await startReplicas(primary, 2);
    h = await startHarness({
      name: 'one-replica-paused',
      redisUrl: primary.url,
      env: { REDIS_URL: primary.url, REDIS_MIN_REPLICAS: '1', REDIS_REPLICA_TIMEOUT: '100ms' },
    });
  });
  afterAll(async () => {
    for (const replica of replicas) process.kill(replica.pid, 'SIGCONT');
    await h?.close();
    for (const replica of replicas) await replica.stop();
    await primary?.stop();
  });

  it('sends nothing while the master still lists the paused one, then sends once it answers', { timeout: 30_000 }, async () => {
    // One replica acknowledges, which meets the minimum; but Sentinel could promote the other, which
    // would not have the send in flight.
    const paused = replicas[1]!;
    process.kill(paused.pid, 'SIGSTOP');
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    try {
      await h.producer.submit(payload);
      await refusedWaits(h, 2);
      expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      expect((await h.app!.ledger.get(sequenceId))!.lastError).toBe('REPLICAS_NOT_ACKNOWLEDGED');
    } finally {
      process.kill(paused.pid, 'SIGCONT');
    }
    await h.producer.waitForTerminal(sequenceId, 20_000, SUBMITTED);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});
