import { ATTENTION_REASONS, type AttentionReason } from '../../packages/producer/src/keys.ts';
import { JOB_ID_PREFIX, sequenceIdOfJobId } from '../../packages/producer/src/job-id.ts';
import { canonicalTxid } from '../lib/txid.ts';
import type { RedisClient } from '../redis.ts';
import type { Keys } from './keys.ts';
import { recordJobId, toRecord, type TransferRecord } from './record.ts';
import { TransferState } from './states.ts';

/**
 * The console's questions, answered from the listing indexes that transition.lua keeps with every
 * record (docs/architecture.md "Listing transfers"): no scan of the records, no key name outside the
 * ledger. Reads only; a page of transfers costs a few sorted-set reads and one HGETALL per item.
 */

export { ATTENTION_REASONS, type AttentionReason };

/** How long an expiry with SEND_OUTCOME_UNKNOWN still needs attention (docs/contract.md section 10). */
export const EXPIRED_UNKNOWN_WINDOW_MS = 7 * 24 * 3_600_000;

/** CONSOLE_APPROVAL_WAIT's default: a transfer waiting for the provider's approval longer needs attention. */
export const APPROVAL_WAIT_MS = 3_600_000;

/** The most a page holds (the API's `limit` is at most 200), and the most index entries one page reads. */
export const MAX_PAGE = 1_000;
const MAX_SCANNED = 5_000;

export interface QueryOptions {
  /** UNRESOLVED_AFTER: a send whose outcome is unknown needs attention once it has been so this long. */
  unresolvedAfterMs: number;
  /** CONSOLE_APPROVAL_WAIT: waiting for the provider's approval needs attention once it has been so this long (default APPROVAL_WAIT_MS). */
  approvalWaitMs?: number;
  /** Default EXPIRED_UNKNOWN_WINDOW_MS. */
  expiredUnknownWindowMs?: number;
  /** The ledger's clock (a test's virtual one); unset: Redis TIME, as the transitions stamp. */
  clock?: () => number;
}

export interface ListQuery {
  state?: TransferState;
  attention?: AttentionReason;
  /** The beginning (or the whole) of a txid (any spelling of a hex one), a job id or a sequenceId. */
  q?: string;
  walletId?: string;
  coin?: string;
  /**
   * Bounds (ms, inclusive) of the last change; with `attention`, of since when it needs attention.
   * The listing ends where it starts: nothing changed after its first page is in it.
   */
  since?: number;
  until?: number;
  limit: number;
  /** `next` of the previous page of the same listing (same filters). */
  cursor?: string;
}

/** A transfer as listed: its record, without the payload (which a listing never needs). */
export type ListedTransfer = Omit<TransferRecord, 'payload'>;

export interface ListPage {
  items: ListedTransfer[];
  /** The next page's cursor; null at the end. A page may hold fewer than `limit` items before the end. */
  next: string | null;
}

export interface AttentionItem {
  sequenceId: string;
  reason: AttentionReason;
  /** Since when it needs attention (Redis time, ms). */
  since: number;
}

export interface Counts {
  states: Record<TransferState, number>;
  attention: Record<AttentionReason, number>;
}

/** An index entry: its score and member; entries are ordered by score, then member (as Redis orders them). */
interface Entry {
  score: number;
  id: string;
}

/** A listing's fixed window (lower, upper: null = unbounded) and where it stopped. */
interface ScoreCursor {
  kind: 'score';
  lower: number | null;
  upper: number;
  after: Entry;
}

/**
 * A search's position: the index it walks (txids, then job ids, then sequenceIds, each by prefix) and
 * the last member read there ('' = none yet).
 */
interface SearchCursor {
  kind: 'search';
  phase: SearchPhase;
  after: string;
}

type SearchPhase = 'txid' | 'job' | 'sequenceId';
const SEARCH_PHASES: readonly SearchPhase[] = ['txid', 'job', 'sequenceId'];

type Cursor = ScoreCursor | SearchCursor;

/**
 * Above any byte of a member (UTF-8 never holds 0xff): the end of a prefix range in ZRANGEBYLEX, which
 * compares bytes.
 */
const PREFIX_END = Buffer.from([0xff]);

/**
 * The search index's member kinds (transition.lua, KEYS[16]): `t:<txid>\n<sequenceId>`, `j:<job
 * id>\n<sequenceId>`. A job id made by jobIdFor (`transfer-<sequenceId>`) has no entry: the index of
 * every sequenceId stands for it (impliedJobMember), which saves an entry per transfer.
 */
const SEARCH_KIND = { txid: 't:', job: 'j:' } as const;

/** The search member a jobIdFor job id would have: where the job walk puts that transfer. */
const impliedJobMember = (sequenceId: string) => `${SEARCH_KIND.job}${JOB_ID_PREFIX}${sequenceId}\n${sequenceId}`;

/** Byte order, as ZRANGEBYLEX compares members. */
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

export class InvalidCursorError extends Error {
  readonly code = 'INVALID_CURSOR';
  constructor() {
    super('the cursor is not one this listing gave');
  }
}

function decodeCursor(text: string): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Cursor;
    if (cursor.kind === 'score' && typeof cursor.after?.score === 'number' && typeof cursor.after.id === 'string') return cursor;
    if (cursor.kind === 'search' && typeof cursor.after === 'string' && SEARCH_PHASES.includes(cursor.phase)) return cursor;
  } catch {
    // Reported below, as any cursor of another shape.
  }
  throw new InvalidCursorError();
}

const before = (a: Entry, b: Entry) => a.score > b.score || (a.score === b.score && a.id > b.id);

export class TransferQueries {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #options: QueryOptions;

  constructor(redis: RedisClient, keys: Keys, options: QueryOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#options = options;
  }

  /**
   * Transfers, most recently changed first (with `attention`: most recently needing it first), in
   * pages. Without `q` the listing walks the index of the state (or of the attention reason; every
   * state's when neither is given) by (score, sequenceId), downwards, within a window fixed by its
   * first page: `upper` is at most one ms before that page was read (and, for a reason with a time
   * bound, the bound as of then). The cursor is the (score, sequenceId) of the last entry read.
   *
   * At most once: each page reads only entries strictly below the cursor, and the cursor only goes
   * down. An entry's score never goes down (a change re-stamps it with the ledger's clock; an
   * attention entry keeps its since-when while its reason holds, and states and reasons are never
   * re-entered), so an entry once read is never again below the cursor.
   * None skipped: a transfer that matched throughout kept its entry and score (any change after the
   * first page moves its score to that time or later, above `upper`, or its entry to another index), so
   * it lies between two consecutive cursors and the page between them read every such entry.
   * The one assumption: the ledger's clock (Redis TIME) does not step back; one that does may move a
   * changed transfer below the cursor, to be listed twice.
   */
  async listTransfers(query: ListQuery): Promise<ListPage> {
    const limit = Math.max(1, Math.min(MAX_PAGE, Math.floor(query.limit)));
    const cursor = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
    if (query.q !== undefined && query.q !== '') {
      if (cursor && cursor.kind !== 'search') throw new InvalidCursorError();
      return this.#search(query, query.q, limit, cursor);
    }
    if (cursor && cursor.kind !== 'score') throw new InvalidCursorError();
    let lower: number | null;
    let upper: number;
    if (cursor) {
      ({ lower, upper } = cursor);
    } else {
      const now = await this.#now();
      const bound = query.attention ? this.#window(query.attention, now) : { lower: null, upper: Infinity };
      lower = Math.max(query.since ?? -Infinity, bound.lower ?? -Infinity);
      if (lower === -Infinity) lower = null;
      upper = Math.min(query.until ?? Infinity, now - 1, bound.upper);
    }
    const sources = query.attention
      ? [this.#keys.attention(query.attention)]
      : query.state
        ? [this.#keys.byState(query.state)]
        : Object.values(TransferState).map((state) => this.#keys.byState(state));

    // Every entry of the index is an item unless a filter the index does not answer is given: then a
    // batch reads twice what the page still needs, else only that (one HGETALL per entry read).
    const filtered =
      query.walletId !== undefined || query.coin !== undefined || (query.attention !== undefined && query.state !== undefined);
    const items: ListedTransfer[] = [];
    let after = cursor?.after;
    let scanned = 0;
    for (;;) {
      const batch = Math.min(MAX_PAGE, (limit - items.length) * (filtered ? 2 : 1));
      const { entries, exhausted } = await this.#merged(sources, lower, upper, after, batch);
      const records = await this.#records(entries.map((entry) => entry.id));
      for (let i = 0; i < entries.length; i++) {
        after = entries[i]!;
        scanned++;
        const record = records[i];
        if (record && this.#matches(record, query)) items.push(record);
        if (items.length === limit) {
          const more = i < entries.length - 1 || !exhausted;
          return { items, next: more ? encodeCursor({ kind: 'score', lower, upper, after }) : null };
        }
      }
      if (exhausted) return { items, next: null };
      if (scanned >= MAX_SCANNED) return { items, next: encodeCursor({ kind: 'score', lower, upper, after: after! }) };
    }
  }

  /** Transfers that need attention, oldest first, with reason and since when; time bounds applied. */
  async attention(limit = 200): Promise<AttentionItem[]> {
    const now = await this.#now();
    const lists = await Promise.all(
      ATTENTION_REASONS.map(async (reason) => {
        const { lower, upper } = this.#window(reason, now);
        const flat = await this.#redis.zrangebyscore(
          this.#keys.attention(reason),
          bound(lower, '-inf'),
          bound(upper, '+inf'),
          'WITHSCORES',
          'LIMIT',
          0,
          limit,
        );
        const items: AttentionItem[] = [];
        for (let i = 0; i + 1 < flat.length; i += 2) items.push({ sequenceId: flat[i]!, reason, since: Number(flat[i + 1]) });
        return items;
      }),
    );
    return lists
      .flat()
      .sort((a, b) => a.since - b.since || (a.sequenceId < b.sequenceId ? -1 : 1))
      .slice(0, limit);
  }

  /** How many transfers each state holds, and how many need attention for each reason (time bounds applied). */
  async counts(): Promise<Counts> {
    const now = await this.#now();
    const states = Object.values(TransferState);
    const [stateCounts, reasonCounts] = await Promise.all([
      Promise.all(states.map((state) => this.#redis.zcard(this.#keys.byState(state)))),
      Promise.all(
        ATTENTION_REASONS.map((reason) => {
          const { lower, upper } = this.#window(reason, now);
          return this.#redis.zcount(this.#keys.attention(reason), bound(lower, '-inf'), bound(upper, '+inf'));
        }),
      ),
    ]);
    return {
      states: Object.fromEntries(states.map((state, i) => [state, stateCounts[i]!])) as Record<TransferState, number>,
      attention: Object.fromEntries(ATTENTION_REASONS.map((reason, i) => [reason, reasonCounts[i]!])) as Record<AttentionReason, number>,
    };
  }

  /**
   * The sequenceId whose transfer has this txid (any spelling of a hex txid); undefined when none. From
   * the search index, else from the txid's claim (a record last changed before the index existed).
   */
  async byTxid(txid: string): Promise<string | undefined> {
    const canonical = canonicalTxid(txid);
    return (
      (await this.#exact(`${SEARCH_KIND.txid}${canonical}\n`)) ??
      (await this.#redis.hget(this.#keys.claims, this.#keys.claimField('txid', canonical))) ??
      undefined
    );
  }

  /** The sequenceId of the transfer this job owns now; undefined when none. */
  async byJobId(jobId: string): Promise<string | undefined> {
    const found = await this.#exact(`${SEARCH_KIND.job}${jobId}\n`);
    if (found !== undefined) return found;
    // A jobIdFor job id has no entry of its own: the transfer it names, if that job owns it.
    const sequenceId = sequenceIdOfJobId(jobId);
    if (sequenceId === undefined) return undefined;
    const [stored, submittedAt] = await this.#redis.hmget(this.#keys.transfer(sequenceId), 'jobId', 'submittedAt');
    return recordJobId(sequenceId, stored, submittedAt) === jobId ? sequenceId : undefined;
  }

  /** The sequenceId of the first search entry `<kind><value>\n<sequenceId>` (one ZRANGEBYLEX). */
  async #exact(head: string): Promise<string | undefined> {
    const [member] = await this.#redis.zrangebylex(
      this.#keys.search,
      `[${head}`,
      Buffer.concat([Buffer.from(`(${head}`), PREFIX_END]),
      'LIMIT',
      0,
      1,
    );
    return member === undefined ? undefined : member.slice(head.length);
  }

  /**
   * `q` as the beginning (or the whole) of a txid, then of a job id, then of a sequenceId: three walks
   * in member order, each by ZRANGEBYLEX over its index, a cursor on the last member read. Members
   * never change (a new txid or job id is a new member), so each walk lists a transfer at most once
   * and skips none that matched throughout; a later walk leaves out what an earlier one matched (its
   * txid, or job id, begins with `q`), so a transfer is listed once. A page reads at most MAX_SCANNED
   * index entries.
   */
  async #search(query: ListQuery, q: string, limit: number, cursor: SearchCursor | undefined): Promise<ListPage> {
    const now = cursor ? undefined : await this.#now();
    const items: ListedTransfer[] = [];
    const txidPrefix = canonicalTxid(q);
    if (!cursor) items.push(...(await this.#unindexed(query, q, txidPrefix, now)).slice(0, limit));
    const listedBefore = (record: ListedTransfer, phase: SearchPhase) =>
      (phase !== 'txid' && record.txid !== undefined && canonicalTxid(record.txid).startsWith(txidPrefix)) ||
      (phase === 'sequenceId' && record.jobId.startsWith(q));
    // As a listing's batches: twice what the page still needs only when a filter may leave entries out.
    const filtered = [query.state, query.attention, query.walletId, query.coin, query.since, query.until].some(
      (value) => value !== undefined,
    );
    let scanned = 0;
    for (let p = SEARCH_PHASES.indexOf(cursor?.phase ?? 'txid'); p < SEARCH_PHASES.length; p++) {
      const phase = SEARCH_PHASES[p]!;
      let after = cursor?.phase === phase && cursor.after !== '' ? cursor.after : undefined;
      for (;;) {
        const batch = Math.min(MAX_PAGE, Math.max(1, limit - items.length) * (filtered ? 2 : 1));
        const { members, exhausted } = await this.#walk(phase, phase === 'txid' ? txidPrefix : q, after, batch);
        const ids = phase === 'sequenceId' ? members : members.map((member) => member.slice(member.lastIndexOf('\n') + 1));
        const records = await this.#records(ids);
        for (let i = 0; i < members.length; i++) {
          if (items.length === limit) return { items, next: encodeCursor({ kind: 'search', phase, after: after ?? '' }) };
          after = members[i]!;
          scanned++;
          const record = records[i];
          // A jobIdFor job id's place stands for the transfer only while that job owns it.
          const owned = phase !== 'job' || record?.jobId === members[i]!.slice(SEARCH_KIND.job.length, members[i]!.lastIndexOf('\n'));
          if (record && owned && !listedBefore(record, phase) && (await this.#searchMatches(record, query, now))) items.push(record);
        }
        if (exhausted) break;
        if (items.length === limit || scanned >= MAX_SCANNED)
          return { items, next: encodeCursor({ kind: 'search', phase, after: after! }) };
      }
    }
    return { items, next: null };
  }

  /**
   * The next members (about `n`) of a search walk after `after` whose txid, job id or sequenceId begins with
   * `prefix`, in member order. The job walk merges the search index's job entries with the places of
   * jobIdFor job ids (impliedJobMember, read from the index of every sequenceId: one place per
   * sequenceId, in the same order); `exhausted`: nothing is left after the last one.
   */
  async #walk(
    phase: SearchPhase,
    prefix: string,
    after: string | undefined,
    n: number,
  ): Promise<{ members: string[]; exhausted: boolean }> {
    if (phase === 'sequenceId') {
      const members = await this.#range(this.#keys.ids, prefix, after === undefined ? undefined : `(${after}`, n);
      return { members, exhausted: members.length < n };
    }
    const start = `${SEARCH_KIND[phase]}${prefix}`;
    const explicit = await this.#range(this.#keys.search, start, after === undefined ? undefined : `(${after}`, n);
    if (phase === 'txid') return { members: explicit, exhausted: explicit.length < n };
    const implied = (await this.#impliedJobSequenceIds(prefix, after, n)).map(impliedJobMember);
    // Members at or before the lower of the full lists' last ones are all known.
    const lasts = [explicit, implied].filter((list) => list.length === n).map((list) => list[n - 1]!);
    const frontier = lasts.sort(byteOrder)[0];
    const members = [...new Set([...explicit, ...implied])]
      .sort(byteOrder)
      .filter((member) => frontier === undefined || byteOrder(member, frontier) <= 0);
    return { members, exhausted: frontier === undefined };
  }

  /**
   * The sequenceIds whose jobIdFor job id begins with `prefix` and whose place (impliedJobMember)
   * comes after `after`, the first `n` in order: none unless `prefix` and JOB_ID_PREFIX agree as far as
   * the shorter goes.
   */
  async #impliedJobSequenceIds(prefix: string, after: string | undefined, n: number): Promise<string[]> {
    let start: string;
    if (prefix.startsWith(JOB_ID_PREFIX)) start = prefix.slice(JOB_ID_PREFIX.length);
    else if (JOB_ID_PREFIX.startsWith(prefix)) start = '';
    else return [];
    let from: string | undefined;
    if (after !== undefined) {
      const jobId = after.slice(SEARCH_KIND.job.length, after.lastIndexOf('\n'));
      if (jobId.startsWith(JOB_ID_PREFIX)) {
        // Places follow sequenceIds' order; of those from this one on, only its own can lie at or before `after`.
        const sequenceId = jobId.slice(JOB_ID_PREFIX.length);
        from = `${byteOrder(impliedJobMember(sequenceId), after) <= 0 ? '(' : '['}${sequenceId}`;
      } else if (byteOrder(jobId, JOB_ID_PREFIX) > 0) {
        return []; // every place lies before `after`
      }
    }
    return this.#range(this.#keys.ids, start, from, n);
  }

  /**
   * At most `n` members of the lexicographic index `key` that begin with `start`, in member order:
   * from `from` (a ZRANGEBYLEX bound, `(` or `[` and a member) when given, else from the first.
   */
  #range(key: string, start: string, from: string | undefined, n: number): Promise<string[]> {
    return this.#redis.zrangebylex(
      key,
      from === undefined ? `[${start}` : from,
      Buffer.concat([Buffer.from(`(${start}`), PREFIX_END]),
      'LIMIT',
      0,
      n,
    );
  }

  /**
   * The transfer whose txid, or job id, is exactly `q` but has no entry in the search index (a record
   * last changed before the index existed): listed first, on the first page, found by the txid's claim
   * or, for a job id made by jobIdFor, by the sequenceId it names. Later walks leave it out (its txid,
   * or job id, begins with `q`).
   */
  async #unindexed(query: ListQuery, q: string, txid: string, now: number | undefined): Promise<ListedTransfer[]> {
    const candidates = [
      (await this.#redis.hget(this.#keys.claims, this.#keys.claimField('txid', txid))) ?? undefined,
      sequenceIdOfJobId(q),
    ];
    const ids: string[] = [];
    for (const id of candidates) if (id !== undefined && !ids.includes(id)) ids.push(id);
    const items: ListedTransfer[] = [];
    for (const record of await this.#records(ids)) {
      if (!record) continue;
      const byTxid = record.txid !== undefined && canonicalTxid(record.txid) === txid;
      const byJob = record.jobId === q;
      const indexed =
        (byTxid && (await this.#redis.zscore(this.#keys.search, `${SEARCH_KIND.txid}${txid}\n${record.sequenceId}`)) !== null) ||
        (byJob && (await this.#redis.zscore(this.#keys.search, `${SEARCH_KIND.job}${q}\n${record.sequenceId}`)) !== null) ||
        (byJob && q === JOB_ID_PREFIX + record.sequenceId && (await this.#redis.zscore(this.#keys.ids, record.sequenceId)) !== null);
      if ((byTxid || byJob) && !indexed && (await this.#searchMatches(record, query, now))) items.push(record);
    }
    return items;
  }

  /** A searched record against the other filters; `now` (the first page's time) bounds the last change. */
  async #searchMatches(record: ListedTransfer, query: ListQuery, now: number | undefined): Promise<boolean> {
    if (query.state && record.state !== query.state) return false;
    if (!this.#matches(record, query)) return false;
    if (query.attention) {
      const score = await this.#redis.zscore(this.#keys.attention(query.attention), record.sequenceId);
      if (score === null) return false;
      const { lower, upper } = this.#window(query.attention, now ?? (await this.#now()));
      const since = Number(score);
      return since >= Math.max(lower ?? -Infinity, query.since ?? -Infinity) && since <= Math.min(upper, query.until ?? Infinity);
    }
    return record.updatedAt >= (query.since ?? -Infinity) && record.updatedAt <= (query.until ?? Infinity);
  }

  /** The filters an index does not answer (with `attention`: the state too). */
  #matches(record: ListedTransfer, query: ListQuery): boolean {
    if (query.attention && query.state && record.state !== query.state) return false;
    if (query.walletId !== undefined && record.walletId !== query.walletId) return false;
    if (query.coin !== undefined && record.coin !== query.coin) return false;
    return true;
  }

  /**
   * The next `n` entries below `after` of the union of `sources`, within [lower, upper], downwards.
   * `exhausted`: none is left below the last one returned.
   */
  async #merged(
    sources: string[],
    lower: number | null,
    upper: number,
    after: Entry | undefined,
    n: number,
  ): Promise<{ entries: Entry[]; exhausted: boolean }> {
    const lists = await Promise.all(sources.map((key) => this.#below(key, lower, upper, after, n)));
    // Entries at or above the highest last entry of a full list are all known; below it, a full list
    // may hold more that it did not return.
    let frontier: Entry | undefined;
    for (const list of lists) {
      if (list.length === n) {
        const last = list[list.length - 1]!;
        if (!frontier || before(last, frontier)) frontier = last;
      }
    }
    const merged = lists
      .flat()
      .filter((entry) => !frontier || !before(frontier, entry))
      .sort((a, b) => (before(a, b) ? -1 : 1))
      .slice(0, n);
    return { entries: merged, exhausted: frontier === undefined && merged.length === lists.flat().length };
  }

  /** Up to `n` entries of one index below `after`, within [lower, upper], downwards. */
  async #below(key: string, lower: number | null, upper: number, after: Entry | undefined, n: number): Promise<Entry[]> {
    const entries: Entry[] = [];
    let max = bound(upper, '+inf');
    if (after) {
      // Entries sharing the cursor's score come in member order; those below its member are next.
      const tied = await this.#redis.zrangebyscore(key, after.score, after.score);
      for (const id of tied.filter((member) => member < after.id).reverse()) entries.push({ score: after.score, id });
      // The cursor lies within the window, so below it is within it too.
      max = `(${after.score}`;
    }
    if (entries.length < n) {
      const flat = await this.#redis.zrevrangebyscore(key, max, bound(lower, '-inf'), 'WITHSCORES', 'LIMIT', 0, n - entries.length);
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ score: Number(flat[i + 1]), id: flat[i]! });
    }
    return entries.slice(0, n);
  }

  /** The records of `ids` (without payload), in order; undefined for one retention removed meanwhile. */
  async #records(ids: readonly string[]): Promise<Array<ListedTransfer | undefined>> {
    if (ids.length === 0) return [];
    const pipeline = this.#redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.#keys.transfer(id));
    const replies = (await pipeline.exec()) ?? [];
    return ids.map((id, i) => {
      const [error, hash] = replies[i] ?? [null, {}];
      if (error) throw error;
      const fields = hash as Record<string, string>;
      if (!fields.state) return undefined;
      const { payload: _payload, ...record } = toRecord(id, fields);
      return record;
    });
  }

  /** The score window of an attention reason now: its time bound (docs/contract.md section 10). */
  #window(reason: AttentionReason, now: number): { lower: number | null; upper: number } {
    switch (reason) {
      case 'send-unknown':
        return { lower: null, upper: now - this.#options.unresolvedAfterMs };
      case 'approval':
        return { lower: null, upper: now - (this.#options.approvalWaitMs ?? APPROVAL_WAIT_MS) };
      case 'expired-unknown':
        return { lower: now - (this.#options.expiredUnknownWindowMs ?? EXPIRED_UNKNOWN_WINDOW_MS), upper: Infinity };
      case 'unresolved':
      case 'halted':
        return { lower: null, upper: Infinity };
    }
  }

  async #now(): Promise<number> {
    if (this.#options.clock) return this.#options.clock();
    const [seconds, micros] = await this.#redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }
}

function bound(value: number | null, infinite: string): string {
  return value === null || !Number.isFinite(value) ? infinite : String(value);
}
