import { DelayedError, UnrecoverableError, Worker, type Job, type JobJson } from 'bullmq';
import type { Logger } from '../logger.ts';
import type { InFlight } from './in-flight.ts';
import { LazyJobLog, type JobLog } from './job-log.ts';
import { RateLimited, RetryLater, WaitForSlot, type JobOutcome } from './outcomes.ts';
import { backoffDelay, UNEXPECTED_ERROR_RETRY } from '../timing.ts';

export interface JobContext<T = unknown> {
  job: Job<T>;
  token: string | undefined;
  log: JobLog;
}

export type Handler<R> = (context: JobContext) => Promise<R>;

export interface ProcessorOptions {
  queue: string;
  /** The one job name this queue processes (docs/contract.md section 3): any other fails for good, untouched. */
  jobName: string;
  logger: Logger;
  /** Pauses the queue for every worker (BullMQ's queue-wide rate limit). */
  rateLimit: (ms: number) => Promise<void>;
  onFinished?: (queue: string, outcome: JobOutcome, durationMs: number) => void;
  /** Counts running jobs for shutdown. */
  inFlight?: InFlight;
  /** A job refused before its handler ran: another name, or data that is not JSON. */
  onRefused?: (queue: string, reason: 'job_name' | 'unparsable_data') => void;
}

/**
 * Thrown after the processor moved its job to delayed itself. BullMQ's worker recognises it by its class
 * or name (handleFailed), never by its identity, message or stack, and keeps no reference to it: one
 * instance serves every job: a new one would capture a stack on every poll, for nothing (bench/README.md,
 * "What the profile found").
 */
const MOVED_TO_DELAYED = new DelayedError();

/** Stands in for the data of a job whose stored data is not JSON (see TransferWorker). */
export const UNPARSABLE_DATA: unique symbol = Symbol('unparsable job data');

/**
 * BullMQ parses a job's data when it fetches the job; data that is not JSON throws there, before any
 * processor runs, and the job cycles active → stalled → wait for good. This worker hands such a job to
 * the processor with UNPARSABLE_DATA instead, which fails it for good (its stored data left as it was,
 * for an operator to look at).
 */
export class TransferWorker<R = unknown> extends Worker<unknown, R> {
  protected override createJob(data: JobJson, jobId: string): Job<unknown, R> {
    try {
      return super.createJob(data, jobId);
    } catch {
      const raw = data as unknown as Record<string, unknown>;
      const opts = typeof raw.opts === 'string' && safeJson(raw.opts) ? raw.opts : '{}';
      const job = super.createJob({ ...data, data: '{}', opts } as unknown as JobJson, jobId);
      job.data = { [UNPARSABLE_DATA]: true };
      return job;
    }
  }
}

function safeJson(text: string | undefined): boolean {
  try {
    JSON.parse(text ?? '{}');
    return true;
  } catch {
    return false;
  }
}

/**
 * The thin wrapper around every handler: binds the job's log context, and is the one place that turns
 * a handler's outcome into a BullMQ move. Return = completed; RetryLater = delayed without using an
 * attempt; RateLimited (upstream 429) and WaitForSlot (our budget) = queue paused, job back to wait; UnrecoverableError (a job of another name, data
 * that is not JSON) = failed for good; anything else = unexpected, retried later.
 */
export function createProcessor<R>(handler: Handler<R>, options: ProcessorOptions) {
  return async (job: Job, token?: string): Promise<R> => {
    const started = performance.now();
    const attempt = job.attemptsStarted;
    const log = new LazyJobLog(options.logger, () => ({
      queue: options.queue,
      jobId: job.id,
      attempt,
      sequenceId: sequenceIdOf(job.data),
    }));
    let outcome: JobOutcome = 'completed';
    options.inFlight?.start();
    try {
      if (isUnparsable(job.data)) {
        options.onRefused?.(options.queue, 'unparsable_data');
        throw new UnrecoverableError('job data is not JSON: not a transfer, left as it is for inspection');
      }
      if (job.name !== options.jobName) {
        options.onRefused?.(options.queue, 'job_name');
        throw new UnrecoverableError(
          `job name "${job.name.slice(0, 64)}" is not "${options.jobName}": this queue processes only that name`,
        );
      }
      return await handler({ job, token, log });
    } catch (error) {
      if (error instanceof UnrecoverableError) {
        outcome = 'refused';
        log.error({ reason: error.message }, 'job refused, failed for good');
        throw error;
      }
      if (error instanceof RetryLater) {
        outcome = 'delayed';
        log.debug({ delayMs: error.delayMs, reason: error.reason }, 'job delayed');
        await job.moveToDelayed(Date.now() + error.delayMs, token);
        throw MOVED_TO_DELAYED;
      }
      if (error instanceof WaitForSlot) {
        outcome = 'rate_limited';
        log.debug({ delayMs: error.delayMs }, 'no request slot yet, queue waits for it');
        await options.rateLimit(error.delayMs);
        throw Worker.RateLimitError();
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
      throw MOVED_TO_DELAYED;
    } finally {
      options.inFlight?.end();
      options.onFinished?.(options.queue, outcome, performance.now() - started);
    }
  };
}

function isUnparsable(data: unknown): boolean {
  return typeof data === 'object' && data !== null && UNPARSABLE_DATA in data;
}

function sequenceIdOf(data: unknown): string | undefined {
  const d = data as { sequenceId?: unknown; halfSigned?: { sequenceId?: unknown } } | null;
  const value = d?.sequenceId ?? d?.halfSigned?.sequenceId;
  return typeof value === 'string' ? value.slice(0, 128) : undefined;
}
