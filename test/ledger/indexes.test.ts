import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { EventData } from '../../packages/producer/src/events.ts';
import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import { keySlot } from '../../packages/producer/src/redis-slot.ts';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, TERMINAL_STATES, TransferState, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { ATTENTION_REASONS, TransferQueries, type ListQuery } from '../../src/ledger/queries.ts';
import { expectedAttention, indexProblems, scanRecords } from '../helpers/ledger-indexes.ts';
import { PASSED_DECISION } from '../helpers/gate-decision.ts';
import { mustTransition, payloadOf } from '../helpers/ledger-steps.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';

/**
 * The listing indexes are kept by the transition script with the record (docs/architecture.md
 * "Listing transfers"): after transitions driven through the Ledger's named operations they equal
 * what a scan of the records gives, retention takes them with the records, and a listing walked page
 * by page while transfers change lists each at most once and skips none that matched throughout.
 */
const redis = newRedis();
let prefix: string;
let keys: Keys;
let ledger: Ledger;
let queries: TransferQueries;
let n = 0;
const id = (tag: string) => `${tag}-${++n}-a88a1846-b23d`;

const LEASE_MS = 30_000;
const UNRESOLVED_AFTER_MS = 600_000;
const DECISION = PASSED_DECISION;
const AT = '2026-11-23T10:15:02.120Z';
const UNRESOLVED: EventData['transfer.unresolved'] = { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1, lastError: 'CUSTODY_TIMEOUT' };
const IN_USE: EventData['transfer.unresolved'] = { code: 'SEQUENCE_ID_IN_USE', attempts: 1, lastError: 'CUSTODY_CONFLICT' };

function setUp(retentionMs = 3_600_000): void {
  prefix = uniquePrefix('indexes', { hashTag: true });
  keys = createKeys(prefix, `${prefix}:events`);
  ledger = new Ledger(redis, keys, { eventsMaxLen: 100_000, retentionMs });
  queries = new TransferQueries(redis, keys, { unresolvedAfterMs: UNRESOLVED_AFTER_MS });
}

beforeEach(async () => {
  setUp();
  await ledger.epoch.start();
});
afterAll(async () => {
  await closeAllRedis();
});

const must = (sequenceId: string, request: TransitionRequest) => mustTransition(ledger, sequenceId, request);

/** One transfer taken to `end` through the operations the handlers use; returns its sequenceId. */
async function drive(end: string): Promise<string> {
  const s = id(end);
  const owner = `runner-${s}`;
  const record = String(100_000 + n);
  await must(s, op.create(`job-${s}`, payloadOf(s)));
  if (end === 'received') return s;
  if (end === 'blocked') {
    await must(s, op.block({ ...DECISION, applies: true, outcome: 'blocked' }));
    return s;
  }
  if (end === 'cancelled') {
    const result = await ledger.cancel(s, { reason: 'duplicate order', by: 'cli' });
    expect(result.outcome).toBe('cancelled');
    return s;
  }
  if (end === 'handed-over') {
    await must(s, op.handOver(TransferState.RECEIVED, `job-again-${s}`));
    return s;
  }
  await must(s, op.pass(DECISION));
  if (end === 'gated') return s;
  await must(s, op.takeSend(TransferState.GATED, owner, LEASE_MS, undefined));
  if (end === 'submitting') return s;
  if (end === 'failed') {
    await must(s, op.fail(owner, { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'm', attempts: 1 }, 0));
    return s;
  }
  if (end === 'in-use') {
    await must(s, op.markInUse(owner, { lastError: 'CUSTODY_CONFLICT', extraSends: 0 }, IN_USE));
    return s;
  }
  await must(s, op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }));
  if (end === 'send-unknown') return s;
  if (end === 'expired-unknown') {
    await must(s, op.takeLease(owner, LEASE_MS));
    await must(s, op.expireUnsettled(owner, { code: 'SEND_OUTCOME_UNKNOWN', submittedAt: AT, deadline: AT }));
    return s;
  }
  await must(s, op.takeLease(owner, LEASE_MS));
  await must(s, op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }, UNRESOLVED));
  if (end === 'unresolved') return s;
  await must(s, op.takeLease(owner, LEASE_MS));
  await must(s, op.markSubmitted(owner, { transfer: null, recoveredBy: 'duplicate' }, { transactionId: record }, 0));
  if (end === 'submitted') return s;
  await must(s, op.pollAnswered());
  if (end === 'awaiting-approval' || end === 'approved') {
    // Stamped by the first poll that sees the pending approval; a second writes the same.
    await must(s, op.approvalPending());
    await must(s, op.approvalPending());
    if (end === 'approved') await must(s, op.approvalEnded());
    return s;
  }
  if (end === 'halted-for-now' || end === 'halted') {
    await must(s, op.haltedForNow('removed'));
    await must(s, op.pollFailed(1));
    if (end === 'halted') await must(s, op.halt({ state: 'rejected', providerTransferId: record }));
    return s;
  }
  if (end === 'expired') {
    await must(s, op.expireTracking({ code: 'TRACKING_DEADLINE', submittedAt: AT, deadline: AT }));
    return s;
  }
  const txid = `0xAB${n.toString(16)}CD`;
  await must(s, op.txidFound({ id: record, txid }));
  const transaction = { id: record, type: 'send', txid, outputs: [] };
  await must(s, op.broadcast(txid, Date.now(), { txid, transaction, walletTransaction: null }));
  return s;
}

const ENDS = [
  'received',
  'handed-over',
  'blocked',
  'cancelled',
  'gated',
  'submitting',
  'failed',
  'in-use',
  'send-unknown',
  'expired-unknown',
  'unresolved',
  'submitted',
  'awaiting-approval',
  'approved',
  'halted-for-now',
  'halted',
  'expired',
  'broadcast',
];

describe('listing indexes kept with the record', () => {
  it('equal a scan of the records after every kind of transition', async () => {
    for (const end of ENDS) await drive(end);
    // A rejected job without a usable sequenceId has no index member: nothing to list.
    await ledger.rejectJob(
      'job-no-sequence',
      { sequenceId: '', walletId: '', coin: '', metadata: '' },
      { code: 'INVALID_PAYLOAD', issues: [{ path: 'halfSigned.sequenceId', message: 'required' }] },
    );
    const records = await scanRecords(redis, prefix);
    expect(records.size).toBe(ENDS.length);
    // Every reason is reached, so the comparison below covers each.
    const reasons = new Set([...records.values()].map((record) => expectedAttention(record)?.reason));
    for (const reason of ATTENTION_REASONS) expect(reasons).toContain(reason);
    expect(await indexProblems(redis, keys, prefix)).toEqual([]);
  });

  it('keep the attention a refused `failed` records while the ledger recovers (its unknownSince)', async () => {
    const s = await drive('submitting');
    // The ledger recovers from a loss: a failed from submitting is refused and stamps unknownSince.
    await redis.hset(keys.epoch, 'recoveryUntil', String(Date.now() + 3_600_000));
    const result = await ledger.transition(
      s,
      op.fail(`runner-${s}`, { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'm', attempts: 1 }, 0),
    );
    expect(result).toMatchObject({ ok: false, reason: 'unknown' });
    expect((await ledger.get(s))?.unknownSince).toBeDefined();
    expect(await indexProblems(redis, keys, prefix)).toEqual([]);
  });

  it('answer the named queries: counts, attention, by txid, by job id, by prefix', async () => {
    const made = new Map<string, string>();
    for (const end of ENDS) made.set(end, await drive(end));
    const records = await scanRecords(redis, prefix);
    const counts = await queries.counts();
    for (const state of Object.values(TransferState)) {
      expect(counts.states[state], state).toBe([...records.values()].filter((record) => record.state === state).length);
    }
    // A send outcome unknown only counts once UNRESOLVED_AFTER has passed: not yet.
    // Nor a pending approval before CONSOLE_APPROVAL_WAIT (default 1h).
    expect(counts.attention).toEqual({ unresolved: 2, 'send-unknown': 0, halted: 2, 'expired-unknown': 1, approval: 0 });
    const later = new TransferQueries(redis, keys, { unresolvedAfterMs: 0, approvalWaitMs: 0, clock: () => Date.now() + 1 });
    expect((await later.counts()).attention['send-unknown']).toBe(1);
    expect((await later.counts()).attention.approval).toBe(1);
    const attention = await later.attention();
    expect(attention.map((item) => item.since)).toEqual([...attention.map((item) => item.since)].sort((a, b) => a - b));
    expect(new Map(attention.map((item) => [item.sequenceId, item.reason]))).toEqual(
      new Map([
        [made.get('in-use'), 'unresolved'],
        [made.get('unresolved'), 'unresolved'],
        [made.get('send-unknown'), 'send-unknown'],
        [made.get('expired-unknown'), 'expired-unknown'],
        [made.get('halted-for-now'), 'halted'],
        [made.get('halted'), 'halted'],
        [made.get('awaiting-approval'), 'approval'],
      ]),
    );
    // An expiry with SEND_OUTCOME_UNKNOWN needs attention for 7 days, then no longer.
    const week = new TransferQueries(redis, keys, { unresolvedAfterMs: 0, clock: () => Date.now() + 8 * 24 * 3_600_000 });
    expect((await week.counts()).attention['expired-unknown']).toBe(0);

    const broadcast = records.get(made.get('broadcast')!)!;
    expect(await queries.byTxid(broadcast.txid!)).toBe(broadcast.sequenceId);
    expect(await queries.byTxid(broadcast.txid!.toLowerCase())).toBe(broadcast.sequenceId);
    expect(await queries.byJobId(`job-${made.get('received')}`)).toBe(made.get('received'));
    // A job handed over: the new job owns the transfer, the lost one no longer names it.
    expect(await queries.byJobId(`job-again-${made.get('handed-over')}`)).toBe(made.get('handed-over'));
    expect(await queries.byJobId(`job-${made.get('handed-over')}`)).toBeUndefined();

    const byPrefix = await queries.listTransfers({ q: made.get('halted')!.slice(0, 9), limit: 10 });
    expect(byPrefix.items.map((item) => item.sequenceId)).toEqual([made.get('halted')]);
    const byTxid = await queries.listTransfers({ q: broadcast.txid!, limit: 10 });
    expect(byTxid.items.map((item) => item.sequenceId)).toEqual([broadcast.sequenceId]);
    // A listing holds what changed before the ms it starts in.
    const latest = Math.max(...[...records.values()].map((record) => record.updatedAt));
    await until('the ledger clock to pass the last change', 5_000, async () => ((await ledger.now()) > latest ? true : undefined), 1);
    const all = await walk({ limit: 3 });
    expect(all.sort()).toEqual([...records.keys()].sort());
    expect(await walk({ q: 'b', limit: 1 })).toEqual([made.get('blocked'), made.get('broadcast')].sort());
  });

  it('search by the beginning of a txid or a job id, in pages, each transfer once', async () => {
    const broadcast = [await drive('broadcast'), await drive('broadcast')];
    const handedOver = await drive('handed-over');
    // Its sequenceId and its job id (job-job-...) both begin with 'job': listed once (it ends broadcast).
    const both = await drive('job');
    const records = await scanRecords(redis, prefix);
    const txid = records.get(broadcast[0]!)!.txid!;
    // Any spelling of a hex txid's beginning: '0xAB…' is stored as '0xab…'.
    for (const q of [txid.slice(0, txid.length - 1), txid.slice(0, txid.length - 1).toUpperCase()]) {
      const found = (await queries.listTransfers({ q, limit: 10 })).items;
      expect(found.map((item) => item.sequenceId)).toContain(broadcast[0]);
      for (const item of found) expect(item.txid!.toLowerCase().startsWith(q.toLowerCase())).toBe(true);
    }
    expect((await queries.listTransfers({ q: txid, limit: 10 })).items.map((item) => item.sequenceId)).toEqual([broadcast[0]]);
    expect((await walk({ q: '0xab', limit: 1 })).sort()).toEqual([...broadcast, both].sort());
    // The job that owns the transfer now is searched, the one it was handed over from no longer.
    expect(await walk({ q: `job-again-${handedOver.slice(0, 12)}`, limit: 10 })).toEqual([handedOver]);
    expect(await walk({ q: `job-${handedOver}`, limit: 10 })).toEqual([]);
    const jobs = await walk({ q: 'job', limit: 1 });
    expect(jobs.sort()).toEqual([...records.keys()].sort());
    expect(jobs.filter((s) => s === both)).toHaveLength(1);
    // The other filters apply to what a prefix finds.
    expect((await walk({ q: 'job', state: TransferState.BROADCAST, limit: 2 })).sort()).toEqual([...broadcast, both].sort());
    expect(await indexProblems(redis, keys, prefix)).toEqual([]);
    // A record last changed before the search index existed has no entry there: its exact txid still
    // finds it (by the txid's claim), once, and so does its lookup by txid.
    const old = records.get(broadcast[1]!)!;
    await redis.zrem(keys.search, `t:${old.txid!.toLowerCase()}\n${old.sequenceId}`, `j:${old.jobId}\n${old.sequenceId}`);
    expect(await walk({ q: old.txid!, limit: 1 })).toEqual([old.sequenceId]);
    expect(await queries.byTxid(old.txid!.toUpperCase())).toBe(old.sequenceId);
    expect(await walk({ q: old.jobId, limit: 1 })).toEqual([]);
    // A job id made by jobIdFor names its sequenceId: such a record is found by it, once, without an entry.
    // (Such a job id never has a search entry; a record older than the indexes is in none of them.)
    const derived = id('derived');
    await must(derived, op.create(jobIdFor(derived), payloadOf(derived)));
    await redis.zrem(keys.ids, derived);
    expect(await walk({ q: jobIdFor(derived), limit: 1 })).toEqual([derived]);
  });

  it('find jobIdFor job ids without a search entry of their own: by job id and its beginning, in pages, once', async () => {
    // Made by jobIdFor: no entry in the search index, the index of every sequenceId stands for them.
    const own = [id('own'), id('own'), id('own'), id('own'), id('own')];
    for (const s of own) await must(s, op.create(jobIdFor(s), payloadOf(s)));
    for (const s of own) expect(await redis.zscore(keys.search, `j:${jobIdFor(s)}\n${s}`)).toBeNull();
    // A custom job id keeps its entry; one whose id looks like another transfer's jobIdFor id too.
    const custom = await drive('received');
    const lookalike = id('lookalike');
    await must(lookalike, op.create(jobIdFor(own[0]!) + '-x', payloadOf(lookalike)));
    // Handed over from a jobIdFor job to another: no longer found by the first.
    const away = id('away');
    await must(away, op.create(jobIdFor(away), payloadOf(away)));
    await must(away, op.handOver(TransferState.RECEIVED, `job-again-${away}`));
    // An entry such a job id got from a worker before this change: found once all the same.
    const older = id('older');
    await must(older, op.create(jobIdFor(older), payloadOf(older)));
    await redis.zadd(keys.search, 0, `j:${jobIdFor(older)}\n${older}`);
    expect(await indexProblems(redis, keys, prefix)).toEqual([`search: j:${jobIdFor(older)}\n${older} should not be there`]);

    for (const s of [...own, older]) expect(await queries.byJobId(jobIdFor(s))).toBe(s);
    expect(await queries.byJobId(jobIdFor(away))).toBeUndefined();
    expect(await queries.byJobId(`job-again-${away}`)).toBe(away);
    expect(await queries.byJobId(jobIdFor(own[0]!) + '-x')).toBe(lookalike);
    expect(await queries.byJobId(jobIdFor(custom))).toBeUndefined();

    const owners = [...own, older];
    for (const limit of [1, 2, 3, 10]) {
      // Every jobIdFor job id begins with 'transfer-', and with 'tra'; the lookalike's too.
      expect((await walk({ q: 'transfer-', limit })).sort()).toEqual([...owners, lookalike].sort());
      expect((await walk({ q: 'tra', limit })).sort()).toEqual([...owners, lookalike].sort());
      expect(await walk({ q: jobIdFor(own[0]!), limit })).toEqual([own[0], lookalike]);
      expect(await walk({ q: jobIdFor(older), limit })).toEqual([older]);
      expect(await walk({ q: jobIdFor(away), limit })).toEqual([]);
      expect(await walk({ q: `job-again-${away}`, limit })).toEqual([away]);
    }
    // In job id order across both sources, a page after another.
    const page = await queries.listTransfers({ q: 'transfer-', limit: 2 });
    const rest = await queries.listTransfers({ q: 'transfer-', limit: 10, cursor: page.next! });
    const order = [...page.items, ...rest.items].map((item) => item.jobId);
    expect(order).toEqual([...order].sort());
    // A beginning that no jobIdFor job id has finds none of them.
    expect(await walk({ q: 'job-', limit: 3 })).toEqual(expect.not.arrayContaining(owners));
  });

  it('are removed by retention together with the ended records', async () => {
    setUp(300);
    await ledger.epoch.start();
    const ended = [];
    for (const end of ENDS) {
      const s = await drive(end);
      if (TERMINAL_STATES.has((await ledger.get(s))!.state)) ended.push(s);
    }
    expect(ended.length).toBeGreaterThan(5);
    await until(
      'the ended records to expire',
      10_000,
      async () => ((await scanRecords(redis, prefix)).size === ENDS.length - ended.length ? true : undefined),
      25,
    );
    expect(await ledger.forgetTerminal(Date.now())).toBe(ended.length);
    expect(await indexProblems(redis, keys, prefix)).toEqual([]);
    expect(await redis.zcard(keys.terminal)).toBe(0);
  });

  it("takes over what an older worker's index of non-terminal transfers holds", async () => {
    // Records last changed by a worker before contract v1.4: in its index (transfers:active), in no
    // state index. One still submitting, one submitted, one whose record is gone, one that ended.
    const [submitting, submitted, gone, ended] = [id('legacy'), id('legacy'), id('legacy'), id('legacy')];
    await redis.hset(keys.transfer(submitting), 'state', 'submitting', 'updatedAt', '1000');
    await redis.hset(keys.transfer(submitted), 'state', 'submitted', 'updatedAt', '2000');
    await redis.hset(keys.transfer(ended), 'state', 'broadcast', 'updatedAt', '3000');
    await redis.zadd(keys.legacyActive, 1000, submitting, 2000, submitted, 500, gone, 3000, ended);
    expect(await ledger.adoptLegacyActive(2)).toBe(4);
    expect(await redis.exists(keys.legacyActive)).toBe(0);
    expect(await redis.zscore(keys.byState('submitting'), submitting)).toBe('1000');
    expect(await redis.zscore(keys.byState('submitted'), submitted)).toBe('2000');
    expect(await redis.zscore(keys.ids, submitted)).toBe('0');
    for (const state of Object.values(TransferState)) {
      expect(await redis.zscore(keys.byState(state), gone)).toBeNull();
      expect(await redis.zscore(keys.byState(state), ended)).toBeNull();
    }
    // Reconciliation's walk finds them as any other stale transfer, state by state.
    const stale: string[] = [];
    for await (const member of ledger.staleActive(2500, 1)) stale.push(member);
    expect(stale).toEqual(expect.arrayContaining([submitting, submitted]));
    expect(await ledger.adoptLegacyActive()).toBe(0);
    await redis.del(keys.transfer(submitting), keys.transfer(submitted), keys.transfer(ended));
    for (const member of [submitting, submitted]) await ledger.dropActive(member);
  });

  it('every listing key shares the prefix hash tag (one Cluster slot)', () => {
    const slot = keySlot(keys.transfer('x'));
    const listing = [
      ...Object.values(TransferState).map((state) => keys.byState(state)),
      ...ATTENTION_REASONS.map((reason) => keys.attention(reason)),
      keys.ids,
      keys.search,
      keys.endedEntries,
      ...keys.transitionIndex(['-', 'received', 'gated'], 'cancelled'),
      // The claims (transition.lua writes them; reconciliation's retention scans them).
      keys.claims,
      keys.claimsCursor,
    ];
    expect(listing.filter((key) => keySlot(key) !== slot)).toEqual([]);
  });
});

/** Every sequenceId a listing gives, page by page. */
async function walk(query: Omit<ListQuery, 'cursor'>, between?: () => Promise<void>): Promise<string[]> {
  const listed: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await queries.listTransfers({ ...query, ...(cursor ? { cursor } : {}) });
    expect(page.items.length).toBeLessThanOrEqual(query.limit);
    listed.push(...page.items.map((item) => item.sequenceId));
    cursor = page.next ?? undefined;
    if (between) await between();
  } while (cursor);
  return listed;
}

// 20,000 (INDEX_LISTING_SIZE=20000) takes about 30 s on a 2-core machine; the default keeps the suite quick.
const SIZE = Number(process.env.INDEX_LISTING_SIZE ?? 5_000);

describe('a listing while transfers change', () => {
  it(`lists each of ${SIZE} transfers at most once and skips none that matched throughout`, async () => {
    const ids = Array.from({ length: SIZE }, () => id('page'));
    for (let i = 0; i < ids.length; i += 500) {
      await Promise.all(
        ids.slice(i, i + 500).map(async (s, j) => {
          // Half by jobIdFor's job ids (no search entry: the search walks the index of every sequenceId).
          await must(s, op.create((i + j) % 2 === 0 ? jobIdFor(s) : `job-${s}`, payloadOf(s)));
          if ((i + j) % 3 === 0) await must(s, op.pass(DECISION));
        }),
      );
    }
    const initial = await scanRecords(redis, prefix);
    const received = new Set([...initial.values()].filter((record) => record.state === TransferState.RECEIVED).map((r) => r.sequenceId));
    // Changed during the listing (recorded before the change is sent): these may or may not be listed.
    const touched = new Set<string>();
    let stop = false;
    let changes = 0;
    let k = 0;
    const mutate = async (): Promise<void> => {
      while (!stop) {
        const batch = Array.from({ length: 20 }, () => ids[(k = (k * 7919 + 13) % ids.length)]!);
        await Promise.all(
          batch.map(async (s, j) => {
            touched.add(s);
            const state = initial.get(s)!.state;
            // Moves it up in its state (a new job), out of it (gated), or to the end (cancelled).
            if (j % 3 === 0) await ledger.transition(s, op.handOver(state, `job-${s}-${changes}`));
            else if (j % 3 === 1) await ledger.transition(s, op.pass(DECISION));
            else await ledger.cancel(s, { reason: 'test', by: 'cli' });
            changes++;
          }),
        );
        // New transfers after the listing started: never in it (their last change is after its window).
        const fresh = id('fresh');
        touched.add(fresh);
        await must(fresh, op.create(changes % 2 === 0 ? jobIdFor(fresh) : `job-${fresh}`, payloadOf(fresh)));
      }
    };
    const mutator = mutate();
    let pages = 0;
    const [byState, everything, byJob] = await Promise.all([
      walk({ state: TransferState.RECEIVED, limit: 200 }, async () => {
        pages++;
        await new Promise((resolve) => setImmediate(resolve));
      }),
      walk({ limit: 150 }),
      walk({ q: 'transfer-page', limit: 100 }),
    ]);
    stop = true;
    await mutator;
    expect(changes).toBeGreaterThan(0);
    expect(pages).toBeGreaterThan(1);
    const ownJobs = new Set(
      [...initial.values()].filter((record) => record.jobId === jobIdFor(record.sequenceId)).map((r) => r.sequenceId),
    );
    expect(ownJobs.size).toBe(Math.ceil(SIZE / 2));
    for (const [name, listed, matching] of [
      ['state received', byState, received],
      ['every state', everything, new Set(ids)],
      ['job ids by their beginning', byJob, ownJobs],
    ] as const) {
      const seen = new Set<string>();
      const twice = listed.filter((s) => (seen.has(s) ? true : (seen.add(s), false)));
      expect(twice, `${name}: listed twice`).toEqual([]);
      const missing = [...matching].filter((s) => !touched.has(s) && !seen.has(s));
      expect(missing, `${name}: matched throughout, not listed`).toEqual([]);
      expect(
        listed.filter((s) => s.startsWith('fresh')),
        `${name}: created after the listing started`,
      ).toEqual([]);
    }
    expect(await indexProblems(redis, keys, prefix)).toEqual([]);
  }, 120_000);
});
