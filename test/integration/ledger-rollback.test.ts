/**
 * A Redis that comes back *older* (issue: the ledger's memory): a snapshot-only Redis restarted from
 * its last RDB snapshot, while the worker that saw the newer ledger lives on. The snapshot holds the
 * jobs waiting and the epoch, but none of the sends, submissions or broadcasts made after it; the
 * restored queue hands every job out again. With a provider that accepts a sequenceId twice, the worker
 * must still send none of them again, a cancel of a broadcast transfer must be too late, the loss must
 * be said once, and no (epoch, sequenceId, version) may name two different events.
 *
 * A private redis-server without AOF (its SAVE is the snapshot, its restart reloads it), the real
 * worker in this process, the real simulator over HTTP with duplicate refusal off, the real CLI.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { runCli } from '../helpers/cli-process.ts';
import { metricValue, startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

const TRANSFERS = 10;

function logSink(): { stream: Writable; lines: Array<{ level: number | string; msg: string }> } {
  const lines: Array<{ level: number | string; msg: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) lines.push(JSON.parse(line) as { level: number | string; msg: string });
      done();
    },
  });
  return { stream, lines };
}

describe('a snapshot-only Redis restarted from its snapshot while the worker runs', () => {
  let redis: RedisServerHandle;
  let h: Harness;
  const log = logSink();

  beforeAll(async () => {
    redis = await startRedisServer({ appendonly: false });
    h = await startHarness({
      name: 'ledger-rollback',
      redisUrl: redis.url,
      worker: false,
      env: { REDIS_URL: redis.url, LOG_LEVEL: 'warn', SUBMIT_CONCURRENCY: '4' },
      // Broadcast only when the test sets a txid.
      sim: { settings: { rejectDuplicates: false, txidAfterMs: 24 * 3_600_000 } },
      logTo: log.stream,
    });
  });
  afterAll(async () => {
    await h?.close();
    await redis?.stop();
  });

  const has = (events: TransferEvent[], id: string, type: string) => events.some((e) => e.sequenceId === id && e.event === type);

  it(
    'sends nothing twice, answers a cancel too-late, says the loss once, and never reuses a version under one epoch',
    { timeout: 120_000 },
    async () => {
      // The ledger exists (a worker ran before); the jobs wait; the snapshot is taken now.
      await new Ledger(h.redis, createKeys(h.prefix, h.config.queue.eventsStream), {
        eventsMaxLen: h.config.queue.eventsMaxLen,
        retentionMs: h.config.retention.transfersMs,
      }).epoch.init();
      const payloads: ValidSamplePayload[] = Array.from({ length: TRANSFERS }, () => samplePayload());
      const ids = payloads.map((p) => p.halfSigned.sequenceId);
      for (const payload of payloads) await h.producer.submit(payload);
      expect(await h.redis.save()).toBe('OK');

      // After the snapshot: every transfer sent and accepted; half of them broadcast.
      await h.startWorker();
      await h.waitForEvents((events) => ids.every((id) => has(events, id, 'transfer.submitted')), 30_000);
      const broadcast = ids.slice(0, TRANSFERS / 2);
      for (const id of broadcast) h.sim.setTxid(id);
      const firstLife = await h.waitForEvents((events) => broadcast.every((id) => has(events, id, 'transfer.broadcast')), 30_000);
      for (const id of ids) expect(h.sim.stats().sends[id]?.accepted).toBe(1);

      // Redis restarts from its snapshot: the jobs wait again, the ledger knows no send.
      await redis.kill();
      await redis.restart();
      await until('the worker declares the ledger lost', 30_000, async () =>
        (await metricValue(h, 'custody_ledger_lost_total')) === 1 ? true : undefined,
      );

      // The snapshot predates the worker's record of its settings: it records them again after reconnecting
      // (a CLI cancel is refused, VERSION_MISMATCH, while the ledger has an epoch and nothing is recorded).
      await until('the worker records its settings again', 30_000, async () =>
        (await h.redis.exists(createKeys(h.prefix, h.config.queue.eventsStream).workerSettings)) === 1 ? true : undefined,
      );
      // A cancel of a broadcast transfer, from another process (the CLI), and through the worker's ledger.
      const env = { REDIS_URL: redis.url, QUEUE_PREFIX: h.prefix };
      const cli = await runCli(['cancel', broadcast[0]!, '--reason', 'customer asked', '--json'], { env });
      expect(cli.code, cli.stderr).toBe(4);
      expect(JSON.parse(cli.stdout)).toMatchObject({ outcome: 'too-late' });
      expect(await h.app!.ledger.cancel(broadcast[1]!, { reason: 'customer asked', by: 'test' })).toMatchObject({ outcome: 'too-late' });

      // Every job runs again: each transfer is looked up first and found, none is sent again.
      const secondLife = await h.waitForEvents((events) => ids.every((id) => has(events, id, 'transfer.submitted')), 60_000);
      await h.waitForEvents((events) => broadcast.every((id) => has(events, id, 'transfer.broadcast')), 60_000);
      const twice = ids.filter((id) => (h.sim.stats().sends[id]?.accepted ?? 0) > 1);
      expect(twice, `sequenceIds accepted twice upstream: ${twice.length} of ${TRANSFERS}`).toEqual([]);
      for (const id of ids) {
        const submitted = secondLife.find((e) => e.sequenceId === id && e.event === 'transfer.submitted');
        expect(submitted?.data).toMatchObject({ recoveredBy: 'get-transfer' });
      }
      // Our own transfers are never reported as someone else's, and nothing was cancelled.
      const after = await h.events();
      expect(after.filter((e) => e.event === 'transfer.unresolved' || e.event === 'transfer.cancelled')).toEqual([]);
      // A consumer that read the first life keys events by (epoch, sequenceId, version): no key names two events.
      const byKey = new Map<string, string>();
      for (const event of [...firstLife, ...after]) {
        const key = `${event.epoch}/${event.sequenceId}/${event.version}`;
        const seen = byKey.get(key);
        if (seen !== undefined) expect(seen, `two events under ${key}`).toBe(event.event);
        byKey.set(key, event.event);
      }
      const lost = log.lines.filter((line) => line.msg.startsWith('ledger lost'));
      expect(lost).toHaveLength(1);
      expect(lost[0]!.level).toBe('error');
    },
  );
});
