import { describe, expect, it } from 'vitest';
import { classifySendFailure, type SendFailureKind } from '../../src/transfers/classify-send.ts';
import { CustodyError, CustodyErrorCode, type CustodyErrorCode as Code } from '../../src/custody/errors.ts';

const send = (code: Code, details: { httpStatus?: number; maybeProcessed?: boolean; retryAfterMs?: number } = {}) =>
  new CustodyError(code, `sendTransaction: ${code}`, { endpoint: 'send', ...details });

const FIRST = { unknownSince: undefined };
const AFTER_UNKNOWN = { unknownSince: 1_700_000_000_000 };

/** [name, error, kind for a transfer none of whose sends may have gone out, kind once one may have]. */
const TABLE: Array<[string, unknown, SendFailureKind, SendFailureKind]> = [
  ['409 duplicate', send(CustodyErrorCode.DUPLICATE, { httpStatus: 409 }), 'in-use', 'accepted-earlier'],
  ['429 with Retry-After', send(CustodyErrorCode.RATE_LIMITED, { httpStatus: 429, retryAfterMs: 2_000 }), 'rate-limited', 'rate-limited'],
  ['local CUSTODY_MAX_RPS', send(CustodyErrorCode.RATE_LIMITED, { retryAfterMs: 300 }), 'rate-limited', 'rate-limited'],
  ['400 refusal', send(CustodyErrorCode.REJECTED, { httpStatus: 400 }), 'refused', 'unknown'],
  ['200 success:false', send(CustodyErrorCode.REJECTED, { httpStatus: 200 }), 'refused', 'unknown'],
  ['404', send(CustodyErrorCode.NOT_FOUND, { httpStatus: 404 }), 'refused', 'unknown'],
  ['401 after a renewed token', send(CustodyErrorCode.UNAUTHORIZED, { httpStatus: 401 }), 'retry', 'unknown'],
  [
    'invalid request, never written (CR/LF header)',
    send(CustodyErrorCode.INVALID_REQUEST, { maybeProcessed: false }),
    'refused',
    'unknown',
  ],
  ['503 answered', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 503 }), 'retry', 'unknown'],
  ['500 answered', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 500 }), 'unknown', 'unknown'],
  ['408 answered', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 408 }), 'unknown', 'unknown'],
  [
    '524 from a proxy (origin took the request, no answer in time)',
    send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 524 }),
    'unknown',
    'unknown',
  ],
  ['520 from a proxy', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 520 }), 'unknown', 'unknown'],
  ['522 from a proxy', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 522 }), 'unknown', 'unknown'],
  ['599 from a proxy', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 599 }), 'unknown', 'unknown'],
  ['302 redirect (not followed)', send(CustodyErrorCode.REJECTED, { httpStatus: 302 }), 'unknown', 'unknown'],
  ['connection refused (never connected)', send(CustodyErrorCode.UNAVAILABLE, { maybeProcessed: false }), 'retry', 'unknown'],
  ['connect time-out', send(CustodyErrorCode.TIMEOUT, { maybeProcessed: false }), 'retry', 'unknown'],
  ['deadline before the request was written', send(CustodyErrorCode.TIMEOUT, { maybeProcessed: false }), 'retry', 'unknown'],
  ['unreadable 4xx body', send(CustodyErrorCode.BAD_RESPONSE, { httpStatus: 400 }), 'retry', 'unknown'],
  ['time-out after connecting', send(CustodyErrorCode.TIMEOUT), 'unknown', 'unknown'],
  ['connection dropped mid-request', send(CustodyErrorCode.UNAVAILABLE), 'unknown', 'unknown'],
  ['unreadable 2xx', send(CustodyErrorCode.BAD_RESPONSE, { httpStatus: 200 }), 'unknown', 'unknown'],
  ['502 from a gateway', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 502 }), 'unknown', 'unknown'],
  ['504 from a gateway', send(CustodyErrorCode.UNAVAILABLE, { httpStatus: 504 }), 'unknown', 'unknown'],
  ['an error that is not ours', new TypeError('boom'), 'unknown', 'unknown'],
  ['a thrown string', 'boom', 'unknown', 'unknown'],
];

describe('what a failed send means', () => {
  it.each(TABLE)('%s → %s, and %s once an earlier send may have gone out', (_name, error, first, afterUnknown) => {
    expect(classifySendFailure(error, FIRST).kind).toBe(first);
    expect(classifySendFailure(error, AFTER_UNKNOWN).kind).toBe(afterUnknown);
  });

  it('never says refused or retry once a send may have gone out, whatever the error (the sticky rule)', () => {
    for (const [, error] of TABLE) {
      expect(['accepted-earlier', 'rate-limited', 'unknown']).toContain(classifySendFailure(error, AFTER_UNKNOWN).kind);
    }
  });

  it('carries the code, HTTP status and Retry-After for the event and the queue', () => {
    expect(classifySendFailure(send(CustodyErrorCode.RATE_LIMITED, { httpStatus: 429, retryAfterMs: 2_000 }), FIRST)).toEqual({
      kind: 'rate-limited',
      code: 'CUSTODY_RATE_LIMITED',
      httpStatus: 429,
      message: 'sendTransaction: CUSTODY_RATE_LIMITED',
      retryAfterMs: 2_000,
      // The proof table's class, for the transfer's attempts list (the timeline).
      proof: 'rate-limited',
    });
    expect(classifySendFailure(new Error('secret detail'), FIRST)).toMatchObject({
      code: 'INTERNAL_ERROR',
      httpStatus: null,
      message: 'send failed unexpectedly',
    });
  });
});
