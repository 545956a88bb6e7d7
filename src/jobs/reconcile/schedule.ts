import type { Queue } from 'bullmq';
import type { Logger } from '../../logger.ts';
import { QueueName } from '../../queues/names.ts';

/**
 * The reconciliation schedule: one job scheduler for all worker processes. Upserting the same id from
 * each is idempotent (the next run's job id is derived from its time slot). BullMQ adds a scheduler's
 * next job only when the current one is processed, so a job lost with a Redis failover (acknowledged
 * by a primary that died before its replica had it) would end the schedule for good: every process
 * upserts it again once per RECONCILE_EVERY, which puts back a missing next run and changes nothing
 * otherwise.
 */
export async function startReconcileSchedule(queue: Queue, everyMs: number, logger: Logger): Promise<{ stop(): void }> {
  const upsert = () =>
    queue.upsertJobScheduler(
      QueueName.RECONCILE,
      { every: everyMs },
      { name: QueueName.RECONCILE, data: {}, opts: { removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } } },
    );
  await upsert();
  const timer = setInterval(() => {
    upsert().catch((err: unknown) => logger.warn({ err }, 'could not renew the reconciliation schedule, next try later'));
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
