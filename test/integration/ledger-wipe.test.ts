/**
 * A Redis that comes back empty (a node promoted before it synchronised, an operator's FLUSHALL): the
 * ledger, its tombstones, the queues and the events stream are gone, and the producer re-enqueues
 * every transfer that showed no event. With a provider that accepts a sequenceId twice, the worker
 * must still send none of them again: the ledger's epoch tells it that its memory is gone, and every
 * transfer is looked up before its first send (src/ledger/epoch.ts, steps/recover.ts).
 *
 * A private redis-server (FLUSHALL would wipe every other test's keys on the shared one), the real
 * worker in this process, the real simulator over HTTP with duplicate refusal off.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { runCli } from '../helpers/cli-process.ts';
import { processesTimeout } from '../helpers/timeouts.ts';
import { metricValue, startHarness, type Harness } from '../helpers/harness.ts';

const TRANSFERS = 12;

/** Log lines of the worker, parsed (pino JSON). */
function logSink(): { stream: Writable; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { stream, lines };
}

describe('a Redis that lost its data (FLUSHALL) while the worker runs', () => {
  let redis: RedisServerHandle;
  let h: Harness;
  const log = logSink();

  beforeAll(async () => {
    redis = await startRedisServer();
    h = await startHarness({
      name: 'ledger-wipe',
      redisUrl: redis.url,
      env: { REDIS_URL: redis.url, LOG_LEVEL: 'warn', SUBMIT_CONCURRENCY: '4' },
      sim: { settings: { rejectDuplicates: false } },
      logTo: log.stream,
    });
  });
  afterAll(async () => {
    await h?.close();
    await redis?.stop();
  });

  /** Every one of `ids` was submitted, or got an event that says it will not be (soon). */
  const settled = (events: TransferEvent[], ids: string[]) =>
    ids.every((id) =>
      events.some(
        (e) =>
          e.sequenceId === id && ['transfer.submitted', 'transfer.failed', 'transfer.rejected', 'transfer.unresolved'].includes(e.event),
      ),
    );

  it('sends none of the re-enqueued transfers again, says the ledger was lost once, and counts it', { timeout: 90_000 }, async () => {
    const payloads: ValidSamplePayload[] = Array.from({ length: TRANSFERS }, () => samplePayload());
    const ids = payloads.map((p) => p.halfSigned.sequenceId);
    // First life: every transfer sent and accepted; half of them broadcast.
    for (const payload of payloads) await h.producer.submit(payload);
    const firstLife = await h.waitForEvents((events) => settled(events, ids), 30_000);
    for (const id of ids.slice(0, TRANSFERS / 2)) h.sim.setTxid(id);
    await h.waitForEvents((events) =>
      ids.slice(0, TRANSFERS / 2).every((id) => events.some((e) => e.sequenceId === id && e.event === 'transfer.broadcast')),
    );
    const oldEpoch = firstLife.find((e) => e.event === 'transfer.submitted')!.epoch;
    for (const id of ids) expect(h.sim.stats().sends[id]?.accepted).toBe(1);

    // Redis comes back empty; the producer re-enqueues what it no longer sees an event for (everything).
    await h.redis.flushall();
    for (const payload of payloads) await h.producer.submit(payload);
    const secondLife = await h.waitForEvents((events) => settled(events, ids), 60_000);

    const twice = ids.filter((id) => (h.sim.stats().sends[id]?.accepted ?? 0) > 1);
    expect(twice, `sequenceIds accepted twice upstream: ${twice.length} of ${TRANSFERS}`).toEqual([]);
    expect(oldEpoch).toMatch(/^[0-9a-f]{12}$/);
    // Each second life: found by a lookup, submitted without a send, under a new epoch.
    for (const id of ids) {
      const submitted = secondLife.find((e) => e.sequenceId === id && e.event === 'transfer.submitted');
      expect(submitted?.data).toMatchObject({ recoveredBy: 'get-transfer', transfer: null });
      expect(submitted?.epoch).toBeDefined();
      expect(submitted?.epoch).not.toBe(oldEpoch);
    }
    expect(await metricValue(h, 'custody_ledger_lost_total')).toBe(1);
    expect(await metricValue(h, 'custody_ledger_recovery_lookups_total', '{found="found"}')).toBe(TRANSFERS);
    expect(await metricValue(h, 'custody_ledger_recovery_until_seconds')).toBeGreaterThan(Date.now() / 1000);
    const lost = log.lines.filter((line) => line.msg.startsWith('ledger lost'));
    expect(lost).toHaveLength(1);
    expect(lost[0]!.level).toBe('error');

    // A transfer new to this life is looked up too (absent), then sent once.
    const fresh = samplePayload();
    await h.producer.submit(fresh);
    const id = fresh.halfSigned.sequenceId;
    await h.producer.waitForTerminal(id, 15_000, new Set(['transfer.submitted']));
    expect(h.sim.stats().sends[id]?.accepted).toBe(1);
    expect(await metricValue(h, 'custody_ledger_recovery_lookups_total', '{found="absent"}')).toBe(1);
  });
});

describe('every process restarted onto a Redis that lost its data, then `ledger init --after-loss`', () => {
  let redis: RedisServerHandle;
  let h: Harness;

  beforeAll(async () => {
    redis = await startRedisServer();
    h = await startHarness({
      name: 'ledger-init-after-loss',
      redisUrl: redis.url,
      worker: false,
      env: { REDIS_URL: redis.url, LOG_LEVEL: 'silent', SUBMIT_CONCURRENCY: '4', LEDGER_INIT: 'manual' },
      sim: { settings: { rejectDuplicates: false } },
    });
  });
  afterAll(async () => {
    await h?.close();
    await redis?.stop();
  });

  const cliEnv = () => ({ REDIS_URL: redis.url, QUEUE_PREFIX: h.prefix, LEDGER_INIT: 'manual' });
  const submittedAll = (events: TransferEvent[], ids: string[]) =>
    ids.every((id) => events.some((e) => e.sequenceId === id && e.event === 'transfer.submitted'));

  it('looks every re-enqueued transfer up and sends none again', { timeout: processesTimeout(2, 100_000) }, async () => {
    const fresh = await runCli(['ledger', 'init', '--fresh', '--json'], { env: cliEnv() });
    expect(fresh.code, fresh.stderr).toBe(0);
    await h.startWorker();
    const payloads: ValidSamplePayload[] = Array.from({ length: 6 }, () => samplePayload());
    const ids = payloads.map((p) => p.halfSigned.sequenceId);
    for (const payload of payloads) await h.producer.submit(payload);
    await h.waitForEvents((events) => submittedAll(events, ids), 30_000);

    // Redis comes back empty, and every worker process restarts onto it: none remembers the epoch.
    await h.redis.flushall();
    await h.app!.close();
    await h.startWorker();
    for (const payload of payloads) await h.producer.submit(payload);
    // LEDGER_INIT=manual: nothing is sent until an operator says what happened.
    const declared = await runCli(['ledger', 'init', '--after-loss', '--json'], { env: cliEnv() });
    expect(declared.code, declared.stderr).toBe(0);
    expect(JSON.parse(declared.stdout)).toMatchObject({ created: true, afterLoss: true, recoveryActive: true });

    const secondLife = await h.waitForEvents((events) => submittedAll(events, ids), 60_000);
    const twice = ids.filter((id) => (h.sim.stats().sends[id]?.accepted ?? 0) > 1);
    expect(twice, `sequenceIds accepted twice upstream: ${twice.length} of ${ids.length}`).toEqual([]);
    for (const id of ids) {
      const submitted = secondLife.find((e) => e.sequenceId === id && e.event === 'transfer.submitted');
      expect(submitted?.data).toMatchObject({ recoveredBy: 'get-transfer' });
    }
  });
});
