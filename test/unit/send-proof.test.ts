import { describe, expect, it } from 'vitest';
import { proofOfAnswer, proofOfStatus, type SendProof } from '../../src/transfers/send-proof.ts';
import { throwForStatus } from '../../src/custody/wallet-service/responses.ts';
import { CustodyError, CustodyErrorCode } from '../../src/custody/errors.ts';

/** The contract's table, written out row by row for every status a server can send (100-599). */
function expected(status: number): SendProof {
  if (status === 409) return 'conflict';
  if (status === 429) return 'rate-limited';
  if (status === 503) return 'not-taken';
  if (status === 408) return 'maybe-processed';
  if (status >= 400 && status <= 499) return 'not-taken';
  return 'maybe-processed'; // 1xx, 3xx, every 5xx but 503; a 2xx without a readable record
}

const ALL_STATUSES = Array.from({ length: 500 }, (_, i) => 100 + i);

describe('what an answer to sendTransaction proves (the table)', () => {
  it('every HTTP status from 100 to 599 maps as the table says', () => {
    const wrong = ALL_STATUSES.filter((status) => proofOfStatus(status) !== expected(status));
    expect(wrong).toEqual([]);
  });

  it.each([
    [500, 'maybe-processed'],
    [502, 'maybe-processed'],
    [504, 'maybe-processed'],
    [520, 'maybe-processed'],
    [522, 'maybe-processed'],
    [524, 'maybe-processed'],
    [527, 'maybe-processed'],
    [598, 'maybe-processed'],
    [599, 'maybe-processed'],
    [408, 'maybe-processed'],
    [503, 'not-taken'],
    [400, 'not-taken'],
    [401, 'not-taken'],
    [404, 'not-taken'],
    [422, 'not-taken'],
    [409, 'conflict'],
    [429, 'rate-limited'],
  ] as const)('HTTP %i proves %s', (status, proof) => {
    expect(proofOfStatus(status)).toBe(proof);
  });

  it('a 2xx proves acceptance only with a readable record, "not taken" only with success:false', () => {
    for (const status of [200, 201, 202, 204, 299]) {
      expect(proofOfStatus(status, 'record')).toBe('accepted');
      expect(proofOfStatus(status, 'success-false')).toBe('not-taken');
      expect(proofOfStatus(status, 'unreadable')).toBe('maybe-processed');
      expect(proofOfStatus(status)).toBe('maybe-processed');
    }
  });

  it('a request never written proves "not taken"; written and unanswered proves nothing', () => {
    expect(proofOfAnswer({ kind: 'never-written' })).toBe('not-taken');
    expect(proofOfAnswer({ kind: 'no-answer' })).toBe('maybe-processed');
  });

  it('the client raises, for every status, an error whose proof is the table row', () => {
    for (const status of ALL_STATUSES.filter((s) => s < 200 || s >= 300)) {
      let error: unknown;
      try {
        throwForStatus('send', { status, headers: {}, text: '{"success":false,"message":"x"}' });
      } catch (caught) {
        error = caught;
      }
      expect(error, `HTTP ${status}`).toBeInstanceOf(CustodyError);
      const custody = error as CustodyError;
      expect(custody.proof, `HTTP ${status} (${custody.code})`).toBe(expected(status));
      expect(custody.maybeProcessed, `HTTP ${status}`).toBe(expected(status) === 'maybe-processed');
    }
  });

  it.each([
    ['time-out after writing', CustodyErrorCode.TIMEOUT, {}, 'maybe-processed'],
    ['connect time-out (never written)', CustodyErrorCode.TIMEOUT, { maybeProcessed: false }, 'not-taken'],
    ['connection dropped mid-request', CustodyErrorCode.UNAVAILABLE, {}, 'maybe-processed'],
    ['connection refused (never written)', CustodyErrorCode.UNAVAILABLE, { maybeProcessed: false }, 'not-taken'],
    ['invalid header caught before writing', CustodyErrorCode.INVALID_REQUEST, { maybeProcessed: false }, 'not-taken'],
    ['a request refused locally', CustodyErrorCode.INVALID_REQUEST, {}, 'not-taken'],
    ['our own request budget (never written)', CustodyErrorCode.RATE_LIMITED, {}, 'not-taken'],
    ['unreadable 2xx', CustodyErrorCode.BAD_RESPONSE, { httpStatus: 200 }, 'maybe-processed'],
    ['2xx naming another sequenceId', CustodyErrorCode.BAD_RESPONSE, { httpStatus: 200, maybeProcessed: true }, 'maybe-processed'],
    ['2xx with success:false', CustodyErrorCode.REJECTED, { httpStatus: 200 }, 'not-taken'],
    ['response larger than the bound', CustodyErrorCode.BAD_RESPONSE, {}, 'maybe-processed'],
  ] as const)('%s: %s proves %s', (_name, code, details, proof) => {
    const error = new CustodyError(code, 'x', { endpoint: 'send', ...details });
    expect(error.proof).toBe(proof);
  });

  it('every error code is covered by some row above or by the status sweep', () => {
    // A new code must be placed in the table on purpose: this list is the codes the rows above exercise.
    expect(Object.values(CustodyErrorCode).sort()).toEqual(
      [
        'CUSTODY_BAD_RESPONSE',
        'CUSTODY_DUPLICATE',
        'CUSTODY_INVALID_REQUEST',
        'CUSTODY_NOT_FOUND',
        'CUSTODY_RATE_LIMITED',
        'CUSTODY_REJECTED',
        'CUSTODY_TIMEOUT',
        'CUSTODY_UNAUTHORIZED',
        'CUSTODY_UNAVAILABLE',
      ].sort(),
    );
  });
});
