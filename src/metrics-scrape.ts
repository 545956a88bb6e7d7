import type { App } from './app.ts';
import { NON_TERMINAL_STATES } from './ledger/ledger.ts';
import type { Metrics } from './metrics.ts';
import { QueueName } from './queues/names.ts';
import { READY_CHECK_TIMEOUT_MS, STALE_TRANSFER_AGE_MS } from './timing.ts';

/**
 * Gauges read from Redis when /metrics is scraped: queue depths and ages, the ledger's non-terminal
 * transfers and its recovery window, the provider's pause, the last reconciliation, and readiness (with a write probe). Queue- and ledger-wide values are the same on
 * every replica: they are exported by each (no gap when one replica is down) and dashboards and
 * alerts aggregate them with max, never sum (docs/operations.md, "Metrics, logs and alerts"). Every read is bounded: ZCARD, one
 * ZRANGE entry, job counts, the newest completed reconcile job, and the stale scan's limit.
 */
export async function refreshScrapeGauges(app: App, metrics: Metrics): Promise<void> {
  try {
    // Readiness as /readyz judges it: the reads below show Redis answers; the probe that it takes writes.
    const [, probe] = await Promise.all([refresh(app, metrics), app.redisErrors.probeWrites(READY_CHECK_TIMEOUT_MS)]);
    metrics.ready.set(app.running() && probe.accepted ? 1 : 0);
  } catch (error) {
    metrics.ready.set(0);
    throw error;
  }
}

async function refresh(app: App, metrics: Metrics): Promise<void> {
  const ledgerNow = await app.ledger.now();
  const [stale, active, epoch, pausedUntil] = await Promise.all([
    app.ledger.staleByState(ledgerNow - STALE_TRANSFER_AGE_MS),
    app.ledger.activeSummary(),
    app.ledger.epoch.peek(),
    app.budget.pausedUntil(),
  ]);
  // The ledger's window, whichever process started or ended it (`ledger accept-epoch` ends it at once).
  metrics.ledgerRecoveryUntil.set(epoch.recoveryUntil / 1000);
  // A provider's pause, whichever process got the 429: the key holds its end and expires then.
  metrics.upstreamPausedUntil.set(pausedUntil / 1000);
  for (const state of NON_TERMINAL_STATES) metrics.staleTransfers.set({ state }, stale[state] ?? 0);
  metrics.activeTransfers.set(active.count);
  metrics.oldestActiveAge.set(active.oldestChangeAt === undefined ? 0 : Math.max(0, ledgerNow - active.oldestChangeAt) / 1000);

  await Promise.all(
    Object.entries(app.queues).map(async ([name, queue]) => {
      const [counts, [oldest]] = await Promise.all([
        queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized'),
        // getJobs on 'wait' lists newest first; asc=true gives the one waiting longest.
        queue.getJobs(['wait'], 0, 0, true),
      ]);
      for (const [state, count] of Object.entries(counts)) metrics.queueJobs.set({ queue: name, state }, count);
      metrics.queueOldestAge.set({ queue: name }, oldest ? Math.max(0, ledgerNow - oldest.timestamp) / 1000 : 0);
    }),
  );
  const [lastRun] = await app.queues[QueueName.RECONCILE].getJobs(['completed'], 0, 0, false);
  metrics.reconcileLastCompleted.set(lastRun?.finishedOn ? lastRun.finishedOn / 1000 : 0);
}
