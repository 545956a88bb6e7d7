import type { App } from './app.ts';
import { NON_TERMINAL_STATES } from './ledger/ledger.ts';
import type { Metrics } from './metrics.ts';
import { STALE_SCAN_LIMIT, STALE_TRANSFER_AGE_MS } from './timing.ts';

/** Gauges read from Redis when /metrics is scraped (queue depths, stale transfers). */
export async function refreshScrapeGauges(app: App, metrics: Metrics): Promise<void> {
  const ledgerNow = await app.ledger.now();
  const stale = await app.ledger.staleByState(ledgerNow - STALE_TRANSFER_AGE_MS, STALE_SCAN_LIMIT);
  for (const state of NON_TERMINAL_STATES) metrics.staleTransfers.set({ state }, stale[state] ?? 0);
  await Promise.all(
    Object.entries(app.queues).map(async ([name, queue]) => {
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed', 'completed', 'prioritized');
      for (const [state, count] of Object.entries(counts)) metrics.queueJobs.set({ queue: name, state }, count);
    }),
  );
}
