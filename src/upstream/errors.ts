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
  /** 409 on sendTransaction: the sequenceId was already accepted. */
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

export type CustodyEndpoint = 'token' | 'getTransfer' | 'sendTransaction' | 'getWalletTransaction' | 'isEnabled';

const RETRYABLE: ReadonlySet<CustodyErrorCode> = new Set([
  CustodyErrorCode.TIMEOUT,
  CustodyErrorCode.UNAVAILABLE,
  CustodyErrorCode.RATE_LIMITED,
  CustodyErrorCode.BAD_RESPONSE,
]);

/**
 * A gateway's "the origin did not answer properly" (502 Bad Gateway, 504 Gateway Timeout): the request
 * may have reached the custody service and been processed behind the gateway.
 */
const GATEWAY_NO_ANSWER: ReadonlySet<number> = new Set([502, 504]);

export interface CustodyErrorDetails {
  endpoint: CustodyEndpoint;
  httpStatus?: number;
  retryAfterMs?: number;
  /** Upstream's own `message`, cut short; never contains request data of ours. */
  upstreamMessage?: string;
  /** Overrides the default of `maybeProcessed` (see there). */
  maybeProcessed?: boolean;
  cause?: unknown;
}

export class CustodyError extends Error {
  readonly code: CustodyErrorCode;
  readonly retryable: boolean;
  readonly endpoint: CustodyEndpoint;
  readonly httpStatus: number | undefined;
  readonly retryAfterMs: number | undefined;
  readonly upstreamMessage: string | undefined;
  /**
   * Whether upstream may have acted on the request although we saw an error. True for a time-out after
   * the connection was made, a connection dropped mid-request, an unreadable 2xx, and a gateway's
   * 502/504. False when upstream answered with another error status (assumption, README: a provider that
   * answers 4xx/5xx did not accept the transfer), the connection was never made, or the request was
   * refused before any byte was written. For sendTransaction: "the send may have gone out".
   */
  readonly maybeProcessed: boolean;

  constructor(code: CustodyErrorCode, message: string, details: CustodyErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'CustodyError';
    this.code = code;
    this.retryable = RETRYABLE.has(code);
    this.endpoint = details.endpoint;
    this.httpStatus = details.httpStatus;
    this.retryAfterMs = details.retryAfterMs;
    this.upstreamMessage = details.upstreamMessage;
    this.maybeProcessed =
      details.maybeProcessed ??
      (code === CustodyErrorCode.TIMEOUT ||
        (code === CustodyErrorCode.UNAVAILABLE && (details.httpStatus === undefined || GATEWAY_NO_ANSWER.has(details.httpStatus))) ||
        (code === CustodyErrorCode.BAD_RESPONSE && (details.httpStatus ?? 200) < 300));
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

export function isCustodyError(error: unknown, code?: CustodyErrorCode): error is CustodyError {
  return error instanceof CustodyError && (code === undefined || error.code === code);
}
