import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { EventShapeError, type EventData } from '../../packages/producer/src/events.ts';
import { parseStreamEntry } from '../../packages/producer/src/events.ts';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { parseSubmitPayload, type SubmitPayload } from '../../packages/producer/src/payload.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { PASSED_DECISION } from '../helpers/gate-decision.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * Cancel before send (docs/contract.md section 4): the cancel is one named operation of the transition
 * script, from "no record", `received` or `gated` to `cancelled`; from every other state it changes
 * nothing. A send claim is decided by the same script, so of a cancel and a send claim of one transfer
 * exactly one succeeds, whatever order Redis runs them in.
 */
const redis = newRedis();
/** A second connection, so that concurrent commands really race (one connection keeps its order). */
const other = newRedis();
let keys: Keys;
let ledger: Ledger;
let otherLedger: Ledger;
let seq = 0;
const id = () => `cancel-${++seq}-a88a1846-b23d-f7e8-2344-f2bddb0c16f9`;

const CANCEL: EventData['transfer.cancelled'] = { reason: 'duplicate order A-1001, ticket OPS-77', by: 'cli' };
const DECISION = PASSED_DECISION;
const LEASE_MS = 30_000;

/** A valid payload of the sequenceId, as the handler has it after parsing. */
function payloadOf(sequenceId: string): SubmitPayload {
  const parsed = parseSubmitPayload(samplePayload({ sequenceId }));
  if (!parsed.ok) throw new Error('sample payload invalid');
  return parsed.payload;
}

beforeEach(async () => {
  const prefix = uniquePrefix('cancel');
  keys = createKeys(prefix, `${prefix}:transfer-events`);
  const options = { eventsMaxLen: 10_000, retentionMs: 60_000, tombstoneRetentionMs: 3_600_000 };
  ledger = new Ledger(redis, keys, options);
  otherLedger = new Ledger(other, keys, options);
  await ledger.epoch.init();
  await otherLedger.epoch.start();
});
afterAll(async () => {
  await closeAllRedis();
});

async function must(ledgerOf: Ledger, sequenceId: string, request: TransitionRequest): Promise<void> {
  const result = await ledgerOf.transition(sequenceId, request);
  expect(result.ok, JSON.stringify(result)).toBe(true);
}

async function events(sequenceId: string) {
  const entries = await redis.xrange(keys.events, '-', '+');
  return entries.map((entry) => parseStreamEntry(entry as [string, string[]])).filter((event) => event.sequenceId === sequenceId);
}

/** Puts a new transfer in `state` through the ledger's own operations; returns its sequenceId. */
async function inState(state: string): Promise<string> {
  const s = id();
  const payload = payloadOf(s);
  const owner = 'runner-a';
  if (state === NO_RECORD) return s;
  if (state === 'tombstone') {
    await must(ledger, s, op.create('job-1', payload));
    await must(ledger, s, op.block({ ...DECISION, applies: true, outcome: 'blocked' }));
    await redis.del(keys.transfer(s)); // RETENTION removed the record; the tombstone stays
    return s;
  }
  if (state === 'rejected') {
    const rejection = { code: 'INVALID_PAYLOAD' as const, issues: [{ path: 'coin', message: 'x' }] };
    await must(ledger, s, op.reject('job-1', { walletId: '310', coin: 'eth', metadata: '' }, rejection));
    return s;
  }
  await must(ledger, s, op.create('job-1', payload));
  if (state === 'received') return s;
  if (state === 'blocked') {
    await must(ledger, s, op.block({ ...DECISION, applies: true, outcome: 'blocked' }));
    return s;
  }
  if (state === 'failed-before-send') {
    await must(ledger, s, op.gateFailed(8, { code: 'TRAVEL_RULE_UNAVAILABLE', httpStatus: 503, message: 'm', attempts: 8 }));
    return s;
  }
  await must(ledger, s, op.pass(DECISION));
  if (state === 'gated') return s;
  // From here on a send was in flight at least once.
  await must(ledger, s, op.takeSend(TransferState.GATED, owner, LEASE_MS, undefined));
  if (state === 'submitting-pending') return s;
  if (state === 'submitting-not-taken') {
    // Its only send was answered "not taken" (a 400) and the lease given back: still too late.
    await must(ledger, s, op.release(owner, { lastError: 'CUSTODY_REJECTED', extraSends: 0, failures: 1 }));
    return s;
  }
  if (state === 'submitting-unknown') {
    await must(ledger, s, op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }));
    return s;
  }
  if (state === 'failed') {
    await must(ledger, s, op.fail(owner, { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'm', attempts: 1 }, 0));
    return s;
  }
  if (state === 'expired-unsettled') {
    await must(ledger, s, op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }));
    await must(ledger, s, op.takeLease(owner, LEASE_MS));
    const at = '2026-11-23T10:15:02.120Z';
    await must(ledger, s, op.expireUnsettled(owner, { code: 'SEND_OUTCOME_UNKNOWN', submittedAt: at, deadline: at }));
    return s;
  }
  await must(ledger, s, op.markSubmitted(owner, { transfer: null, recoveredBy: 'duplicate' }, { transactionId: '1' }, 0));
  if (state === 'submitted') return s;
  if (state === 'broadcast') {
    const transaction = { id: '1', type: 'send', txid: '0x1', outputs: [] };
    await must(ledger, s, op.broadcast('0x1', 1, { txid: '0x1', transaction, walletTransaction: null }));
    return s;
  }
  if (state === 'expired') {
    const at = '2026-11-23T10:15:02.120Z';
    await must(ledger, s, op.expireTracking({ code: 'TRACKING_DEADLINE', submittedAt: at, deadline: at }));
    return s;
  }
  throw new Error(`no set-up for ${state}`);
}

describe('cancel: every state → outcome', () => {
  const table: Array<[setUp: string, outcome: 'cancelled' | 'too-late' | 'already-ended', state: string]> = [
    [NO_RECORD, 'cancelled', 'cancelled'],
    ['received', 'cancelled', 'cancelled'],
    ['gated', 'cancelled', 'cancelled'],
    ['submitting-pending', 'too-late', 'submitting'],
    ['submitting-not-taken', 'too-late', 'submitting'],
    ['submitting-unknown', 'too-late', 'submitting'],
    ['submitted', 'too-late', 'submitted'],
    ['broadcast', 'already-ended', 'broadcast'],
    ['rejected', 'already-ended', 'rejected'],
    ['blocked', 'already-ended', 'blocked'],
    ['failed-before-send', 'already-ended', 'failed'],
    ['failed', 'already-ended', 'failed'],
    ['expired', 'already-ended', 'expired'],
    ['expired-unsettled', 'already-ended', 'expired'],
    ['tombstone', 'already-ended', 'blocked'],
  ];

  it.each(table)('%s → %s (%s)', async (setUp, outcome, state) => {
    const s = await inState(setUp);
    const before = await ledger.get(s);
    const eventsBefore = await events(s);
    const tombstoneBefore = await redis.get(keys.tombstone(s));

    const result = await ledger.cancel(s, CANCEL);
    expect(result).toMatchObject({ outcome, state });

    if (outcome !== 'cancelled') {
      // Nothing changed: the record, its events and its tombstone are as they were.
      expect(await ledger.get(s)).toEqual(before);
      expect(await events(s)).toEqual(eventsBefore);
      expect(await redis.get(keys.tombstone(s))).toBe(tombstoneBefore);
      return;
    }
    const version = (before?.version ?? 0) + 1;
    expect(result).toMatchObject({ version });
    const record = (await ledger.get(s))!;
    expect(record).toMatchObject({ sequenceId: s, state: 'cancelled', version, payload: undefined, leaseOwner: undefined, sends: 0 });
    if (setUp === NO_RECORD) expect(record).toMatchObject({ walletId: '', coin: '', jobId: '', metadata: '' });
    else expect(record).toMatchObject({ walletId: '310', coin: 'eth', jobId: 'job-1' });
    // One event, with its version, epoch and time like every other.
    const published = await events(s);
    expect(published.map((event) => [event.event, event.version])).toEqual([['transfer.cancelled', version]]);
    expect(published[0]!.data).toEqual(CANCEL);
    expect(published[0]!.epoch).toBe(ledger.epoch.known);
    expect(published[0]!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(published[0]!.walletId).toBe(setUp === NO_RECORD ? '' : '310');
    // The tombstone, as for every terminal transition; the record kept RETENTION, out of the active index.
    expect(await ledger.ended(s)).toEqual({ state: 'cancelled', version });
    expect(await redis.pttl(keys.tombstone(s))).toBeGreaterThan(3_600_000);
    expect(await redis.pttl(keys.transfer(s))).toBeGreaterThan(0);
    expect(await redis.pttl(keys.transfer(s))).toBeLessThanOrEqual(60_000);
    expect(await redis.exists(keys.transferPayload(s))).toBe(0);
    expect(await redis.zscore(keys.byState('received'), s)).toBeNull();
    expect(await redis.zscore(keys.terminal, s)).not.toBeNull();

    // A second cancel: already ended, nothing more published.
    expect(await ledger.cancel(s, { reason: 'again', by: 'http:ops' })).toMatchObject({ outcome: 'already-ended', state: 'cancelled' });
    // And once RETENTION removed the record, its tombstone answers.
    await redis.del(keys.transfer(s));
    expect(await ledger.cancel(s, CANCEL)).toEqual({ outcome: 'already-ended', state: 'cancelled', version });
    expect(await events(s)).toHaveLength(1);
  });

  it('after a cancel nothing starts the transfer again: no record, no send in flight, under any job id', async () => {
    for (const setUp of [NO_RECORD, 'received', 'gated']) {
      const s = await inState(setUp);
      await ledger.cancel(s, CANCEL);
      const payload = payloadOf(s);
      for (const request of [
        op.create('job-2', payload),
        op.createAndTakeSend('job-2', payload, DECISION, 'runner-b', LEASE_MS),
        op.pass(DECISION),
        op.takeSend(TransferState.GATED, 'runner-b', LEASE_MS, undefined),
        op.takeLease('runner-b', LEASE_MS, TransferState.GATED),
      ]) {
        expect(await ledger.transition(s, request), setUp).toMatchObject({ ok: false, reason: 'terminal', state: 'cancelled' });
      }
      await redis.del(keys.transfer(s));
      expect(await ledger.transition(s, op.createAndTakeSend('job-3', payload, DECISION, 'runner-c', LEASE_MS))).toMatchObject({
        ok: false,
        reason: 'ended',
        ended: { state: 'cancelled' },
      });
      expect(await events(s)).toHaveLength(1);
    }
  });

  it('a ledger that cannot vouch that no send was made refuses: no epoch, or recovering from a loss', async () => {
    const s = await inState('gated');
    const none = id();
    await redis.del(keys.epoch);
    expect(await ledger.cancel(s, CANCEL)).toEqual({ outcome: 'too-late', state: 'gated', ledger: 'no-epoch-or-recovering' });
    expect(await ledger.cancel(none, CANCEL)).toEqual({ outcome: 'too-late', state: NO_RECORD, ledger: 'no-epoch-or-recovering' });
    await redis.hset(keys.epoch, 'id', ledger.epoch.known, 'recoveryUntil', String(Date.now() + 3_600_000));
    expect(await ledger.cancel(s, CANCEL)).toMatchObject({ outcome: 'too-late', ledger: 'no-epoch-or-recovering' });
    expect(await redis.exists(keys.transfer(none), keys.tombstone(none))).toBe(0);
    expect(await events(s)).toEqual([]);
    // The window over (`ledger accept-epoch`, or its end): the cancel takes effect.
    await redis.hset(keys.epoch, 'recoveryUntil', '0');
    expect(await ledger.cancel(s, CANCEL)).toMatchObject({ outcome: 'cancelled' });
  });

  it('refuses data of the wrong shape before anything changes', async () => {
    const s = await inState('gated');
    for (const data of [
      { reason: '', by: 'cli' },
      { reason: '   ', by: 'cli' },
      { reason: 'two\nlines', by: 'cli' },
      { reason: 'r'.repeat(257), by: 'cli' },
      { reason: 'ok', by: '' },
    ]) {
      await expect(ledger.cancel(s, data)).rejects.toBeInstanceOf(EventShapeError);
    }
    expect((await ledger.get(s))!.state).toBe('gated');
    expect(await ledger.cancel(s, { reason: 'r'.repeat(256), by: 'http:ops' })).toMatchObject({ outcome: 'cancelled' });
  });
});

describe('cancel against a send claim, at once', () => {
  const ROUNDS = 150;

  it(`from gated: takeSend or cancel, never both (${ROUNDS} rounds, both orders, one pipeline and two connections)`, async () => {
    const wins = { send: 0, cancel: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const s = await inState('gated');
      const send = () => ledger.transition(s, op.takeSend(TransferState.GATED, `runner-${round}`, LEASE_MS, undefined));
      // Rounds 0, 1 (mod 4): one connection, so one pipeline in the order issued; 2, 3: two connections racing.
      const cancelVia = round % 4 < 2 ? ledger : otherLedger;
      const cancel = () => cancelVia.cancel(s, CANCEL);
      const [sent, cancelled] =
        round % 2 === 0 ? await Promise.all([send(), cancel()]) : await Promise.all([cancel(), send()]).then(([c, t]) => [t, c] as const);
      const sendWon = sent.ok;
      const cancelWon = cancelled.outcome === 'cancelled';
      expect(sendWon !== cancelWon, `round ${round}: ${JSON.stringify({ sent, cancelled })}`).toBe(true);
      const record = (await ledger.get(s))!;
      if (sendWon) {
        wins.send++;
        expect(cancelled).toEqual({ outcome: 'too-late', state: 'submitting' });
        expect(record).toMatchObject({ state: 'submitting', pending: true, sends: 1 });
        expect(await events(s)).toEqual([]);
      } else {
        wins.cancel++;
        expect(sent).toMatchObject({ ok: false, reason: 'terminal', state: 'cancelled' });
        expect(record).toMatchObject({ state: 'cancelled', pending: false, sends: 0 });
        expect((await events(s)).map((event) => event.event)).toEqual(['transfer.cancelled']);
      }
    }
    // Both orders happen (else the race was not a race).
    expect(wins.send).toBeGreaterThan(0);
    expect(wins.cancel).toBeGreaterThan(0);
  });

  it(`from no record: createAndTakeSend or cancel, never both (${ROUNDS} rounds, one pipeline and two connections)`, async () => {
    const wins = { send: 0, cancel: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const s = id();
      const payload = payloadOf(s);
      const send = () => ledger.transition(s, op.createAndTakeSend('job-1', payload, DECISION, `runner-${round}`, LEASE_MS));
      // Rounds 0, 3, 6 …: one connection, the cancel queued first (one pipeline); the others race.
      const cancelVia = round % 3 === 0 ? ledger : otherLedger;
      const [cancelled, sent] =
        round % 3 === 1
          ? await Promise.all([send(), cancelVia.cancel(s, CANCEL)]).then(([t, c]) => [c, t] as const)
          : await Promise.all([cancelVia.cancel(s, CANCEL), send()]);
      expect(sent.ok !== (cancelled.outcome === 'cancelled'), `round ${round}: ${JSON.stringify({ sent, cancelled })}`).toBe(true);
      if (sent.ok) wins.send++;
      else wins.cancel++;
      const record = (await ledger.get(s))!;
      expect(record.state).toBe(sent.ok ? 'submitting' : 'cancelled');
      expect(await events(s)).toHaveLength(sent.ok ? 0 : 1);
    }
    expect(wins.send).toBeGreaterThan(0);
    expect(wins.cancel).toBeGreaterThan(0);
  });
});
