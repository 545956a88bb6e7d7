import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventData } from '../../packages/producer/src/events.ts';
import { createLogger } from '../../src/logger.ts';
import { createReconcileHandler, type ReconcileResult } from '../../src/jobs/reconcile/handler.ts';
import { TransferState } from '../../src/ledger/ledger.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Trackers } from '../../src/queues/trackers.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { describeProfiles, simFor } from '../helpers/profiles.ts';

describeProfiles('reconcile', (profile) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      name: `reconcile-${profile}`,
      sim: simFor(profile),
      env: { RECONCILE_GRACE: '0', TRACK_POLL_MIN: '50ms', TRACK_POLL_MAX: '100ms' },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  /**
   * Runs reconciliation through the queue, as the schedule does, and returns its completed event's counts.
   * Waits first for any run in progress (the schedule runs once at start-up) so the counts are this run's.
   */
  async function reconcileOnce(harness: Harness = h): Promise<EventData['reconcile.completed']> {
    const queue = harness.app!.queues[QueueName.RECONCILE];
    await reconcileIdle(harness);
    const before = (await harness.events()).filter((e) => e.event === 'reconcile.completed').length;
    await queue.add(QueueName.RECONCILE, {});
    const events = await harness.waitForEvents((all) => all.filter((e) => e.event === 'reconcile.completed').length > before);
    return events.filter((e) => e.event === 'reconcile.completed').at(-1)!.data;
  }

  async function reconcileIdle(harness: Harness = h): Promise<void> {
    const queue = harness.app!.queues[QueueName.RECONCILE];
    for (let i = 0; ; i++) {
      const counts = await queue.getJobCounts('active', 'waiting');
      if (counts.active === 0 && counts.waiting === 0) return;
      if (i > 400) throw new Error('reconcile queue never went idle');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async function removeJob(queue: (typeof QueueName)[keyof typeof QueueName], jobId: string): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const job = await h.app!.queues[queue].getJob(jobId);
      if (!job) return;
      try {
        await job.remove();
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20)); // locked while a poll runs: try again
      }
    }
    throw new Error(`could not remove ${jobId}`);
  }

  /** Puts a transfer in the ledger as a worker that died at `state` would have left it, with no job. */
  async function strandTransfer(state: 'gated' | 'submitting', sendFirst: boolean) {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    const ledger = h.app!.ledger;
    await ledger.transition(sequenceId, {
      from: ['-'],
      to: TransferState.RECEIVED,
      set: { jobId: 'job-that-died', walletId: '310', coin: 'eth', metadata: '', createdAt: Date.now(), payload: JSON.stringify(payload) },
    });
    await ledger.transition(sequenceId, { from: [TransferState.RECEIVED], to: TransferState.GATED, set: { gate: '{}' } });
    if (state === 'submitting') {
      // The lease of the dead worker's send has run out.
      await ledger.transition(sequenceId, {
        from: [TransferState.GATED],
        to: TransferState.SUBMITTING,
        lease: { mode: 'take', owner: 'worker-that-died', ms: 1 },
        set: { pending: 1 },
        increment: { sends: 1 },
      });
    }
    if (sendFirst) {
      const client = new CustodyClient({
        sdkUrl: h.sim.url,
        baseUrl: h.sim.url,
        clientId: h.sim.clientId,
        clientSecret: h.sim.clientSecret,
        tokenUrl: `${h.sim.url}/oauth/token`,
        timeoutMs: 1_000,
        connectTimeoutMs: 1_000,
        connections: 1,
      });
      await client.sendTransaction(310, { txHex: payload.txHex as string, halfSigned: payload.halfSigned });
      await client.close();
    }
    return sequenceId;
  }

  describe('reconciliation', () => {
    it('restores a tracking job deleted by hand, and the transfer still gets its txid', async () => {
      // No txid until the test sets it: a tracker that polled before it was deleted cannot have ended the
      // transfer (on a busy machine the steps up to the deletion can take longer than any fixed delay).
      h.sim.updateSettings({ txidAfterMs: 3_600_000 });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);
      await h.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.submitted']));
      await reconcileIdle(); // the run the schedule starts at boot would otherwise restore it at once
      // The submit job adds the tracker right after publishing transfer.submitted.
      for (let i = 0; !(await h.app!.queues[QueueName.TRACK].getJob(trackJobId(sequenceId))); i++) {
        if (i > 200) throw new Error('tracker never appeared');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await removeJob(QueueName.TRACK, trackJobId(sequenceId));
      expect(await h.app!.queues[QueueName.TRACK].getJob(trackJobId(sequenceId))).toBeUndefined();

      const counts = await reconcileOnce();
      expect(counts.trackersRestored).toBeGreaterThanOrEqual(1);
      h.sim.setTxid(sequenceId);
      const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
      h.sim.updateSettings({ txidAfterMs: 0 });
    });

    it.each([
      ['sent and visible', true, 0, { accepted: 1, duplicates: 0 }],
      ['sent, not yet visible (resend answered 409)', true, 60_000, { accepted: 1, duplicates: 1 }],
      ['never sent', false, 0, { accepted: 1, duplicates: 0 }],
    ] as const)(
      'resolves a transfer left in "send may have gone out" (%s) with 0 double sends',
      async (_name, sent, visibleAfterMs, sends) => {
        h.sim.updateSettings({ visibleAfterMs });
        try {
          const sequenceId = await strandTransfer('submitting', sent);
          const counts = await reconcileOnce();
          expect(counts.resubmitted).toBeGreaterThanOrEqual(1);
          const outcome = await h.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.submitted']));
          expect(outcome.event).toBe('transfer.submitted');
          expect(h.sim.stats().sends[sequenceId]).toEqual(sends);
        } finally {
          h.sim.updateSettings({ visibleAfterMs: 0 });
        }
      },
    );

    it('recreates a submission lost before it was sent', async () => {
      const sequenceId = await strandTransfer('gated', false);
      await reconcileOnce();
      const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    });

    it('verifies broadcast transfers once with get-transfer by txId and the wallet transaction', async () => {
      const payload = samplePayload();
      await h.producer.submit(payload);
      await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 10_000);
      const byTxIdBefore = h.sim.stats().requests.getTransfer?.['200'] ?? 0;
      const first = await reconcileOnce();
      expect(first.verified).toBeGreaterThanOrEqual(1);
      expect(first.mismatches).toBe(0);
      expect(h.sim.stats().requests.getTransfer?.['200'] ?? 0).toBeGreaterThan(byTxIdBefore);
      const second = await reconcileOnce();
      expect(second.verified).toBe(0);
    });

    it('runs once when started twice at once: one does the work, the other publishes nothing', async () => {
      await strandTransfer('gated', false);
      const handler = createReconcileHandler({
        ledger: h.app!.ledger,
        submitQueue: h.app!.queues[QueueName.SUBMIT],
        trackers: new Trackers(h.app!.queues[QueueName.TRACK], h.app!.ledger, 50),
        custody: h.app!.custody,
        graceMs: 0,
        retentionMs: h.config.retention.transfersMs,
      });
      const log = createLogger({ level: 'silent' });
      const context = { job: { id: 'manual', data: {} }, token: undefined, log } as unknown as JobContext;
      const before = (await h.events()).filter((e) => e.event === 'reconcile.completed').length;
      const results: ReconcileResult[] = await Promise.all([handler(context), handler(context)]);
      const ran = results.filter((r) => !r.skipped);
      expect(ran).toHaveLength(1);
      expect(results.filter((r) => r.skipped)).toHaveLength(1);
      expect(ran[0]).toMatchObject({ resubmitted: 1 });
      const completed = (await h.events()).filter((e) => e.event === 'reconcile.completed');
      expect(completed).toHaveLength(before + 1);
      expect(completed.at(-1)).toMatchObject({ sequenceId: '', version: 0 });
    });
  });

  describe('retention', () => {
    let r: Harness;
    beforeAll(async () => {
      r = await startHarness({ name: `retention-${profile}`, sim: simFor(profile), env: { RETENTION: '1s', RECONCILE_GRACE: '0' } });
    });
    afterAll(async () => {
      await r.close();
    });

    it('drops terminal records and their index entries after the retention time', async () => {
      r.sim.updateSettings({ travelRule: { outgoingTxn: 1, mandatory: true } });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await r.producer.submit(payload);
      expect((await r.producer.waitForTerminal(sequenceId, 10_000)).event).toBe('transfer.blocked');
      const keys = createKeys(r.prefix, r.config.queue.eventsStream);
      expect(await r.redis.exists(keys.transfer(sequenceId))).toBe(1);
      expect(await r.redis.zscore(keys.terminal, sequenceId)).not.toBeNull();
      expect(await r.redis.zscore(keys.byState('received'), sequenceId)).toBeNull();
      expect(await r.redis.zscore(keys.byState('gated'), sequenceId)).toBeNull();

      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect(await r.redis.exists(keys.transfer(sequenceId))).toBe(0);
      const counts = await reconcileOnce(r);
      expect(counts.retentionRemoved).toBe(1);
      expect(await r.redis.zscore(keys.terminal, sequenceId)).toBeNull();
    });
  });

  describe('reconciliation at shutdown', () => {
    let s: Harness;
    beforeAll(async () => {
      s = await startHarness({ name: `reconcile-shutdown-${profile}`, sim: simFor(profile), env: { RECONCILE_GRACE: '0' } });
    });
    afterAll(async () => {
      await s.close();
    });

    it('stops a long run between two transfers when the worker closes, and the next run does the rest', async () => {
      s.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 0 });
      const payloads = Array.from({ length: 12 }, () => samplePayload());
      for (const payload of payloads) await s.producer.submit(payload);
      for (const payload of payloads)
        expect((await s.producer.waitForTerminal(payload.halfSigned.sequenceId, 10_000)).event).toBe('transfer.broadcast');
      await reconcileIdle(s);

      // Each verification now takes two slow requests: the whole run would take several seconds.
      s.sim.updateSettings({ latencyMs: { getTransfer: 250, getWalletTransaction: 250 } });
      const queue = s.app!.queues[QueueName.RECONCILE];
      const job = await queue.add(QueueName.RECONCILE, {});
      for (let i = 0; (await job.getState()) !== 'active'; i++) {
        if (i > 400) throw new Error('reconcile job never started');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await s.app!.close();
      const interrupted = (await s.events()).filter((e) => e.event === 'reconcile.completed').at(-1)!.data;
      expect(interrupted.interrupted).toBe(true);
      expect(interrupted.verified).toBeLessThan(payloads.length);

      // A new worker's run verifies what the interrupted one left.
      s.sim.updateSettings({ latencyMs: { getTransfer: 0, getWalletTransaction: 0 } });
      await s.startWorker();
      const next = await reconcileOnce(s);
      expect(next.interrupted).toBe(false);
      expect((interrupted.verified as number) + (next.verified as number)).toBe(payloads.length);
    });
  });
});
