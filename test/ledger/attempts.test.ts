import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { Keys } from '../../src/ledger/keys.ts';
import { prefixedKeys } from '../helpers/ledger-steps.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * A transfer's attempts list (Keys.attempts): pushed by the transition that records each send's or
 * lookup's outcome, in the same atomic step (transition.lua), capped, and expiring with the record.
 */
const redis = newRedis();
let keys: Keys;
let clock: number;
let ledger: Ledger;
let seq = 0;
const id = () => `attempts-${++seq}`;
const RETENTION_MS = 60_000;

beforeEach(() => {
  keys = prefixedKeys(uniquePrefix('attempts'));
  clock = 1_000_000;
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: RETENTION_MS, clock: () => clock });
});
afterAll(async () => {
  await closeAllRedis();
});

const NOT_TAKEN = { kind: 'send', outcome: 'retry', proof: 'not-taken', httpStatus: 503, code: 'CUSTODY_UNAVAILABLE' } as const;

/** A transfer in `submitting` whose send lease `owner` holds with a send in flight. */
async function sending(sequenceId: string, owner: string) {
  await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.GATED, set: { walletId: '1', coin: 'eth' } });
  const taken = await ledger.transition(sequenceId, { ...op.takeLease(owner, 1_000, TransferState.GATED), set: { pending: 1 } });
  expect(taken.ok).toBe(true);
}

describe('the attempts list', () => {
  it('holds each outcome recorded, in order, with the time of its transition; a refused transition adds none', async () => {
    const s = id();
    await sending(s, 'a');
    await ledger.transition(s, op.release('a', { extraSends: 0, attempt: NOT_TAKEN }));
    // Refused: `b` does not own the lease (nobody does).
    clock += 5;
    const refused = await ledger.transition(s, op.release('b', { extraSends: 0, attempt: NOT_TAKEN }));
    expect(refused.ok).toBe(false);
    clock += 10;
    await ledger.transition(s, { ...op.takeLease('a', 1_000), attempt: { kind: 'lookup', finding: 'absent' } });
    expect(await ledger.attempts(s)).toEqual([
      { at: 1_000_000, ...NOT_TAKEN },
      { at: 1_000_015, kind: 'lookup', finding: 'absent' },
    ]);
    // A transition without an attempt writes no list.
    const other = id();
    await sending(other, 'a');
    expect(await redis.exists(keys.attempts(other))).toBe(0);
  });

  it('stands for the send its own answer proved accepted by a record field, in its place', async () => {
    const ACCEPTED = { kind: 'send', outcome: 'accepted', proof: 'accepted' } as const;
    // Sent once, accepted: no attempts key at all, the entry all the same.
    const once = id();
    await sending(once, 'a');
    clock += 7;
    expect((await ledger.transition(once, op.markSubmitted('a', { transfer: null, recoveredBy: 'duplicate' }, {}, 0, ACCEPTED))).ok).toBe(
      true,
    );
    expect(await redis.exists(keys.attempts(once))).toBe(0);
    expect(await redis.hget(keys.transfer(once), 'sendAccepted')).toBe('1');
    expect(await redis.hget(keys.transfer(once), 'submittedAt')).toBe(String(1_000_007));
    expect(await ledger.attempts(once)).toEqual([{ at: 1_000_007, ...ACCEPTED }]);
    // After a send not taken and a lookup, and before a later entry: in the order of their times.
    const s = id();
    await sending(s, 'a');
    await ledger.transition(s, op.release('a', { extraSends: 0, attempt: NOT_TAKEN }));
    clock += 3;
    await ledger.transition(s, { ...op.takeLease('a', 1_000), attempt: { kind: 'lookup', finding: 'absent' } });
    expect((await ledger.transition(s, op.markSubmitted('a', { transfer: null, recoveredBy: 'duplicate' }, {}, 1, ACCEPTED))).ok).toBe(
      true,
    );
    clock += 2;
    await ledger.transition(s, {
      from: [TransferState.SUBMITTED],
      to: TransferState.SUBMITTED,
      attempt: { kind: 'lookup', finding: 'found' },
    });
    expect(await ledger.attempts(s)).toEqual([
      { at: 1_000_007, ...NOT_TAKEN },
      { at: 1_000_010, kind: 'lookup', finding: 'absent' },
      { at: 1_000_010, ...ACCEPTED },
      { at: 1_000_012, kind: 'lookup', finding: 'found' },
    ]);
    // Any other answer that made it submitted (a 409 taken as accepted earlier) is an entry of its own.
    const other = id();
    await sending(other, 'a');
    const earlier = { kind: 'send', outcome: 'accepted-earlier', proof: 'accepted', httpStatus: 409, code: 'CUSTODY_CONFLICT' } as const;
    await ledger.transition(other, op.markSubmitted('a', { transfer: null, recoveredBy: 'duplicate' }, {}, 0, earlier));
    expect(await redis.hget(keys.transfer(other), 'sendAccepted')).toBeNull();
    expect(await ledger.attempts(other)).toEqual([{ at: 1_000_012, ...earlier }]);
    // A record written before the flag: the time it stamped stands for the send.
    const before = id();
    await sending(before, 'a');
    await ledger.transition(before, op.markSubmitted('a', { transfer: null, recoveredBy: 'duplicate' }, {}, 0, ACCEPTED));
    await redis.hdel(keys.transfer(before), 'sendAccepted');
    await redis.hset(keys.transfer(before), 'sendAcceptedAt', '999');
    expect(await ledger.attempts(before)).toEqual([{ at: 999, ...ACCEPTED }]);
  });

  it('keeps the newest 50 entries', async () => {
    const s = id();
    await sending(s, 'a');
    for (let i = 0; i < 60; i++) {
      clock += 1;
      await ledger.transition(s, { ...op.takeLease('a', 1_000), attempt: { kind: 'lookup', finding: 'absent' } });
    }
    const kept = await ledger.attempts(s);
    expect(kept).toHaveLength(50);
    expect(kept[0]!.at).toBe(1_000_011);
    expect(kept[49]!.at).toBe(1_000_060);
  });

  it('expires with the record on a terminal transition (RETENTION)', async () => {
    const s = id();
    await sending(s, 'a');
    await ledger.transition(s, op.release('a', { extraSends: 0, attempt: NOT_TAKEN }));
    expect(await redis.pttl(keys.attempts(s))).toBe(-1);
    await ledger.transition(s, op.takeLease('a', 1_000));
    const failed = await ledger.transition(
      s,
      op.fail('a', { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'refused', attempts: 2 }, 0, {
        kind: 'send',
        outcome: 'refused',
        proof: 'not-taken',
        httpStatus: 400,
        code: 'CUSTODY_REJECTED',
      }),
    );
    expect(failed.ok).toBe(true);
    const [record, attempts] = await Promise.all([redis.pttl(keys.transfer(s)), redis.pttl(keys.attempts(s))]);
    expect(record).toBeGreaterThan(0);
    expect(attempts).toBeGreaterThan(0);
    expect(attempts).toBeLessThanOrEqual(RETENTION_MS);
    expect(Math.abs(record - attempts)).toBeLessThan(1_000);
    expect((await ledger.attempts(s)).map((entry) => entry.kind === 'send' && entry.outcome)).toEqual(['retry', 'refused']);
  });
});
