import { createTrackHandler } from '../jobs/track-transfer/handler.ts';
import { QueueName, trackJobId } from '../queues/names.ts';
import type { QueueWorker } from '../queues/workers.ts';
import { POLL_FAILURES_ALERT, trackLimiter } from '../timing.ts';
import type { Subsystem, SubsystemDeps } from './subsystem.ts';

/** Tracking: the track-transfer queue's worker, paced by the request budget (docs/architecture.md, "Tracking"). */
export function tracking({ config, ledger, custody, budget, queues, workers, metrics }: SubsystemDeps): Subsystem {
  const handler = createTrackHandler({
    ledger,
    custody,
    pollMinMs: config.track.pollMinMs,
    pollMaxMs: config.track.pollMaxMs,
    pacedByBudget: config.custody.maxRps > 0,
    countPollOnRead: config.custody.maxRps === 0,
    deadlineMs: config.track.deadlineMs,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onPollFailed: (streak) => {
      metrics.pollFailures.inc();
      if (streak === POLL_FAILURES_ALERT) metrics.pollFailureStreaks.inc();
    },
    onUnmatched: () => metrics.unmatchedTransfers.inc(),
    onHalted: (state) => metrics.haltedTransfers.inc({ state }),
    onPollStretched: (ms) => metrics.pollStretch.observe(ms / 1000),
    onBroadcast: (calls) => metrics.callsPerTransfer.observe(calls),
    onFoundForOther: () => metrics.foundForOther.inc(),
    wake: async (sequenceId) => {
      const job = await queues[QueueName.TRACK].getJob(trackJobId(sequenceId));
      // Only a tracker waiting for its next poll: an active one reads the ledger itself anyway.
      if (job && (await job.isDelayed())) await job.promote().catch(() => {});
    },
  });
  const limiter = trackLimiter(budget.params.intervalMs);

  let worker: QueueWorker | undefined;
  return {
    async start() {
      worker = workers.start(QueueName.TRACK, handler, { concurrency: config.track.concurrency, ...(limiter ? { limiter } : {}) });
    },
    async close() {
      await worker?.close();
    },
  };
}
