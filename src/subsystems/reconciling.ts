import { createReconcileHandler } from '../jobs/reconcile/handler.ts';
import { startReconcileSchedule } from '../jobs/reconcile/schedule.ts';
import { QueueName } from '../queues/names.ts';
import type { QueueWorker } from '../queues/workers.ts';
import type { Subsystem, SubsystemDeps } from './subsystem.ts';

/** Reconciling: the reconcile queue's worker and the schedule every process keeps (src/jobs/reconcile/schedule.ts). */
export function reconciling({ config, ledger, custody, queues, trackers, workers, logger, metrics }: SubsystemDeps): Subsystem {
  // Aborted by close(), before the worker drains; a job fetched at that very moment sees it too.
  const shutdown = new AbortController();
  const handler = createReconcileHandler({
    ledger,
    submitQueue: queues[QueueName.SUBMIT],
    trackers,
    custody,
    graceMs: config.reconcile.graceMs,
    retentionMs: config.retention.transfersMs,
    shutdown: shutdown.signal,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onRetry: (outcome) => metrics.reconcileRetries.inc({ outcome }),
  });

  let worker: QueueWorker | undefined;
  let schedule: { stop(): void } | undefined;
  return {
    async start() {
      worker = workers.start(QueueName.RECONCILE, handler, {
        concurrency: 1,
        removeOnComplete: { count: 100 },
        removeOnFail: { count: 100 },
      });
      schedule = await startReconcileSchedule(queues[QueueName.RECONCILE], config.reconcile.everyMs, logger);
    },
    async close() {
      schedule?.stop();
      // A run can take long (it verifies many broadcasts): it is told to stop early, which is safe since
      // every run picks up where the last one left off.
      shutdown.abort();
      await worker?.close();
    },
  };
}
