/**
 * Every retry and backoff profile of the worker, in one place. A delay is capped exponential with
 * "equal jitter": half of it fixed, half random, so retries of many jobs spread out but never
 * come sooner than half the nominal delay.
 */
export interface BackoffProfile {
  readonly name: string;
  readonly baseMs: number;
  readonly maxMs: number;
}

/** Submission steps (travel-rule lookup, sendTransaction, resolving an unknown send). */
export const SUBMIT_RETRY: BackoffProfile = { name: 'submit-retry', baseMs: 1_000, maxMs: 60_000 };

/** Upstream errors while polling get-transfer; the poll interval itself comes from TRACK_POLL_MIN/MAX. */
export const TRACK_ERROR_RETRY: BackoffProfile = { name: 'track-error-retry', baseMs: 2_000, maxMs: 60_000 };

/**
 * Unexpected errors (a bug, Redis gone mid-step) in any handler. Every step is resumable and a job
 * never holds the only copy of a transfer's fate, so such a job is retried, never failed: a transfer
 * must not be left without its terminal event because of a transient fault.
 */
export const UNEXPECTED_ERROR_RETRY: BackoffProfile = { name: 'unexpected-error-retry', baseMs: 1_000, maxMs: 30_000 };

/** A send lease outlives one request: the custody time-out plus this margin (and any rate-limit wait). */
export const SEND_LEASE_MARGIN_MS = 5_000;

export function backoffDelay(profile: BackoffProfile, attempt: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, Math.min(attempt - 1, 30));
  const nominal = Math.min(profile.maxMs, profile.baseMs * 2 ** exponent);
  return Math.round(nominal / 2 + (nominal / 2) * random());
}

/** Scales a profile, e.g. for tests that want milliseconds instead of seconds (SUBMIT_RETRY_BASE). */
export function withBase(profile: BackoffProfile, baseMs: number, maxMs = profile.maxMs): BackoffProfile {
  return { ...profile, baseMs, maxMs: Math.max(baseMs, maxMs) };
}
