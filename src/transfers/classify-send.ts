import { CustodyError, CustodyErrorCode } from '../custody/errors.ts';
import type { SendProof } from './send-proof.ts';

/**
 * What a failed sendTransaction call means for the transfer:
 * - `accepted-earlier`: 409 while an earlier send of this transfer may have been processed → submitted;
 * - `in-use`: 409 although no earlier send of this transfer may have been processed: the sequenceId is
 *   in use upstream by a transaction we cannot claim → `transfer.unresolved` SEQUENCE_ID_IN_USE, nothing
 *   claimed, nothing tracked, no further send;
 * - `rate-limited`: 429 (or our own CUSTODY_MAX_RPS): not taken, come back after the wait;
 * - `refused`: a definite "not taken" (send-proof.ts) that will not pass, of a transfer none of whose
 *   sends may have been processed → failed;
 * - `retry`: a definite "not taken" that may pass (503, a 401 after a renewed token, a connection never
 *   made) → send again after a lookup, failed once SUBMIT_ATTEMPTS sends were all answered like this;
 * - `unknown`: the send may have been processed (send-proof.ts: every 5xx but 503, 408, no answer after
 *   writing, an unreadable 2xx, anything we cannot read) → never failed; settled by lookup, a 409 on a
 *   resend, the deadline or an operator.
 */
export type SendFailureKind = 'accepted-earlier' | 'in-use' | 'rate-limited' | 'refused' | 'retry' | 'unknown';

export interface SendFailure {
  kind: SendFailureKind;
  /** The error code for events and logs (CUSTODY_… or INTERNAL_ERROR). */
  code: string;
  httpStatus: number | null;
  /** What the answer proved (send-proof.ts), when there was one the table judges. */
  proof?: SendProof;
  /** Safe for events: our own fixed phrase plus upstream's short message, never request data. */
  message: string;
  retryAfterMs: number | undefined;
}

/**
 * The one place that decides what a failed send means. Pure: the error of this call, and whether an
 * earlier send of the transfer may have been processed (`unknownSince`, sticky on the ledger record).
 * What the answer itself proves comes from the one table (send-proof.ts, via CustodyError.proof). Order:
 *  1. 409 proves an earlier acceptance only when an earlier send may have been processed; otherwise
 *     nothing we did explains it: the sequenceId is in use;
 *  2. an answer after which upstream may have acted, or an error we cannot read, is unknown;
 *  3. a 429 (or our own budget) keeps its meaning, "come back later", whatever else we know;
 *  4. once any send may have gone out, a refusal of a later one proves nothing about it: unknown;
 *  5. otherwise a retryable "not taken" retries, anything else is a refusal.
 */
export function classifySendFailure(error: unknown, record: { unknownSince: number | undefined }): SendFailure {
  if (!(error instanceof CustodyError)) {
    return { kind: 'unknown', code: 'INTERNAL_ERROR', httpStatus: null, message: 'send failed unexpectedly', retryAfterMs: undefined };
  }
  const failure = (kind: SendFailureKind): SendFailure => ({
    kind,
    code: error.code,
    httpStatus: error.httpStatus ?? null,
    proof: error.proof,
    message: error.message,
    retryAfterMs: error.retryAfterMs,
  });
  const mayHaveBeenSent = record.unknownSince !== undefined;
  if (error.proof === 'conflict') {
    return failure(mayHaveBeenSent ? 'accepted-earlier' : 'in-use');
  }
  if (error.proof === 'maybe-processed') return failure('unknown');
  if (error.code === CustodyErrorCode.RATE_LIMITED || error.proof === 'rate-limited') return failure('rate-limited');
  if (mayHaveBeenSent) return failure('unknown');
  // A 401 that a renewed token did not cure is usually an auth hiccup (tokens revoked while a new one
  // was on its way): nothing was accepted, so it is retried like a 503, and fails at SUBMIT_ATTEMPTS.
  if (error.retryable || error.code === CustodyErrorCode.UNAUTHORIZED) return failure('retry');
  return failure('refused');
}
