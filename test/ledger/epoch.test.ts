/**
 * The ledger's epoch (src/ledger/epoch.ts) and what the transition script does with it, on real Redis:
 * a send in flight is recorded only under the epoch its process knows, a lost epoch is declared once
 * and starts a recovery window in which a send needs a lookup first, and every event carries the
 * epoch and an `at` taken from the ledger's clock that never goes back within a transfer.
 */
import fc from 'fast-check';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { parseStreamEntry } from '../../packages/producer/src/events.ts';
import type { Keys } from '../../src/ledger/keys.ts';
import { prefixedKeys } from '../helpers/ledger-steps.ts';
import { Ledger, NO_RECORD, TransferState, type EpochState, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { ISO_TIME_LUA } from '../../src/ledger/request.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

const redis = newRedis();
const WINDOW_MS = 3_600_000;
let keys: Keys;
let prefix: string;
let clock: number;
let seq = 0;
const id = () => `seq-${++seq}`;

function ledger(
  options: { init?: 'auto' | 'manual'; onLost?: (lost: { previous: string; state: EpochState }) => void; writer?: boolean } = {},
): Ledger {
  return new Ledger(redis, keys, {
    eventsMaxLen: 10_000,
    retentionMs: 60_000,
    clock: () => clock,
    epoch: {
      init: options.init ?? 'auto',
      recoveryWindowMs: WINDOW_MS,
      ...(options.onLost ? { onLost: options.onLost } : {}),
      ...(options.writer ? { writer: true } : {}),
    },
  });
}

beforeEach(() => {
  prefix = uniquePrefix('epoch');
  keys = prefixedKeys(prefix);
  clock = 1_700_000_000_000;
});
afterAll(async () => {
  await closeAllRedis();
});

const gated = (l: Ledger, sequenceId: string) =>
  l.transition(sequenceId, { from: [NO_RECORD], to: TransferState.GATED, set: { walletId: '1', coin: 'eth' } });

const sendInFlight = (owner: string, lookedUpAt?: number): TransitionRequest => ({
  from: [TransferState.GATED, TransferState.SUBMITTING],
  to: TransferState.SUBMITTING,
  lease: { mode: 'take', owner, ms: 1_000 },
  set: { pending: 1 },
  increment: { sends: 1 },
  sendInFlight: { lookedUpAt },
});

const UNRESOLVED = { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1, lastError: 'CUSTODY_TIMEOUT' } as const;
const note = (stamp: number): TransitionRequest => ({
  from: [TransferState.GATED],
  to: TransferState.GATED,
  set: { note: stamp },
  event: { type: 'transfer.unresolved', data: UNRESOLVED },
});

/** A wallet transfer as the adapter reads it (the lookup's finding that proves the send accepted). */
const TRANSACTION = { id: '70000001', type: 'send', txid: '', outputs: [{ address: '0xabc', amount: '0.5' }] };

/**
 * Two processes on one ledger, both started, and a transfer of A's gated (`sent`); `lost` collects
 * each one's loss declarations as `a:<previous epoch>` or `b:<previous epoch>`.
 */
async function twoProcesses(options: { writer?: boolean } = {}) {
  const lost: string[] = [];
  const a = ledger({ ...options, onLost: ({ previous }) => lost.push(`a:${previous}`) });
  const b = ledger({ ...options, onLost: ({ previous }) => lost.push(`b:${previous}`) });
  const old = (await a.epoch.start()).id!;
  await b.epoch.start();
  const sent = id();
  await gated(a, sent);
  return { a, b, old, sent, lost };
}

async function events() {
  return (await redis.xrange(keys.events, '-', '+')).map((entry) => parseStreamEntry(entry as [string, string[]]));
}

describe('the epoch at start-up', () => {
  it('auto: the first process writes it, every later one adopts the same', async () => {
    const first = await ledger().epoch.start();
    const second = await ledger().epoch.start();
    expect(first.id).toMatch(/^[0-9a-f]{12}$/);
    expect(second.id).toBe(first.id);
    expect(first.recoveryUntil).toBe(0);
  });

  it('manual: no epoch, and a send in flight is refused until an operator initialises it', async () => {
    const l = ledger({ init: 'manual' });
    expect((await l.epoch.start()).id).toBeUndefined();
    const sequenceId = id();
    await gated(l, sequenceId);
    const refused = await l.transition(sequenceId, sendInFlight('a'));
    expect(refused).toMatchObject({ ok: false, reason: 'epoch' });
    expect(l.epoch.known).toBe('');
    expect((await l.get(sequenceId))?.state).toBe(TransferState.GATED);
    await ledger().epoch.init(); // the operator's `ledger init`
    expect(await l.transition(sequenceId, sendInFlight('a'))).toMatchObject({ ok: false, reason: 'epoch' }); // adopts it now
    expect(l.epoch.known).not.toBe('');
    expect((await l.transition(sequenceId, sendInFlight('a'))).ok).toBe(true);
  });
});

describe('a ledger that Redis lost', () => {
  it('refuses the send in flight, declares the loss once over two processes, and looks up first while it recovers', async () => {
    const { a, b, old, sent: sequenceId, lost } = await twoProcesses();
    const other = id();
    await gated(b, other);
    // Redis lost its data (the shared test Redis: only this test's keys go).
    await redis.del(keys.epoch);

    expect(await a.transition(sequenceId, sendInFlight('a'))).toMatchObject({ ok: false, reason: 'epoch' });
    const now = a.epoch.state!;
    expect(now.id).not.toBe(old);
    expect(now.supersedes).toEqual([old]);
    expect(now.recoveryUntil).toBe(clock + WINDOW_MS);
    // B still knows the old epoch: it adopts the new one without declaring the loss again.
    expect(await b.transition(other, sendInFlight('b'))).toMatchObject({ ok: false, reason: 'epoch' });
    expect(b.epoch.known).toBe(now.id);
    expect(lost).toEqual([`a:${old}`]);
    // While recovery lasts: no send in flight without a lookup first, nor after a lookup made less than
    // one lease (1 s here) after the loss, when a send of the lost life may still have been in flight.
    expect(await a.transition(sequenceId, sendInFlight('a'))).toMatchObject({ ok: false, reason: 'recovery' });
    expect(await a.transition(sequenceId, sendInFlight('a', clock + 999))).toMatchObject({ ok: false, reason: 'recovery' });
    expect((await a.transition(sequenceId, sendInFlight('a', clock + 1_000))).ok).toBe(true);
    // After the window: as before.
    clock += WINDOW_MS;
    expect((await b.transition(other, sendInFlight('b'))).ok).toBe(true);
  });

  it('a process that restarted onto the empty Redis (auto) made a new epoch: the one that remembers records the loss there', async () => {
    const remembers = ledger();
    const old = (await remembers.epoch.start()).id!;
    await redis.del(keys.epoch);
    const restarted = ledger();
    const fresh = (await restarted.epoch.start()).id!;
    expect(fresh).not.toBe(old);
    const sequenceId = id();
    await gated(restarted, sequenceId);
    const before = await restarted.transition(sequenceId, sendInFlight('r'));
    expect(before.ok).toBe(true); // blind: nothing told it (the residual risk of auto)
    await restarted.transition(sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: 'r' },
      unset: ['leaseOwner', 'leaseUntil', 'pending'],
    });
    const other = id();
    // The reply of its first transition names an epoch that does not supersede the one it knows: the
    // loss is recorded at once, under an epoch of its own (the restarted process's life ends too).
    await gated(remembers, other);
    const declared = remembers.epoch.state!;
    expect(declared.id).not.toBe(fresh);
    expect(declared.id).not.toBe(old);
    expect(declared).toMatchObject({ supersedes: [fresh, old], recoveryUntil: clock + WINDOW_MS });
    expect(await remembers.transition(other, sendInFlight('m'))).toMatchObject({ ok: false, reason: 'recovery' });
    // The restarted process now meets the new epoch, then its window.
    expect(await restarted.transition(sequenceId, sendInFlight('r'))).toMatchObject({ ok: false, reason: 'epoch' });
    expect(restarted.epoch.known).toBe(declared.id);
    expect(await restarted.transition(sequenceId, sendInFlight('r'))).toMatchObject({ ok: false, reason: 'recovery' });
    expect(restarted.epoch.state?.recoveryUntil).toBe(clock + WINDOW_MS);
    // An operator ends the window.
    await ledger().epoch.accept();
    expect((await restarted.transition(sequenceId, sendInFlight('r'))).ok).toBe(true);
  });
});

/** Every key of this test's ledger as it is now (DUMP), to put back later: a snapshot or backup restored. */
async function snapshot(): Promise<() => Promise<void>> {
  const names = await redis.keys(`${prefix}:*`);
  const saved = await Promise.all(names.map(async (name) => ({ name, dump: await redis.dumpBuffer(name), ttl: await redis.pttl(name) })));
  return async () => {
    const now = await redis.keys(`${prefix}:*`);
    if (now.length > 0) await redis.del(...now);
    for (const { name, dump, ttl } of saved) if (dump) await redis.restore(name, ttl > 0 ? ttl : 0, dump);
  };
}

describe('a ledger that went back in time (same epoch: a lagging replica promoted, a snapshot restored)', () => {
  const CANCEL = { reason: 'customer asked', by: 'test' };

  it('refuses the next transition of a process that saw the newer ledger, declares the loss once, and a cancel is too late', async () => {
    const { a, b, old, sent, lost } = await twoProcesses();
    const restore = await snapshot();
    // After the snapshot: the send in flight, and B's own work (B saw the newer ledger too).
    expect((await a.transition(sent, sendInFlight('a'))).ok).toBe(true);
    const other = id();
    await gated(b, other);
    await restore();

    // The older copy shows `sent` gated, never sent: without the tick a cancel would say "no send was made".
    expect(await a.cancel(sent, CANCEL)).toMatchObject({ outcome: 'too-late', ledger: 'no-epoch-or-recovering' });
    const now = a.epoch.state!;
    expect(now.id).not.toBe(old);
    expect(now).toMatchObject({ supersedes: [old], recoveryUntil: clock + WINDOW_MS, lostAt: clock });
    // B adopts the new epoch without declaring again; the send needs a lookup first.
    expect(await b.transition(sent, sendInFlight('b'))).toMatchObject({ ok: false, reason: 'epoch' });
    expect(b.epoch.known).toBe(now.id);
    expect(await b.transition(sent, sendInFlight('b'))).toMatchObject({ ok: false, reason: 'recovery' });
    expect(lost).toEqual([`a:${old}`]);
    expect(await redis.exists(keys.tombstone(sent))).toBe(0);
  });

  it('is noticed by the periodic check while no transition runs, and events of the new life carry the new epoch', async () => {
    const lost: string[] = [];
    const a = ledger({ onLost: ({ previous }) => lost.push(previous) });
    const old = (await a.epoch.start()).id!;
    const sequenceId = id();
    await gated(a, sequenceId);
    const restore = await snapshot();
    await a.transition(sequenceId, note(1)); // version 1, under the old epoch
    await restore();

    const after = await a.epoch.check();
    expect(after.id).not.toBe(old);
    expect(lost).toEqual([old]);
    expect((await a.epoch.check()).id).toBe(after.id); // once
    // The older copy lost version 1: the next event is version 1 again, but never under the same epoch.
    await a.transition(sequenceId, note(2));
    const published = (await events()).filter((event) => event.sequenceId === sequenceId);
    expect(published.map((event) => [event.version, event.epoch])).toEqual([[1, after.id]]);
  });

  it('a process that starts on the older copy cannot tell (the residual risk)', async () => {
    const a = ledger();
    await a.epoch.start();
    const sequenceId = id();
    await gated(a, sequenceId);
    const restore = await snapshot();
    await a.transition(sequenceId, note(1));
    await restore();
    const late = ledger();
    const known = (await late.epoch.start()).id!;
    expect((await late.epoch.check()).id).toBe(known);
    expect((await late.transition(sequenceId, note(2))).ok).toBe(true);
  });

  /*
   * Seen in a Cluster failover test run (three transfers accepted twice): the promoted replica lacked a
   * worker's send in flight, the other worker's changes (it had seen less) advanced the tick past what
   * the first had seen before its next transition, so the tick alone no longer showed the loss, and the
   * first worker's send in flight was forgotten and made again.
   */
  describe("however far other processes advanced the tick since (each writer's own mark)", () => {
    async function forgottenSend(writer: boolean) {
      const { a, b, old, sent, lost } = await twoProcesses({ writer });
      const restore = await snapshot();
      expect((await a.transition(sent, sendInFlight('a'))).ok).toBe(true);
      await restore();
      // B saw less than A: its changes pass on the older copy and carry the tick past A's.
      for (let i = 0; i < 5; i++) expect((await gated(b, id())).ok).toBe(true);
      expect(Number(await redis.hget(keys.epoch, 'tick'))).toBeGreaterThan(a.epoch.seen);
      return { a, b, old, sent, lost };
    }

    it('refuses the next transition of the process whose change the ledger forgot, and declares the loss', async () => {
      const { a, old, sent, lost } = await forgottenSend(true);
      const before = await redis.hgetall(keys.transfer(sent));
      expect(await a.transition(sent, note(1))).toMatchObject({ ok: false, reason: 'epoch' });
      expect(await redis.hgetall(keys.transfer(sent))).toEqual(before);
      expect(lost).toEqual([`a:${old}`]);
      expect(a.epoch.state).toMatchObject({ supersedes: [old], recoveryUntil: clock + WINDOW_MS });
      // The forgotten send in flight: from now on a send needs a lookup first.
      expect(await a.transition(sent, sendInFlight('a'))).toMatchObject({ ok: false, reason: 'recovery' });
      // A declaration drops every writer's mark: the new epoch counts them again.
      expect(Object.keys(await redis.hgetall(keys.epoch)).filter((field) => field.startsWith('w:') || field === 'behind')).toEqual([]);
    });

    it('is noticed by the periodic check too', async () => {
      const { a, old, lost } = await forgottenSend(true);
      expect((await a.epoch.check()).id).not.toBe(old);
      expect(lost).toEqual([`a:${old}`]);
    });

    it('a refusal marks the ledger behind: every change under that epoch is refused until a loss is declared', async () => {
      const { a, old, sent } = await forgottenSend(true);
      // A is refused and stops before it declares (it crashed, say): the mark stays.
      a.epoch.mismatch = async () => a.epoch.state!;
      expect(await a.transition(sent, note(1))).toMatchObject({ ok: false, reason: 'epoch' });
      expect(await redis.hget(keys.epoch, 'behind')).toBe('1');
      const lost: string[] = [];
      const c = ledger({ onLost: ({ previous }) => lost.push(previous) });
      await c.epoch.start(); // starts on the older copy: alone, it could not tell
      expect(await gated(c, id())).toMatchObject({ ok: false, reason: 'epoch' });
      expect(lost).toEqual([old]);
      expect(c.epoch.known).not.toBe(old);
      expect(await redis.hget(keys.epoch, 'behind')).toBeNull();
    });

    it("the send's accepted answer is recorded all the same: the mark is refused, the proven mark is not", async () => {
      const { a, b, old, sent } = await forgottenSend(true);
      const data = { transfer: null, recoveredBy: 'get-transfer' as const, transaction: TRANSACTION };
      const match = { sequenceId: sent, transactionId: TRANSACTION.id };
      // The older copy shows `sent` gated and no lease of A's: what A's answer proved would be dropped.
      expect(await a.transition(sent, op.markSubmitted('a', data, match, 0))).toMatchObject({ ok: false, reason: 'epoch' });
      const proven = await a.transition(sent, op.markProven(data, match, 0));
      expect(proven).toMatchObject({ ok: true, record: { state: TransferState.SUBMITTED } });
      expect(await redis.hget(keys.transfer(sent), 'matchTransactionId')).toBe(TRANSACTION.id);
      const submitted = (await events()).filter((event) => event.sequenceId === sent && event.event === 'transfer.submitted');
      expect(submitted.map((event) => event.epoch)).toEqual([a.epoch.known]);
      expect(a.epoch.known).not.toBe(old);
      // No other runner sends it again: its send in flight is refused by the state.
      await b.epoch.check();
      expect(await b.transition(sent, sendInFlight('b', clock))).toMatchObject({ ok: false, reason: 'state' });
    });

    it('the proven mark reaches `submitted` only, never leaves an end, and takes no lease over for anything else', async () => {
      const a = ledger({ writer: true });
      await a.epoch.start();
      const sent = id();
      await gated(a, sent);
      expect((await a.transition(sent, sendInFlight('other'))).ok).toBe(true);
      const data = { transfer: null, recoveredBy: 'get-transfer' as const, transaction: TRANSACTION };
      const match = { sequenceId: sent, transactionId: TRANSACTION.id };
      // Another runner's live lease does not stop it, but 'proven' to any other state is refused.
      expect(await a.transition(sent, { ...op.markProven(data, match, 0), to: TransferState.FAILED })).toMatchObject({
        ok: false,
        reason: 'lease',
      });
      expect((await a.transition(sent, op.markProven(data, match, 0))).ok).toBe(true);
      expect(await a.transition(sent, op.markProven(data, match, 0))).toMatchObject({ ok: false, reason: 'state' });
    });

    it('without the marks (the tick alone) the forgotten send goes unnoticed', async () => {
      const { a, sent, lost } = await forgottenSend(false);
      expect((await a.transition(sent, note(1))).ok).toBe(true);
      expect(lost).toEqual([]);
    });
  });

  it('a transition with a tick the ledger never reached is refused before it changes anything', async () => {
    const a = ledger();
    await a.epoch.start();
    const sequenceId = id();
    await gated(a, sequenceId);
    const tick = Number(await redis.hget(keys.epoch, 'tick'));
    expect(tick).toBeGreaterThan(0);
    expect(a.epoch.seen).toBe(tick);
    await redis.hset(keys.epoch, 'tick', String(tick - 1));
    const before = await redis.hgetall(keys.transfer(sequenceId));
    expect(await a.transition(sequenceId, note(1))).toMatchObject({ ok: false, reason: 'epoch' });
    expect(await redis.hgetall(keys.transfer(sequenceId))).toEqual(before);
  });
});

describe('events', () => {
  it("carry the ledger's epoch and the ledger's clock as `at`, which never goes back within a transfer", async () => {
    const l = ledger();
    const epoch = (await l.epoch.start()).id!;
    const sequenceId = id();
    await gated(l, sequenceId);
    expect((await l.transition(sequenceId, note(1))).ok).toBe(true);
    clock -= 120_000; // a failover to a node whose clock is two minutes behind
    expect((await l.transition(sequenceId, note(2))).ok).toBe(true);
    clock += 240_000;
    expect((await l.transition(sequenceId, note(3))).ok).toBe(true);
    const published = await events();
    expect(published.map((event) => event.epoch)).toEqual([epoch, epoch, epoch]);
    expect(published.map((event) => event.at)).toEqual([
      new Date(1_700_000_000_000).toISOString(),
      new Date(1_700_000_000_000).toISOString(),
      new Date(1_700_000_120_000).toISOString(),
    ]);
  });

  it('take `at` from Redis TIME when there is no test clock', async () => {
    const l = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000 });
    const sequenceId = id();
    await gated(l, sequenceId);
    const before = await l.now();
    await l.transition(sequenceId, note(1));
    const after = await l.now();
    const at = Date.parse((await events())[0]!.at);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
  });

  it('isoTime writes every instant as toISOString does', async () => {
    const lua = `${ISO_TIME_LUA}\nreturn isoTime(tonumber(ARGV[1]))`;
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 253_402_300_799_999 }), async (ms) => {
        expect(await redis.eval(lua, 0, String(ms))).toBe(new Date(ms).toISOString());
      }),
      { numRuns: 300, examples: [[0], [951_782_400_000], [4_107_542_399_999], [1_709_164_800_000]] },
    );
  });
});
