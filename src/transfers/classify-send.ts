import { CustodyError, CustodyErrorCode } from '../upstream/errors.ts';

/**
 * What a failed sendTransaction call means for the transfer:
 * - `accepted-earlier`: 409, upstream holds an accepted send of this sequenceId → submitted;
 * - `rate-limited`: 429 (or our own CUSTODY_MAX_RPS): not taken, come back after the wait;
 * - `refused`: a definite refusal (4xx but 401/409/429, `success:false`, a request that could not be built) of a
 *   transfer none of whose sends may have been accepted → failed;
 * - `retry`: a definite "not taken" that may pass (5xx answered, a 401 after a renewed token, connection
 *   never made) → send again,
 *   failed once SUBMIT_ATTEMPTS sends were all answered like this;
 * - `unknown`: the send may have been accepted (no answer, dropped connection, unreadable 2xx, a
 *   gateway's 502/504, anything we cannot read) → never failed; resolved by lookup, 409 or an operator.
 */
export type SendFailureKind = 'accepted-earlier' | 'rate-limited' | 'refused' | 'retry' | 'unknown';

export interface SendFailure {
  kind: SendFailureKind;
  /** The error code for events and logs (CUSTODY_… or INTERNAL_ERROR). */
  code: string;
  httpStatus: number | null;
  /** Safe for events: our own fixed phrase plus upstream's short message, never request data. */
  message: string;
  retryAfterMs: number | undefined;
}

/**
 * The one place that decides what a failed send means. Pure: the error of this call, and whether an
 * earlier send of the transfer may have gone out (`unknownSince`, sticky on the ledger record). Order:
 *  1. 409 proves an earlier acceptance, whatever else we know;
 *  2. an error we cannot read, or one after which upstream may have acted, is unknown;
 *  3. once any send may have gone out, a refusal of a later one proves nothing about it: unknown
 *     (only a 429 keeps its meaning, "come back later");
 *  4. otherwise 429 waits, a retryable answer retries, anything else is a refusal.
 */
export function classifySendFailure(error: unknown, record: { unknownSince: number | undefined }): SendFailure {
  if (!(error instanceof CustodyError)) {
    return { kind: 'unknown', code: 'INTERNAL_ERROR', httpStatus: null, message: 'send failed unexpectedly', retryAfterMs: undefined };
  }
  const failure = (kind: SendFailureKind): SendFailure => ({
    kind,
    code: error.code,
    httpStatus: error.httpStatus ?? null,
    message: error.message,
    retryAfterMs: error.retryAfterMs,
  });
  if (error.code === CustodyErrorCode.DUPLICATE) return failure('accepted-earlier');
  if (error.maybeProcessed) return failure('unknown');
  if (error.code === CustodyErrorCode.RATE_LIMITED) return failure('rate-limited');
  if (record.unknownSince !== undefined) return failure('unknown');
  // A 401 that a renewed token did not cure is usually an auth hiccup (tokens revoked while a new one
  // was on its way): nothing was accepted, so it is retried like a 5xx, and fails at SUBMIT_ATTEMPTS.
  if (error.retryable || error.code === CustodyErrorCode.UNAUTHORIZED) return failure('retry');
  return failure('refused');
}
