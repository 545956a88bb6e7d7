/**
 * A lagging replica promoted behind the same address (issue 40): a primary with two replicas, one of
 * them cut off from the primary once the submit jobs reached it, so it holds the jobs waiting and the
 * ledger's epoch but none of the sends made after. Two worker processes send every transfer to a
 * provider that accepts a sequenceId twice; then the primary and the replica in sync die, the lagging
 * one is promoted (REPLICAOF NO ONE) and the address (a TCP proxy) moves to it. Its queue hands every
 * job out again under the same epoch: the workers, which saw the ledger's tick further on, must declare
 * the loss (once over both processes), look every transfer up before its first send, find it and end
 * it submitted, sending none again.
 *
 * The replica is cut off by its replication link, not frozen with SIGSTOP or DEBUG SLEEP: a stopped
 * process still has the replication stream in its socket buffer and applies it once it runs. Here it
 * is told a wrong master password and its link is killed: every reconnection then fails at AUTH and
 * it applies nothing more, while it keeps what it had.
 *
 * Private redis-servers (with AOF) and a TCP proxy on loopback, two real worker processes
 * (REDIS_MIN_REPLICAS=0: the lagging replica could acknowledge nothing), the real simulator over HTTP.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { startRedisProxy, type RedisProxy } from '../helpers/redis-proxy.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';

const TRANSFERS = 60;

/** A node's replication offset: the primary's (what it sent) or a replica's (what it applied). */
async function replOffset(client: Redis): Promise<number> {
  const info = await client.info('replication');
  return Number(/(?:master_repl_offset|slave_repl_offset):(\d+)/.exec(info)?.[1] ?? NaN);
}

/** The workers' log lines that say the ledger was lost, with their level. */
function lostLines(workers: WorkerProcess[]): Array<{ level: unknown; msg: string }> {
  return workers.flatMap((worker) =>
    worker
      .output()
      .split('\n')
      .filter((line) => line.includes('"msg":"ledger lost'))
      .map((line) => JSON.parse(line) as { level: unknown; msg: string }),
  );
}

describe('a lagging replica promoted behind the same address while two worker processes run', () => {
  let primary: RedisServerHandle;
  let inSync: RedisServerHandle;
  let lagging: RedisServerHandle;
  let proxy: RedisProxy;
  let h: Harness;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    primary = await startRedisServer();
    [inSync, lagging] = (await startReplicas(primary, 2)) as [RedisServerHandle, RedisServerHandle];
    proxy = await startRedisProxy(primary.port);
    h = await startHarness({
      name: 'rollback-replica',
      redisUrl: proxy.url,
      worker: false,
      env: {
        REDIS_URL: proxy.url,
        REDIS_MIN_REPLICAS: '0',
        SUBMIT_CONCURRENCY: '8',
        // Tracking is not under test (no txid ever comes): its polls stay rare.
        TRACK_POLL_MIN: '10s',
        TRACK_POLL_MAX: '10s',
        // 'worker started' is an info line.
        LOG_LEVEL: 'info',
      },
      sim: { settings: { rejectDuplicates: false, txidAfterMs: 24 * 3_600_000, latencyMs: { sendTransaction: 50 } } },
    });
  });
  afterAll(async () => {
    await killAllWorkers();
    await h?.close();
    await proxy?.close();
    for (const node of [lagging, inSync, primary]) await node?.stop();
  });

  it(
    'sends none of the transfers again, declares the loss once, and ends every one submitted by lookup',
    { timeout: 180_000 },
    async () => {
      // The ledger exists (a worker ran before); the jobs wait; both replicas have them.
      await new Ledger(h.redis, createKeys(h.prefix, h.config.queue.eventsStream), {
        eventsMaxLen: h.config.queue.eventsMaxLen,
        retentionMs: h.config.retention.transfersMs,
      }).epoch.init();
      const payloads = Array.from({ length: TRANSFERS }, () => samplePayload());
      const ids = payloads.map((p) => p.halfSigned.sequenceId);
      for (const payload of payloads) await h.producer.submit(payload);
      const onPrimary = new Redis(primary.url);
      const onLagging = new Redis(lagging.url);
      try {
        const written = await replOffset(onPrimary);
        await until('the lagging replica has every submit job', 15_000, async () =>
          (await replOffset(onLagging)) >= written ? true : undefined,
        );

        // Cut off: every reconnection of its replication link fails at AUTH from now on.
        await onLagging.config('SET', 'masterauth', 'not-the-primary-password');
        await onLagging.call('CLIENT', 'KILL', 'TYPE', 'master');
        await until('the lagging replica cut off', 10_000, async () =>
          /master_link_status:down/.test(await onLagging.info('replication')) ? true : undefined,
        );

        // Two worker processes send every transfer; the provider accepts each once.
        for (const n of [1, 2]) workers.push(spawnWorker(h.env, { name: `rollback-replica-worker-${n}` }));
        for (const worker of workers) await worker.waitForLog('worker started', 30_000);
        await h.waitForEvents(
          (events) => ids.every((id) => events.some((e) => e.sequenceId === id && e.event === 'transfer.submitted')),
          60_000,
        );
        for (const id of ids) expect(h.sim.stats().sends[id]?.accepted).toBe(1);
        // The lagging replica holds the same epoch, and none of the events of the sends.
        const epochKey = createKeys(h.prefix, h.config.queue.eventsStream).epoch;
        expect(await onLagging.hget(epochKey, 'id')).toBe(await onPrimary.hget(epochKey, 'id'));
        expect(await onLagging.xlen(h.config.queue.eventsStream)).toBe(0);

        // The primary and the replica in sync die; the lagging one is promoted behind the same address.
        await primary.kill();
        await inSync.kill();
        expect(await onLagging.call('REPLICAOF', 'NO', 'ONE')).toBe('OK');
        proxy.retarget(lagging.port);
      } finally {
        onPrimary.disconnect();
        onLagging.disconnect();
      }

      // Every job runs again on the promoted replica; each transfer settles there.
      const has = (events: TransferEvent[], id: string) =>
        events.some((e) => e.sequenceId === id && (e.event === 'transfer.submitted' || e.event === 'transfer.unresolved'));
      await h.waitForEvents((events) => ids.every((id) => has(events, id)), 90_000);
      // A copy of a job may still run after its transfer settled (and must send nothing): look once none is left.
      const queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
      try {
        await until('an idle submit queue', 30_000, async () => {
          const counts = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'waiting-children');
          return Object.values(counts).every((n) => n === 0) ? true : undefined;
        });
      } finally {
        await queue.close();
      }
      const after = await h.events();
      const twice = ids.filter((id) => (h.sim.stats().sends[id]?.accepted ?? 0) > 1);
      const lost = lostLines(workers);
      const byLookup = after.filter((e) => e.event === 'transfer.submitted' && e.data.recoveredBy === 'get-transfer');
      console.log(
        `[rollback-replica] ${TRANSFERS} transfers: accepted twice upstream ${twice.length}; 'ledger lost' lines ${lost.length}; submitted by lookup ${byLookup.length}`,
      );

      expect(twice, `sequenceIds accepted twice upstream: ${twice.length} of ${TRANSFERS}`).toEqual([]);
      expect(lost).toHaveLength(1);
      expect(lost[0]!.level).toBe('error');
      expect(after.filter((e) => e.event === 'transfer.unresolved')).toEqual([]);
      for (const id of ids) {
        const submitted = after.filter((e) => e.sequenceId === id && e.event === 'transfer.submitted');
        expect(submitted).toHaveLength(1);
        expect(submitted[0]!.data).toMatchObject({ recoveredBy: 'get-transfer' });
        expect(await h.redis.hget(`${h.prefix}:transfer:${id}`, 'state')).toBe('submitted');
      }
    },
  );
});
