import { expect } from 'vitest';
import { CustodyError } from '../../src/custody/errors.ts';

/** The CustodyError a custody call rejects with; fails the test when it resolves or throws anything else. */
export async function failure(promise: Promise<unknown>): Promise<CustodyError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(CustodyError);
    return error as CustodyError;
  }
  throw new Error('expected a CustodyError');
}
