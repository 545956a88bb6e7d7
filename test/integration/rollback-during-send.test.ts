/**
 * A send accepted upstream whose answer reaches the worker after Redis went back in time (a lagging
 * replica promoted, a snapshot restored while the send was in flight). The older copy shows no record
 * of the transfer (the copy predates its first run), so the runner's mark is refused ('epoch': the tick
 * and its writer mark went back; the loss is declared). What the answer proved stays true: the runner
 * records it ('proven', the record made again from its job), instead of dropping it for a lookup that
 * cannot see the transfer yet and a resend that a provider without duplicate refusal accepts.
 *
 * The real worker in this process, the real simulator over HTTP (answers 2 s after it accepted a send,
 * lists nothing for an hour, accepts a sequenceId twice), a real Redis put back in place (DUMP/RESTORE
 * of every key under the prefix, connections kept, as behind a moved primary endpoint).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { metricValue, startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

const TRANSFERS = 5;

describe('an accepted send whose answer arrives after the ledger went back in time', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({
      name: 'rollback-during-send',
      worker: false,
      // The send's answer comes 2 s after the simulator accepted it: inside CUSTODY_TIMEOUT and the lease.
      env: { CUSTODY_TIMEOUT: '10s', SUBMIT_CONCURRENCY: String(TRANSFERS) },
      sim: {
        settings: {
          rejectDuplicates: false,
          visibleAfterMs: 3_600_000,
          txidAfterMs: 24 * 3_600_000,
          latencyMs: { sendTransaction: 2_000 },
        },
      },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('records the send its answer proved, sends nothing again, and declares the loss once', { timeout: 120_000 }, async () => {
    await new Ledger(h.redis, createKeys(h.prefix, h.config.queue.eventsStream), {
      eventsMaxLen: h.config.queue.eventsMaxLen,
      retentionMs: h.config.retention.transfersMs,
    }).epoch.init();
    const ids: string[] = [];
    for (let i = 0; i < TRANSFERS; i++) {
      const payload = samplePayload();
      ids.push(payload.halfSigned.sequenceId);
      await h.producer.submit(payload);
    }
    // The copy Redis goes back to: the jobs waiting, the epoch, no record of any transfer.
    const names = await h.redis.keys(`${h.prefix}*`);
    const copy = await Promise.all(
      names.map(async (name) => ({ name, dump: (await h.redis.dumpBuffer(name))!, ttl: await h.redis.pttl(name) })),
    );

    await h.startWorker();
    const accepted = (id: string) => h.sim.stats().sends[id]?.accepted ?? 0;
    await until('every send accepted upstream (its answer still on its way)', 30_000, async () =>
      ids.every((id) => accepted(id) === 1) ? true : undefined,
    );

    const now = await h.redis.keys(`${h.prefix}*`);
    if (now.length > 0) await h.redis.del(...now);
    for (const { name, dump, ttl } of copy) await h.redis.restore(name, ttl > 0 ? ttl : 0, dump);

    const has = (events: TransferEvent[], id: string) => events.some((e) => e.sequenceId === id && e.event === 'transfer.submitted');
    const events = await h.waitForEvents((all) => ids.every((id) => has(all, id)), 60_000);
    // The jobs the copy held run again and find the transfers submitted.
    await until('the submit jobs the copy put back are done', 60_000, async () => {
      const counts = await h.app!.queues[QueueName.SUBMIT].getJobCounts('waiting', 'active', 'delayed', 'prioritized');
      return Object.values(counts).every((n) => n === 0) ? true : undefined;
    });

    const twice = ids.filter((id) => accepted(id) !== 1);
    expect(twice, `sequenceIds not accepted exactly once upstream: ${twice.join(', ')}`).toEqual([]);
    for (const id of ids) {
      const submitted = events.filter((e) => e.sequenceId === id && e.event === 'transfer.submitted');
      expect(submitted).toHaveLength(1);
      // Our own send's answer, not a lookup's finding or a duplicate's refusal.
      expect((submitted[0]!.data as { transfer: unknown }).transfer).not.toBeNull();
      expect((await h.app!.ledger.get(id))?.state).toBe('submitted');
    }
    expect(await metricValue(h, 'custody_ledger_lost_total')).toBe(1);
  });
});
