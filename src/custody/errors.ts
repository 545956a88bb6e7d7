import { proofOfAnswer, type SendAnswer, type SendProof } from '../transfers/send-proof.ts';

/**
 * One error class for everything the custody API can do wrong. Callers branch on `code`, never on
 * `message`. `retryable` says whether the same request may succeed later; it says nothing about
 * whether a send went out (see `maybeProcessed`).
 */
export const CustodyErrorCode = {
  /** No complete answer within the time-out. The request may have been processed. */
  TIMEOUT: 'CUSTODY_TIMEOUT',
  /** 5xx, or the connection was refused or reset. */
  UNAVAILABLE: 'CUSTODY_UNAVAILABLE',
  /** 429; `retryAfterMs` holds the Retry-After delay. */
  RATE_LIMITED: 'CUSTODY_RATE_LIMITED',
  /** 401 that a fresh token did not cure, or Basic credentials refused. */
  UNAUTHORIZED: 'CUSTODY_UNAUTHORIZED',
  /**
   * 409 on sendTransaction: the provider knows the sequenceId. The adapter reports the answer, never
   * what it means: src/transfers/classify-send.ts alone decides that (accepted earlier, or in use by a
   * transaction this worker cannot claim).
   */
  DUPLICATE: 'CUSTODY_DUPLICATE',
  /** 404. */
  NOT_FOUND: 'CUSTODY_NOT_FOUND',
  /** Any other refusal: other 4xx, or `{ success: false }` on a 2xx. */
  REJECTED: 'CUSTODY_REJECTED',
  /** Not JSON, or JSON that fails the schema. */
  BAD_RESPONSE: 'CUSTODY_BAD_RESPONSE',
  /** Refused locally before any request was made (e.g. a path parameter that is not a plain token). */
  INVALID_REQUEST: 'CUSTODY_INVALID_REQUEST',
} as const;

export type CustodyErrorCode = (typeof CustodyErrorCode)[keyof typeof CustodyErrorCode];

/**
 * What a request was for, in the port's own terms (metric and alert labels, errors, the budget's classes),
 * whichever provider serves it: `send` a half-signed transaction; `lookup` transfers by sequenceId or
 * txid; `detail` the wallet's view of a transaction; `gate` the travel-rule setting; `token` an access
 * token request.
 */
export const CUSTODY_ENDPOINTS = ['token', 'send', 'lookup', 'detail', 'gate'] as const;

export type CustodyEndpoint = (typeof CUSTODY_ENDPOINTS)[number];

const RETRYABLE: ReadonlySet<CustodyErrorCode> = new Set([
  CustodyErrorCode.TIMEOUT,
  CustodyErrorCode.UNAVAILABLE,
  CustodyErrorCode.RATE_LIMITED,
  CustodyErrorCode.BAD_RESPONSE,
]);

/** Codes that, without an HTTP status, mean the request was written and no complete answer came. */
export const NO_ANSWER_CODES = [CustodyErrorCode.TIMEOUT, CustodyErrorCode.UNAVAILABLE, CustodyErrorCode.BAD_RESPONSE] as const;

const NO_ANSWER: ReadonlySet<CustodyErrorCode> = new Set(NO_ANSWER_CODES);

export interface CustodyErrorDetails {
  endpoint: CustodyEndpoint;
  httpStatus?: number;
  retryAfterMs?: number;
  /** Upstream's own `message`, cut short; never contains request data of ours. */
  upstreamMessage?: string;
  /** Overrides the default of `maybeProcessed` (see there). */
  maybeProcessed?: boolean;
  /**
   * What the answer proves about a send, by the adapter's own table, when its provider's answers do not
   * mean what the first provider's statuses mean (BitGo refuses a reused sequenceId with a 400: `conflict`,
   * not `not-taken`). Wins over the status-derived proof.
   */
  proof?: SendProof;
  /** Refused by our own request budget (budget.ts): nothing was sent, the provider said nothing. */
  budgetRefused?: boolean;
  cause?: unknown;
}

export class CustodyError extends Error {
  readonly code: CustodyErrorCode;
  readonly retryable: boolean;
  readonly endpoint: CustodyEndpoint;
  readonly httpStatus: number | undefined;
  readonly retryAfterMs: number | undefined;
  readonly upstreamMessage: string | undefined;
  /** What this answer proves about the request, by the one table (transfers/send-proof.ts). */
  readonly proof: SendProof;
  /**
   * Whether upstream may have acted on the request although we saw an error (`proof` is
   * `maybe-processed`): a time-out or drop after writing, an unreadable 2xx, 408, any 5xx but 503, a
   * 1xx/3xx. False for the answers that prove "not taken" (4xx but 408/409/429, `success: false`, 503,
   * a request never written) and for 409/429, which the caller reads on their own. For
   * sendTransaction: "the send may have gone out".
   */
  readonly maybeProcessed: boolean;
  /** Refused by our own request budget (CUSTODY_MAX_RPS), not by the provider: nothing was sent. */
  readonly budgetRefused: boolean;

  constructor(code: CustodyErrorCode, message: string, details: CustodyErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CustodyError';
    this.code = code;
    this.retryable = RETRYABLE.has(code);
    this.endpoint = details.endpoint;
    this.httpStatus = details.httpStatus;
    this.retryAfterMs = details.retryAfterMs;
    this.upstreamMessage = details.upstreamMessage;
    this.proof = details.proof ?? proofOfAnswer(answerOf(code, details));
    this.maybeProcessed = this.proof === 'maybe-processed';
    this.budgetRefused = details.budgetRefused === true;
  }

  toJSON() {
    return {
      name: this.name,
      code: this.code,
      message: this.message,
      endpoint: this.endpoint,
      httpStatus: this.httpStatus,
      retryable: this.retryable,
      retryAfterMs: this.retryAfterMs,
    };
  }
}

/**
 * The facts of the answer behind an error. `maybeProcessed` in the details is the transport's own
 * knowledge (false: never written; true: written, no answer) and wins over the code's default.
 */
function answerOf(code: CustodyErrorCode, details: CustodyErrorDetails): SendAnswer {
  if (details.maybeProcessed === false) return { kind: 'never-written' };
  const status = details.httpStatus;
  if (status !== undefined) {
    const body = code === CustodyErrorCode.REJECTED ? 'success-false' : code === CustodyErrorCode.BAD_RESPONSE ? 'unreadable' : undefined;
    return { kind: 'status', status, ...(body ? { body } : {}) };
  }
  return details.maybeProcessed === true || NO_ANSWER.has(code) ? { kind: 'no-answer' } : { kind: 'never-written' };
}

export function isCustodyError(error: unknown, code?: CustodyErrorCode): error is CustodyError {
  return error instanceof CustodyError && (code === undefined || error.code === code);
}
