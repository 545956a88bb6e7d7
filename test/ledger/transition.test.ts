import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { EventShapeError, type EventData } from '../../packages/producer/src/events.ts';
import { zeroCounts } from '../../src/jobs/reconcile/handler.ts';
import type { Keys } from '../../src/ledger/keys.ts';
import { prefixedKeys } from '../helpers/ledger-steps.ts';
import { Ledger, NO_RECORD, NO_VIEW, SEND_VIEW, TRACKING_VIEW, TransferState, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * The transition script's rules, which hold whatever a caller passes: they are what makes a stale
 * runner harmless. A virtual clock makes lease expiry exact; one test checks Redis's own TIME.
 */
const redis = newRedis();
let keys: Keys;
let clock: number;
let ledger: Ledger;
let seq = 0;
const id = () => `seq-${++seq}`;

beforeEach(() => {
  keys = prefixedKeys(uniquePrefix('ledger'));
  clock = 1_000_000;
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000, clock: () => clock });
});
afterAll(async () => {
  await closeAllRedis();
});

/** Event data of the right shape: the ledger checks every event against its schema before publishing. */
const BLOCKED = { code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: 1, mandatory: true, blockTxn: false } } as const;
const FAILED = {
  code: 'OPERATOR_RESOLVED',
  httpStatus: null,
  message: 'checked the console',
  attempts: 1,
  resolvedBy: 'operator',
} as const;
const UNRESOLVED = { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1, lastError: 'CUSTODY_TIMEOUT' } as const;

const take = (owner: string, ms = 1_000): TransitionRequest['lease'] => ({ mode: 'take', owner, ms });

/** A transfer in `submitting` whose send lease `owner` holds with a pending send. */
async function sending(sequenceId: string, owner: string, ms = 1_000) {
  await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.GATED, set: { walletId: '1', coin: 'eth' } });
  const taken = await ledger.transition(sequenceId, {
    from: [TransferState.GATED],
    to: TransferState.SUBMITTING,
    lease: take(owner, ms),
    set: { pending: 1 },
    increment: { sends: 1 },
  });
  expect(taken.ok).toBe(true);
}

const RECONCILED: EventData['reconcile.completed'] = { ...zeroCounts(), durationMs: 3 };

describe('system events', () => {
  it("publishes a run's reconcile.completed once, even when the command is sent again (an ioredis replay)", async () => {
    const first = await ledger.publishSystemEvent('reconcile.completed', RECONCILED, 'run-1');
    const replayed = await ledger.publishSystemEvent('reconcile.completed', RECONCILED, 'run-1');
    expect(replayed).toBe(first);
    expect(await redis.xlen(keys.events)).toBe(1);
    const other = await ledger.publishSystemEvent('reconcile.completed', RECONCILED, 'run-2');
    expect(other).not.toBe(first);
    expect(await redis.xlen(keys.events)).toBe(2);
  });
});

describe('tombstones and a sequenceId in use', () => {
  it('a terminal transition leaves a tombstone that outlives the record, and no record is created under it again', async () => {
    const s = id();
    const tombstoned = new Ledger(redis, keys, {
      eventsMaxLen: 10_000,
      retentionMs: 60_000,
      tombstoneRetentionMs: 3_600_000,
      clock: () => clock,
    });
    await tombstoned.transition(s, { from: [NO_RECORD], to: TransferState.BLOCKED, event: { type: 'transfer.blocked', data: BLOCKED } });
    const ttl = await redis.pttl(keys.tombstone(s));
    expect(ttl).toBeGreaterThan(3_600_000);
    expect(ttl).toBeLessThanOrEqual(3_660_000);
    expect(await tombstoned.ended(s)).toEqual({ state: 'blocked', version: 1 });
    // RETENTION removes the record; the tombstone stays.
    await redis.del(keys.transfer(s));
    const again = await tombstoned.transition(s, { from: [NO_RECORD], to: TransferState.RECEIVED, set: { jobId: 'other' } });
    expect(again).toMatchObject({ ok: false, reason: 'ended', ended: { state: 'blocked', version: 1 } });
    expect(await tombstoned.get(s)).toBeUndefined();
    expect(await redis.xlen(keys.events)).toBe(1);
  });

  it('refuses failed while the sequenceId is found in use upstream, unless an operator decides', async () => {
    const s = id();
    await sending(s, 'a');
    const marked = await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: 'a' },
      stampOnce: ['inUseSince'],
      unset: ['pending'],
    });
    expect(marked.ok && marked.record.inUseSince).toBe(clock);
    const failed = { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'x', attempts: 1 } as const;
    expect(
      await ledger.transition(s, {
        from: [TransferState.SUBMITTING],
        to: TransferState.FAILED,
        lease: { mode: 'own', owner: 'a' },
        event: { type: 'transfer.failed', data: failed },
      }),
    ).toMatchObject({ ok: false, reason: 'unknown' });
    expect(
      await ledger.transition(s, {
        from: [TransferState.SUBMITTING],
        to: TransferState.FAILED,
        lease: { mode: 'own', owner: 'a' },
        operator: true,
        event: { type: 'transfer.failed', data: FAILED },
      }),
    ).toMatchObject({ ok: true });
  });
});

describe('the transition script', () => {
  it('never leaves a terminal state, even when the caller lists it as expected', async () => {
    const s = id();
    await ledger.transition(s, { from: [NO_RECORD], to: TransferState.BLOCKED, event: { type: 'transfer.blocked', data: BLOCKED } });
    for (const to of [TransferState.FAILED, TransferState.SUBMITTED, TransferState.BLOCKED]) {
      const result = await ledger.transition(s, {
        from: [TransferState.BLOCKED],
        to,
        operator: true,
        event: { type: 'transfer.failed', data: FAILED },
      });
      expect(result).toMatchObject({ ok: false, reason: 'terminal', state: 'blocked' });
    }
    expect(await redis.xlen(keys.events)).toBe(1);
  });

  it('checks every event against its schema before the script runs: a wrong shape throws and changes nothing', async () => {
    const s = id();
    const wrong = { code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: '1', mandatory: true, blockTxn: false } };
    // A publisher bug as the type system would not see it (data built from untyped input).
    const request = {
      from: [NO_RECORD],
      to: TransferState.BLOCKED,
      event: { type: 'transfer.blocked', data: wrong },
    } as unknown as TransitionRequest;
    await expect(ledger.transition(s, request)).rejects.toThrow(new EventShapeError('transfer.blocked', ['setting.outgoingTxn']));
    expect(await ledger.get(s)).toBeUndefined();
    await expect(
      ledger.publishSystemEvent('reconcile.completed', { checked: 1 } as unknown as EventData['reconcile.completed'], 'run-0'),
    ).rejects.toBeInstanceOf(EventShapeError);
    expect(await redis.xlen(keys.events)).toBe(0);
  });

  it('refuses to leave submitting without the lease (own or free), whatever the expected state says', async () => {
    const s = id();
    await sending(s, 'a');
    expect(await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTED })).toMatchObject({
      ok: false,
      reason: 'lease',
    });
    expect(
      await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTED, lease: { mode: 'own', owner: 'b' } }),
    ).toMatchObject({ ok: false, reason: 'owner' });
    expect(
      await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTED, lease: { mode: 'free' } }),
    ).toMatchObject({ ok: false, reason: 'lease' });
    expect(
      await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTED, lease: { mode: 'own', owner: 'a' } }),
    ).toMatchObject({ ok: true });
  });

  it('lets nobody take a live lease, and anybody take an expired one; the refusal says when it ends by the ledger clock', async () => {
    const s = id();
    await sending(s, 'a', 500);
    clock += 499;
    expect(await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b') })).toMatchObject({
      ok: false,
      reason: 'lease',
      leaseUntil: 1_000_500,
      now: 1_000_499,
    });
    clock += 1;
    const taken = await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b') });
    expect(taken).toMatchObject({ ok: true, record: { leaseOwner: 'b', leaseUntil: 1_001_500 } });
  });

  it('taking over from a holder that left a send pending records "may have been sent", sticky', async () => {
    const s = id();
    await sending(s, 'a', 100);
    clock += 100;
    const taken = await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b') });
    expect(taken).toMatchObject({ ok: true, record: { unknownSince: 1_000_100, pending: false, leaseOwner: 'b' } });
    // b's own send is answered "refused": b releases, but the earlier unknown stays.
    await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: 'b' },
      unset: ['leaseOwner', 'leaseUntil', 'pending'],
      stampOnce: ['unknownSince'],
    });
    expect((await ledger.get(s))!.unknownSince).toBe(1_000_100);
  });

  it('refuses failed while a send may have gone out, unless an operator decides', async () => {
    const s = id();
    await sending(s, 'a', 100);
    clock += 100;
    // The holder never reported (pending) and its lease ran out: nobody may fail it.
    expect(
      await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.FAILED, lease: { mode: 'free' } }),
    ).toMatchObject({ ok: false, reason: 'unknown' });
    await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b') });
    expect(
      await ledger.transition(s, { from: [TransferState.SUBMITTING], to: TransferState.FAILED, lease: { mode: 'own', owner: 'b' } }),
    ).toMatchObject({ ok: false, reason: 'unknown' });
    clock += 10_000;
    const byOperator = await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.FAILED,
      lease: { mode: 'free' },
      operator: true,
      event: { type: 'transfer.failed', data: FAILED },
    });
    expect(byOperator).toMatchObject({ ok: true, version: 1 });
  });

  it('lets the owner fail its own definitely refused send, and a stale owner change nothing after a takeover', async () => {
    const s = id();
    await sending(s, 'a', 100);
    const failed = await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.FAILED,
      lease: { mode: 'own', owner: 'a' },
      unset: ['pending'],
    });
    expect(failed.ok).toBe(true);

    const t = id();
    await sending(t, 'a', 100);
    clock += 100;
    await ledger.transition(t, { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b') });
    for (const to of [TransferState.SUBMITTED, TransferState.FAILED, TransferState.SUBMITTING]) {
      expect(await ledger.transition(t, { from: [TransferState.SUBMITTING], to, lease: { mode: 'own', owner: 'a' } })).toMatchObject({
        ok: false,
        reason: 'owner',
      });
    }
  });

  it('requireAbsent, stamps and signed increments', async () => {
    const s = id();
    await sending(s, 'a');
    const once = {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own' as const, owner: 'a' },
      requireAbsent: ['unresolvedAt'],
      stamp: ['unresolvedAt'],
      event: { type: 'transfer.unresolved' as const, data: UNRESOLVED },
    } satisfies TransitionRequest;
    expect(await ledger.transition(s, once)).toMatchObject({ ok: true, record: { unresolvedAt: clock } });
    clock += 5;
    expect(await ledger.transition(s, once)).toMatchObject({ ok: false, reason: 'present' });
    const counted = await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: 'a' },
      increment: { sends: -1, failures: 2 },
      stampOnce: ['unknownSince'],
    });
    expect(counted).toMatchObject({ ok: true, record: { sends: 0, failures: 2, unknownSince: clock, unresolvedAt: clock - 5 } });
  });

  it('indexes a broadcast for verification inside the transition', async () => {
    const s = id();
    await ledger.transition(s, { from: [NO_RECORD], to: TransferState.SUBMITTED });
    await ledger.transition(s, { from: [TransferState.SUBMITTED], to: TransferState.BROADCAST, set: { txid: '0xab' } });
    expect(await ledger.dueBroadcasts(clock, 60_000, 10)).toEqual([s]);
    expect(await redis.zscore(keys.byState('submitted'), s)).toBeNull();
  });

  it('judges leases by Redis TIME when no clock is given', async () => {
    const real = new Ledger(redis, keys, { eventsMaxLen: 100, retentionMs: 60_000 });
    const s = id();
    await real.transition(s, { from: [NO_RECORD], to: TransferState.GATED });
    const [seconds, micros] = await redis.time();
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const taken = await real.transition(s, { from: [TransferState.GATED], to: TransferState.SUBMITTING, lease: take('a', 60_000) });
    if (!taken.ok) throw new Error('not taken');
    expect(taken.record.leaseUntil - 60_000).toBeGreaterThanOrEqual(redisNow);
    expect(taken.record.leaseUntil - 60_000).toBeLessThan(redisNow + 5_000);
    expect(Math.abs((await real.now()) - redisNow)).toBeLessThan(5_000);
  });
});

describe('views', () => {
  it('a transition reads back only the view asked for, with the values of the whole record', async () => {
    const s = id();
    const taken = await ledger.transitionReading(
      s,
      {
        from: [NO_RECORD],
        to: TransferState.SUBMITTING,
        lease: take('a'),
        set: { walletId: '310', coin: 'eth', pending: 1, payload: '{"long":"text"}' },
        increment: { sends: 1 },
      },
      SEND_VIEW,
    );
    expect(taken).toEqual({
      ok: true,
      version: 0,
      streamId: '',
      record: { sequenceId: s, sends: 1, failures: 0, unknownSince: undefined, unresolvedAt: undefined },
    });
    clock += 5_000; // the lease ran out: a takeover records "may have been sent"
    const again = await ledger.transitionReading(
      s,
      { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: take('b'), increment: { sends: 1, failures: 1 } },
      SEND_VIEW,
    );
    expect(again).toMatchObject({
      ok: true,
      record: { sequenceId: s, sends: 2, failures: 1, unknownSince: clock, unresolvedAt: undefined },
    });
    const whole = (await ledger.get(s))!;
    expect(again.ok && again.record).toEqual({
      sequenceId: s,
      sends: whole.sends,
      failures: whole.failures,
      unknownSince: whole.unknownSince,
      unresolvedAt: whole.unresolvedAt,
    });

    const submitted = await ledger.transitionReading(
      s,
      {
        from: [TransferState.SUBMITTING],
        to: TransferState.SUBMITTED,
        lease: { mode: 'own', owner: 'b' },
        set: { matchAddress: '0xAb', matchAmount: '0.5' },
        stamp: ['submittedAt'],
        unset: ['payload'],
      },
      NO_VIEW,
    );
    expect(submitted).toEqual({ ok: true, version: 0, streamId: '', record: { sequenceId: s } });
    const refused = await ledger.transitionReading(
      s,
      { from: [TransferState.SUBMITTING], to: TransferState.SUBMITTED, lease: { mode: 'own', owner: 'b' } },
      NO_VIEW,
    );
    expect(refused).toMatchObject({ ok: false, reason: 'state', state: 'submitted' });
  });

  it('reads part of a record, the same values as the whole record, and nothing when there is none', async () => {
    const s = id();
    await ledger.transition(s, {
      from: [NO_RECORD],
      to: TransferState.SUBMITTED,
      set: { walletId: '310', coin: 'eth', matchAddress: '0xAb', matchAmount: '0.5', pollFailures: 2 },
      stamp: ['submittedAt'],
    });
    const whole = (await ledger.get(s))!;
    expect(await ledger.read(s, TRACKING_VIEW)).toEqual({
      sequenceId: s,
      state: 'submitted',
      walletId: '310',
      coin: 'eth',
      submittedAt: clock,
      updatedAt: clock,
      pollFailures: 2,
      unmatchedPolls: 0,
      enrichFailures: 0,
      match: { transactionId: undefined, destinationAddress: '0xAb', amount: '0.5' },
    });
    const view = (await ledger.read(s, TRACKING_VIEW))!;
    for (const key of Object.keys(view) as Array<keyof typeof view>) expect(view[key]).toEqual(whole[key]);
    expect(await ledger.read(id(), TRACKING_VIEW)).toBeUndefined();
  });
});

describe('the payload', () => {
  const payload = JSON.stringify({ walletId: 310, coin: 'eth', txHex: `02f8${'ab'.repeat(96)}`, halfSigned: { sequenceId: 's' } });

  it('is kept apart from the hash, which stays compact, and read and deleted as a field of the record', async () => {
    const s = id();
    const created = await ledger.transition(s, { from: [NO_RECORD], to: TransferState.RECEIVED, set: { walletId: '310', payload } });
    expect(created.ok && created.record.payload).toBe(payload);
    expect(await redis.object('ENCODING', keys.transfer(s))).toBe('listpack');
    expect(await redis.hexists(keys.transfer(s), 'payload')).toBe(0);
    expect((await ledger.get(s))!.payload).toBe(payload);
    const gated = await ledger.transition(s, { from: [TransferState.RECEIVED], to: TransferState.GATED });
    expect(gated.ok && gated.record.payload).toBe(payload);

    const blocked = await ledger.transition(s, {
      from: [TransferState.GATED],
      to: TransferState.BLOCKED,
      unset: ['payload'],
      event: { type: 'transfer.blocked', data: BLOCKED },
    });
    expect(blocked.ok && blocked.record.payload).toBeUndefined();
    expect((await ledger.get(s))!.payload).toBeUndefined();
    expect(await redis.exists(keys.transferPayload(s))).toBe(0);
  });

  it('of a record written while it was a hash field is read, and deleted with the hash made compact again', async () => {
    const s = id();
    await ledger.transition(s, { from: [NO_RECORD], to: TransferState.RECEIVED, set: { walletId: '310' } });
    await redis.hset(keys.transfer(s), 'payload', payload); // as the former layout kept it
    expect(await redis.object('ENCODING', keys.transfer(s))).toBe('hashtable');
    expect((await ledger.get(s))!.payload).toBe(payload);
    await ledger.transition(s, { from: [TransferState.RECEIVED], to: TransferState.SUBMITTED, unset: ['payload'] });
    expect((await ledger.get(s))!).toMatchObject({ state: 'submitted', walletId: '310', payload: undefined });
    expect(await redis.object('ENCODING', keys.transfer(s))).toBe('listpack');
  });

  it('left on a terminal record expires with it', async () => {
    const s = id();
    await ledger.transition(s, { from: [NO_RECORD], to: TransferState.RECEIVED, set: { payload } });
    await ledger.transition(s, {
      from: [TransferState.RECEIVED],
      to: TransferState.BLOCKED,
      event: { type: 'transfer.blocked', data: BLOCKED },
    });
    const ttl = await redis.pttl(keys.transferPayload(s));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });
});

describe('walking the active index', () => {
  it('yields every due entry once while the walk itself moves entries to later scores', async () => {
    const due: string[] = [];
    for (let i = 0; i < 25; i++) {
      const s = id();
      due.push(s);
      clock = 1_000_000 + Math.floor(i / 4); // several entries share a score
      await ledger.transition(s, { from: [NO_RECORD], to: TransferState.RECEIVED });
    }
    clock = 2_000_000;
    const seen: string[] = [];
    for await (const s of ledger.staleActive(1_500_000, 3)) {
      seen.push(s);
      // What reconciliation does to an entry: a transition, which moves it to "now".
      await ledger.transition(s, { from: [TransferState.RECEIVED], to: TransferState.RECEIVED, set: { touched: 1 } });
    }
    expect(seen.sort()).toEqual(due.sort());
  });
});
