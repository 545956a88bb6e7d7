/**
 * A provider that does not narrow get-transfer lists the wallet's other transfers too, with their
 * sequenceIds. When the txids appear, one transfer's poll finds the others: they are recorded as found
 * and their trackers woken, so they go straight to the wallet-transaction lookup instead of polling
 * for themselves. Ten transfers of one wallet, real worker, real simulator: far fewer than ten polls
 * after the txids appear, and every transfer is broadcast with its own txid and wallet transaction.
 * The trackers' timers are minutes long; each poll is brought forward by promoting the tracker's
 * delayed job, as its timer would: one first poll of every transfer, then, once the txids appear, one
 * more of the first transfer. Counted, not raced against the timers, so a busy machine, slow to record
 * and wake the others, cannot let their own polls in first.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';

const TRANSFERS = 10;

describe('transfers found in another transfer’s answer', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({
      name: 'found-in-other',
      sim: { settings: { narrowResults: false, includeSequenceIdInTransactions: true, txidAfterMs: 24 * 3_600_000 } },
      // A tracker's own timer runs 300 s, then 150 to 300 s: only the polls this test brings forward happen.
      env: { TRACK_POLL_MIN: '300s', TRACK_POLL_MAX: '300s' },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('settles the others from one answer: fewer polls than transfers, each broadcast with its own txid', async () => {
    const payloads = Array.from({ length: TRANSFERS }, (_, i) => samplePayload({ metadata: { n: String(i) } }));
    for (const payload of payloads) await h.producer.submit(payload);
    await until(
      `${TRANSFERS} submitted`,
      20_000,
      async () => {
        const events = await h.events();
        return events.filter((e) => e.event === 'transfer.submitted').length >= TRANSFERS ? true : undefined;
      },
      100,
    );

    const trackQueue = h.app!.queues[QueueName.TRACK];
    const waitingTracker = (sequenceId: string) =>
      until(`the tracker of ${sequenceId} waiting for its next poll`, 20_000, async () => {
        const job = await trackQueue.getJob(trackJobId(sequenceId));
        return job && (await job.isDelayed()) ? job : undefined;
      });
    // A first poll of every transfer, before the txids exist. Then the txids appear, once those polls
    // are answered and the first tracker waits again.
    for (const payload of payloads) await (await waitingTracker(payload.halfSigned.sequenceId)).promote();
    await until(
      'a first poll of every transfer',
      20_000,
      async () => ((h.sim.stats().requests.getTransfer['200'] ?? 0) >= TRANSFERS ? true : undefined),
      50,
    );
    const first = await waitingTracker(payloads[0]!.halfSigned.sequenceId);
    const pollsBefore = h.sim.stats().requests.getTransfer['200'] ?? 0;
    await fetch(`${h.sim.url}/_sim/txids`, { method: 'POST' });
    // Its next poll now, as its timer would make it: that one answer lists the other nine with their txids.
    await first.promote();
    const broadcasts = await until(
      `${TRANSFERS} broadcast`,
      30_000,
      async () => {
        const found = (await h.events()).filter((e) => e.event === 'transfer.broadcast');
        return found.length >= TRANSFERS ? found : undefined;
      },
      100,
    );
    const polls = (h.sim.stats().requests.getTransfer['200'] ?? 0) - pollsBefore;

    for (const event of broadcasts) {
      const data = event.data as { txid: string; walletTransaction: { txid: string } | null };
      expect(data.txid).toBe(h.sim.transfer(event.sequenceId)!.txid);
      expect(data.walletTransaction?.txid).toBe(data.txid);
    }
    console.info(`[found-in-other] polls after the txids appeared: ${polls} for ${TRANSFERS} transfers`);
    expect(polls).toBeLessThan(TRANSFERS / 2);
    expect(h.sim.stats().requests.getWalletTransaction['200']).toBe(TRANSFERS);
  }, 60_000);
});
