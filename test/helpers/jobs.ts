import type { Queue } from 'bullmq';
import { until } from './wait.ts';

/**
 * Waits until job `jobId` completed; its return value. Reads the state first and fetches the job only
 * then: a Job object fetched while the job was still active keeps `returnvalue` null, even when its
 * getState() (which asks Redis anew) already says completed.
 */
export async function completedReturnValue(queue: Queue, jobId: string, timeoutMs = 15_000): Promise<Record<string, unknown>> {
  await until(`job ${jobId} completed`, timeoutMs, async () => ((await queue.getJobState(jobId)) === 'completed' ? true : undefined));
  const job = await queue.getJob(jobId);
  if (job === undefined) throw new Error(`job ${jobId} completed but is gone`);
  return job.returnvalue as Record<string, unknown>;
}
