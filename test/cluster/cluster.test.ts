/**
 * The worker on a 3-master Redis Cluster: every key it owns must hash to the slot of the QUEUE_PREFIX
 * hash tag, or the multi-key Lua scripts (BullMQ's, the ledger's, the rate limiter's) fail with
 * CROSSSLOT. These tests run the main flows on a real cluster and then look at every log line and every
 * emitted error for one.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EX_CONFIG } from '../../src/config/config.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { startClusterHarness, type ClusterHarness, type LogLine } from '../helpers/cluster-harness.ts';
import { countBy, versionProblems, workerEnv } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { sleep, until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';

const TERMINAL = ['transfer.broadcast', 'transfer.rejected', 'transfer.blocked', 'transfer.failed', 'transfer.expired'];

let h: ClusterHarness;
let startedAt = 0;

beforeAll(async () => {
  startedAt = Date.now();
  h = await startClusterHarness({
    name: 'cluster',
    env: {
      RECONCILE_GRACE: '0',
      // A shared request rate, so the rate limiter's Lua script runs on the cluster too.
      CUSTODY_MAX_RPS: '1000',
    },
  });
});

afterAll(async () => {
  await killAllWorkers();
  await h?.close();
  if (startedAt) process.stderr.write(`[cluster.test] cluster suite took ${Date.now() - startedAt} ms\n`);
});

async function reconcileIdle(): Promise<void> {
  const queue = h.app.queues[QueueName.RECONCILE];
  await until(
    'the reconcile queue to go idle',
    10_000,
    async () => {
      const counts = await queue.getJobCounts('active', 'waiting');
      return counts.active === 0 && counts.waiting === 0 ? true : undefined;
    },
    25,
  );
}

describe('worker on a Redis Cluster with a hash-tagged QUEUE_PREFIX', () => {
  it('takes a submission through to transfer.broadcast', async () => {
    expect(h.prefix).toMatch(/^\{t-cluster-[0-9a-f]+\}$/);
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    const outcome = await h.producer.waitForTerminal(sequenceId, 20_000);
    expect(outcome.event).toBe('transfer.broadcast');
    expect((await h.eventsOf(sequenceId)).map((e) => [e.event, e.version])).toEqual([
      ['transfer.submitted', 1],
      ['transfer.broadcast', 2],
    ]);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('sends the same sequenceId enqueued twice under different job ids once, with one terminal event', async () => {
    const queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
    try {
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await queue.add(QueueName.SUBMIT, payload, { jobId: `first-${sequenceId}` });
      await queue.add(QueueName.SUBMIT, payload, { jobId: `second-${sequenceId}` });
      await h.producer.waitForTerminal(sequenceId, 20_000);
      // Both jobs must have run to the end before the counts mean anything.
      await until(
        'both submit jobs to complete',
        10_000,
        async () => {
          const states = await Promise.all([`first-${sequenceId}`, `second-${sequenceId}`].map((id) => queue.getJobState(id)));
          return states.every((state) => state === 'completed') ? true : undefined;
        },
        25,
      );
      const events = await h.eventsOf(sequenceId);
      expect(events.filter((e) => TERMINAL.includes(e.event))).toHaveLength(1);
      expect(events.map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    } finally {
      await queue.close();
    }
  });

  it('restores a tracking job removed by hand on reconciliation, and the transfer still gets its txid', async () => {
    h.sim.updateSettings({ txidAfterMs: 1_500 });
    try {
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);
      await h.producer.waitForTerminal(sequenceId, 20_000, new Set(['transfer.submitted']));
      await reconcileIdle();
      const track = h.app.queues[QueueName.TRACK];
      await until('the tracking job', 5_000, async () => ((await track.getJob(trackJobId(sequenceId))) ? true : undefined));
      await until(
        'the tracking job to be removed',
        5_000,
        async () => {
          const job = await track.getJob(trackJobId(sequenceId));
          if (!job) return true;
          // Locked while a poll runs: try again on the next round.
          return job.remove().then(
            () => true,
            () => undefined,
          );
        },
        20,
      );
      expect(await track.getJob(trackJobId(sequenceId))).toBeUndefined();

      const before = (await h.events()).filter((e) => e.event === 'reconcile.completed').length;
      await h.app.queues[QueueName.RECONCILE].add(QueueName.RECONCILE, {});
      const all = await h.waitForEvents((events) => events.filter((e) => e.event === 'reconcile.completed').length > before);
      const counts = all.filter((e) => e.event === 'reconcile.completed').at(-1)!.data;
      expect(counts.trackersRestored).toBeGreaterThanOrEqual(1);

      const outcome = await h.producer.waitForTerminal(sequenceId, 20_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect(dataOf(outcome, 'transfer.broadcast').txid).toMatch(/\S/);
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    } finally {
      h.sim.updateSettings({ txidAfterMs: 0 });
    }
  });

  it("numbers every transfer's events 1..n and ends each transfer once", async () => {
    // A few more at once, so jobs of several transfers interleave on the cluster.
    const payloads = Array.from({ length: 5 }, () => samplePayload());
    await Promise.all(payloads.map((p) => h.producer.submit(p)));
    await Promise.all(payloads.map((p) => h.producer.waitForTerminal(p.halfSigned.sequenceId, 20_000)));
    const events = await h.events();
    expect(versionProblems(events)).toEqual([]);
    const terminal = new Map<string, number>();
    for (const type of TERMINAL) for (const [seq, n] of countBy(events, type)) terminal.set(seq, (terminal.get(seq) ?? 0) + n);
    for (const p of payloads) expect(terminal.get(p.halfSigned.sequenceId)).toBe(1);
    expect([...terminal.values()].every((n) => n === 1)).toBe(true);
  });

  it("cancels through the producer package, which checks the worker's recorded settings in the ledger's slot", async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    expect(await h.producer.cancel(sequenceId, { reason: 'cluster cancel, ticket OPS-77' })).toMatchObject({ outcome: 'cancelled' });
    const recorded = `${h.prefix}:ledger:worker`;
    expect(await h.redis.hget(recorded, 'eventsStream')).toBe(h.config.queue.eventsStream);
    expect(await h.redis.cluster('KEYSLOT', recorded)).toBe(await h.redis.cluster('KEYSLOT', `${h.prefix}:ledger:epoch`));
  });

  it('keeps every key under the prefix hash tag, with no CROSSSLOT and no error-level log line', async () => {
    // Let the last tracker and scheduler rounds finish writing before looking.
    await sleep(300);
    const keys: string[] = [];
    for (const node of h.redis.nodes('master')) {
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'COUNT', 1000);
        cursor = next;
        keys.push(...batch);
      } while (cursor !== '0');
    }
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((key) => !key.startsWith(`${h.prefix}:`))).toEqual([]);
    // All in one slot, so all on one master.
    const slots = new Set(await Promise.all(keys.slice(0, 50).map((key) => h.redis.cluster('KEYSLOT', key))));
    expect(slots.size).toBe(1);

    const failed = await Promise.all(Object.values(h.app.queues).map(async (q) => [q.name, await q.getJobCountByTypes('failed')] as const));
    expect(failed).toEqual(failed.map(([name]) => [name, 0]));

    // Short summaries: a failing line's err carries the whole Lua script and its arguments.
    const summary = (line: LogLine) =>
      `${line.level} ${line.msg ?? ''} ${(line.err as { message?: string } | undefined)?.message ?? ''}`.slice(0, 300);
    expect(h.logLines.length).toBeGreaterThan(0);
    expect(h.logLines.filter((line) => /CROSSSLOT/i.test(JSON.stringify(line))).map(summary)).toEqual([]);
    expect(h.logLines.filter((line) => line.level === 'error' || line.level === 'fatal' || line.level === 'unparsed').map(summary)).toEqual(
      [],
    );
    expect(h.emittedErrors.map(({ source, error }) => `${source}: ${error.message}`)).toEqual([]);
  });

  it('refuses to start the real worker on a cluster with a QUEUE_PREFIX without hash tag (exit 78)', async () => {
    const env = {
      ...workerEnv(h.sim, 'wtx-no-hash-tag'),
      REDIS_CLUSTER_NODES: h.cluster.nodesEnv,
      LOG_LEVEL: 'info',
    };
    delete (env as Record<string, string | undefined>).REDIS_URL;
    const worker = spawnWorker(env, { name: 'no-hash-tag' });
    const exit = await worker.waitForExit(20_000);
    expect(exit).toEqual({ code: EX_CONFIG, signal: null });
    const lines = worker.output().split('\n');
    expect(lines.some((line) => line.includes('QUEUE_PREFIX') && /hash tag/.test(line))).toBe(true);
    expect(worker.output()).not.toContain(h.sim.clientSecret);
  });
});
