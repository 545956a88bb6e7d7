/**
 * Every outcome the processor wrapper records for one processing of a job (src/queues/processor.ts):
 * the `outcome` label of custody_worker_jobs_total (whose HELP lists these) and
 * custody_worker_job_duration_seconds. In order: returned; failed for good before the handler ran
 * (UnrecoverableError); RetryLater; RateLimited or WaitForSlot; anything else.
 */
export const JOB_OUTCOMES = ['completed', 'refused', 'delayed', 'rate_limited', 'error'] as const;
export type JobOutcome = (typeof JOB_OUTCOMES)[number];

/**
 * How a handler tells the processor wrapper what should happen to its job besides "done" (return)
 * and "unexpected" (any other throw). The wrapper is the one place that turns these into BullMQ moves.
 */
export class RetryLater extends Error {
  readonly code = 'RETRY_LATER';
  readonly delayMs: number;
  readonly reason: string;
  constructor(delayMs: number, reason: string) {
    // Thrown on every poll of every tracked transfer: a signal, not a fault, so no stack is captured
    // (a stack per poll is work for nothing: bench/README.md, "What the profile found").
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`retry in ${delayMs} ms: ${reason}`);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'RetryLater';
    this.delayMs = delayMs;
    this.reason = reason;
  }
}

/** Upstream said 429: pause the whole queue for `delayMs` and put the job back without using an attempt. */
export class RateLimited extends Error {
  readonly code = 'RATE_LIMITED';
  readonly delayMs: number;
  constructor(delayMs: number) {
    super(`rate limited for ${delayMs} ms`);
    this.name = 'RateLimited';
    this.delayMs = delayMs;
  }
}

/**
 * The shared request budget has no slot for this queue's calls for `delayMs`: the queue stops handing
 * out jobs until then (BullMQ's manual rate limit, for every worker of the queue) and this job goes
 * back to wait. Thrown by tracking jobs, whose queue the budget paces (custody/budget.ts, dispensed
 * requests): one turn-away per slot a higher class took, not one per transfer due.
 */
export class WaitForSlot extends Error {
  readonly code = 'WAIT_FOR_SLOT';
  readonly delayMs: number;
  constructor(delayMs: number) {
    // Thrown often under a saturated budget: no stack (see RetryLater).
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`no request slot for ${delayMs} ms`);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'WaitForSlot';
    this.delayMs = delayMs;
  }
}
