import { DelayedError, Worker, type Job } from 'bullmq';
import type { Logger } from '../logger.ts';
import type { InFlight } from './in-flight.ts';
import { RateLimited, RetryLater } from './outcomes.ts';
import { backoffDelay, UNEXPECTED_ERROR_RETRY } from './profiles.ts';

export interface JobContext<T = unknown> {
  job: Job<T>;
  token: string | undefined;
  log: Logger;
}

export type Handler<R> = (context: JobContext) => Promise<R>;

export interface ProcessorOptions {
  queue: string;
  logger: Logger;
  /** Pauses the queue for every worker (BullMQ's queue-wide rate limit). */
  rateLimit: (ms: number) => Promise<void>;
  onFinished?: (queue: string, outcome: string, durationMs: number) => void;
  /** Counts running jobs for shutdown. */
  inFlight?: InFlight;
}

/**
 * The thin wrapper around every handler: binds the job's log context, and is the one place that turns
 * a handler's outcome into a BullMQ move. Return = completed; RetryLater = delayed without using an
 * attempt; RateLimited = queue paused, job back to wait; anything else = unexpected, retried later.
 */
export function createProcessor<R>(handler: Handler<R>, options: ProcessorOptions) {
  return async (job: Job, token?: string): Promise<R> => {
    const started = performance.now();
    const log = options.logger.child({
      queue: options.queue,
      jobId: job.id,
      attempt: job.attemptsStarted,
      sequenceId: sequenceIdOf(job.data),
    });
    let outcome = 'completed';
    options.inFlight?.start();
    try {
      return await handler({ job, token, log });
    } catch (error) {
      if (error instanceof RetryLater) {
        outcome = 'delayed';
        log.debug({ delayMs: error.delayMs, reason: error.reason }, 'job delayed');
        await job.moveToDelayed(Date.now() + error.delayMs, token);
        throw new DelayedError();
      }
      if (error instanceof RateLimited) {
        outcome = 'rate_limited';
        log.warn({ delayMs: error.delayMs }, 'upstream rate limit, queue paused');
        await options.rateLimit(error.delayMs);
        throw Worker.RateLimitError();
      }
      outcome = 'error';
      const delayMs = backoffDelay(UNEXPECTED_ERROR_RETRY, job.attemptsStarted);
      log.error({ err: error, delayMs }, 'unexpected error, job retried later');
      await job.moveToDelayed(Date.now() + delayMs, token);
      throw new DelayedError();
    } finally {
      options.inFlight?.end();
      options.onFinished?.(options.queue, outcome, performance.now() - started);
    }
  };
}

function sequenceIdOf(data: unknown): string | undefined {
  const d = data as { sequenceId?: unknown; halfSigned?: { sequenceId?: unknown } } | null;
  const value = d?.sequenceId ?? d?.halfSigned?.sequenceId;
  return typeof value === 'string' ? value.slice(0, 128) : undefined;
}
