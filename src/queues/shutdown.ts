import type { Worker } from 'bullmq';
import type { InFlight } from './in-flight.ts';

/** How long closing may take once no job runs any more, before connections are dropped. */
export const CLOSE_GRACE_MS = 2_000;

/**
 * `Worker.close()` waits for in-flight jobs, then for its blocking connection to end; a connection
 * that is reconnecting (Redis restarted or away) never ends, and close never resolves (bullmq#4656).
 * Our processors count their running jobs: once none runs and close has had CLOSE_GRACE_MS more,
 * nothing can be lost by dropping the connections, so we do.
 */
export async function closeWorkers(workers: Worker[], inFlight: InFlight): Promise<void> {
  const closing = Promise.all(workers.map((worker) => worker.close()));
  const drained = inFlight.idle().then(() => new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref()));
  const finished = await Promise.race([closing.then(() => true), drained.then(() => false)]);
  if (!finished)
    await Promise.all(
      workers.map((worker) =>
        withTimeout(
          worker.disconnect().catch(() => undefined),
          CLOSE_GRACE_MS,
        ),
      ),
    );
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);
}
