import { readFileSync } from 'node:fs';
import { checkEventData, type EventData, type EventOf, type EventType, type TransferEvent } from '../../packages/producer/src/events.ts';
import { TERMINAL_STATES as CATALOG_TERMINAL_STATES, type TransferStateName } from '../../packages/producer/src/catalog.ts';
import { readTransferEvents } from '../../packages/producer/src/read.ts';
import { Cluster, type Redis } from 'ioredis';
import { withRedisLock } from '../lib/redis-lock.ts';
import { keySlot } from '../lib/redis-slot.ts';
import type { RedisClient } from '../redis.ts';
import type { Keys } from './keys.ts';

/**
 * A transfer's life. `submitting` is the one state where a send may have gone out without us knowing
 * the answer: whoever finds a transfer there must look before sending again (see the submit handler).
 */
export const TransferState = {
  RECEIVED: 'received',
  GATED: 'gated',
  SUBMITTING: 'submitting',
  SUBMITTED: 'submitted',
  BROADCAST: 'broadcast',
  REJECTED: 'rejected',
  BLOCKED: 'blocked',
  FAILED: 'failed',
  EXPIRED: 'expired',
} as const;
export type TransferState = (typeof TransferState)[keyof typeof TransferState];
// The names above are the catalog's, each once (a state added there and not here fails to compile).
const _sameStates: [TransferState, TransferStateName] extends [TransferStateName, TransferState] ? true : never = true;
void _sameStates;

/** From the contract's catalog (packages/producer/src/catalog.ts), as transition.lua gets it too. */
export const TERMINAL_STATES: ReadonlySet<TransferState> = new Set(CATALOG_TERMINAL_STATES);

export const NON_TERMINAL_STATES: readonly TransferState[] = Object.values(TransferState).filter((state) => !TERMINAL_STATES.has(state));

/** `-` in an expected-state list: the transfer has no record yet. */
export const NO_RECORD = '-';

/** The ledger hash as stored: all text. Field names are the ones the Lua script and handlers use. */
export interface TransferRecord {
  sequenceId: string;
  state: TransferState;
  version: number;
  jobId: string;
  walletId: string;
  coin: string;
  metadata: string;
  createdAt: number;
  updatedAt: number;
  /** sendTransaction HTTP requests made (each may have reached upstream), 401 retries included. */
  sends: number;
  /** Failed processing attempts that were retried (drives backoff and the attempt limit). */
  failures: number;
  /** The send lease: its owner (a runner's token) and its end (Redis time, ms); see transition.lua. */
  leaseOwner: string | undefined;
  leaseUntil: number;
  /** A send of the lease owner's is in flight, its outcome not yet recorded. */
  pending: boolean;
  /**
   * Sticky "may have been sent": when a send's outcome first became unknown (Redis time, ms). From then
   * on nothing but a proof of acceptance, the deadline or an operator ends the transfer; never `failed`.
   */
  unknownSince: number | undefined;
  /** When `transfer.unresolved` was published (at most once). */
  unresolvedAt: number | undefined;
  /**
   * Sticky: when the first send was answered 409 although no earlier send may have been processed
   * (SEQUENCE_ID_IN_USE). From then on nothing is sent or looked up; an operator settles it.
   */
  inUseSince: number | undefined;
  /** The job payload, kept until the transfer is submitted so a lost job can be recreated. */
  payload: string | undefined;
  /** The travel-rule decision, once made. */
  gate: GateDecision | undefined;
  /** What tracking matches on (the upstream transaction id, or destination address and amount). */
  match: LedgerMatch;
  submittedAt: number | undefined;
  txid: string | undefined;
  /** Consecutive failed polls of get-transfer while tracking. */
  pollFailures: number;
  /** Polls in a row whose list held a `send` of the wallet that matched nothing (UNMATCHED_POLLS_ALERT). */
  unmatchedPolls: number;
  /** Failed wallet-transaction lookups once the txid is known. */
  enrichFailures: number;
  broadcastAt: number | undefined;
  /** The code of the last retryable error, for the failed event and operators. */
  lastError: string | undefined;
  /** Stream ids of the transfer's events, oldest first. */
  events: string[];
}

/** The travel-rule decision recorded on a transfer (what the setting said, when, and the outcome). */
export interface GateDecision {
  setting: { outgoingTxn: number; mandatory: boolean; blockTxn: boolean };
  settingFetchedAt: string;
  checkedAt: string;
  applies: boolean;
  reference: boolean;
  outcome: 'passed' | 'blocked';
}

/** How tracking recognises the transfer in a get-transfer answer; see track-transfer/match.ts. */
export interface LedgerMatch {
  transactionId?: string | undefined;
  destinationAddress?: string | undefined;
  amount?: string | undefined;
}

/*
 * Records are stored as short fields, not JSON blobs: a hash whose every value is at most 64 bytes
 * stays in Redis's compact listpack encoding (about half the memory of a hashtable), which matters
 * with 100,000s of transfers being tracked. The long job payload is kept in a key of its own until
 * submission (Keys.transferPayload), so the hash is compact from the start; a record written while the
 * payload was a hash field is rewritten when that field goes, so it returns to the compact encoding.
 */

/** Hash fields of a gate decision (for `TransitionRequest.set`). */
export function gateFields(decision: GateDecision): Record<string, string> {
  return {
    gateOutcome: decision.outcome,
    gateSetting: JSON.stringify(decision.setting),
    gateFetchedAt: decision.settingFetchedAt,
    gateCheckedAt: decision.checkedAt,
    gateApplies: decision.applies ? '1' : '0',
    gateReference: decision.reference ? '1' : '0',
  };
}

/** Hash fields of a match (for `TransitionRequest.set`); absent parts are not written. */
export function matchFields(match: LedgerMatch): Record<string, string> {
  const fields: Record<string, string> = {};
  if (match.transactionId !== undefined) fields.matchTransactionId = match.transactionId;
  if (match.destinationAddress !== undefined) fields.matchAddress = match.destinationAddress;
  if (match.amount !== undefined) fields.matchAmount = match.amount;
  return fields;
}

export type LeaseRequest =
  /** Acquire (or renew) the send lease for `ms`, unless someone else holds a live one. */
  | { mode: 'take'; owner: string; ms: number }
  /** Only the lease's owner may make this transition (whether or not the lease has expired since). */
  | { mode: 'own'; owner: string }
  /** Only while nobody holds a live lease (reconciliation, an operator). */
  | { mode: 'free' };

export interface TransitionRequest {
  from: ReadonlyArray<TransferState | typeof NO_RECORD>;
  to: TransferState;
  set?: Record<string, string | number>;
  unset?: string[];
  /** Fields incremented by the given amount. */
  increment?: Record<string, number>;
  /** Fields set to the ledger's clock (Redis time); `once` ones only when absent. */
  stamp?: string[];
  stampOnce?: string[];
  /** Refused (reason `present`) when any of these fields exists. */
  requireAbsent?: string[];
  lease?: LeaseRequest;
  /** An operator's explicit resolution: may fail a transfer whose send may have gone out. */
  operator?: boolean;
  /** Checked against its type's schema before the script runs (checkEventData): a wrong shape throws, nothing changes. */
  event?: EventOf;
  /**
   * Records, in the same atomic step, that the transfer needs its tracking job (the tracker outbox):
   * the caller then adds it with Queue.add and calls trackerAdded; a sweep adds what a crash left.
   */
  trackerPending?: boolean;
}

export type RefusalReason = 'state' | 'terminal' | 'lease' | 'owner' | 'present' | 'unknown' | 'ended';

/** `record` is the whole record after the change, or the view the caller asked for (transitionReading). */
export type TransitionResult<R = TransferRecord> =
  | { ok: true; version: number; streamId: string; record: R }
  | {
      ok: false;
      state: TransferState | typeof NO_RECORD;
      reason: RefusalReason;
      /** The lease's end and the ledger's clock at the refusal (both Redis time). */
      leaseUntil: number;
      now: number;
      /** With reason `ended`: the transfer ended before (its record may be gone), as its tombstone says. */
      ended?: Tombstone;
    };

/** What outlives a terminal record for TOMBSTONE_RETENTION: how the transfer ended and its last version. */
export interface Tombstone {
  state: TransferState;
  version: number;
}

function parseTombstone(text: string): Tombstone {
  const at = text.lastIndexOf(':');
  return { state: text.slice(0, at) as TransferState, version: Number(text.slice(at + 1)) };
}

/** TOMBSTONE_RETENTION's default (README): ten years, the horizon of a record-keeping obligation. */
export const DEFAULT_TOMBSTONE_RETENTION_MS = 3650 * 24 * 3_600_000;

/**
 * The transition script, with the contract's terminal states put in where it says
 * `{--[[catalog: terminal states]]}` (one fact, one place: the catalog).
 */
const TRANSITION_LUA = withCatalog(readFileSync(new URL('./transition.lua', import.meta.url), 'utf8'));

function withCatalog(lua: string): string {
  const marker = '{--[[catalog: terminal states]]}';
  if (!lua.includes(marker)) throw new Error(`transition.lua lacks ${marker}`);
  return lua.replace(marker, `{ ${CATALOG_TERMINAL_STATES.map((state) => `['${state}'] = true`).join(', ')} }`);
}

/**
 * A named part of the record, read instead of the whole record: decoding all of a record's fields was
 * most of what a transition cost the worker, and each step of the hot path needs a few of them. The
 * values go through the same conversion as a whole record (toRecord), so a view never reads a field
 * differently.
 */
export interface RecordView<T> {
  /** Hash fields read (HMGET), in this order. */
  readonly fields: readonly string[];
  build(sequenceId: string, values: ReadonlyArray<string | null | undefined>): T;
}

function recordView<K extends keyof TransferRecord>(fields: readonly string[], keys: readonly K[]): RecordView<Pick<TransferRecord, K | 'sequenceId'>> {
  return {
    fields,
    build(sequenceId, values) {
      const hash: Record<string, string> = {};
      for (let i = 0; i < fields.length; i++) {
        const value = values[i];
        if (typeof value === 'string') hash[fields[i]!] = value;
      }
      const record = toRecord(sequenceId, hash);
      const view = { sequenceId } as Pick<TransferRecord, K | 'sequenceId'>;
      for (const key of keys) view[key] = record[key];
      return view;
    },
  };
}

/** Nothing but the sequenceId: the caller only needs to know that the transition happened. */
export const NO_VIEW = recordView([], []);

/** What a runner that holds the send lease needs to act on the send's outcome (see the submit handler). */
export const SEND_VIEW = recordView(['sends', 'failures', 'unknownSince', 'unresolvedAt'], ['sends', 'failures', 'unknownSince', 'unresolvedAt']);
export type SendView = Pick<TransferRecord, 'sequenceId' | 'sends' | 'failures' | 'unknownSince' | 'unresolvedAt'>;

/** What one tracking poll needs (see the track handler). */
export const TRACKING_VIEW = recordView(
  ['state', 'walletId', 'coin', 'submittedAt', 'updatedAt', 'pollFailures', 'unmatchedPolls', 'enrichFailures', 'matchTransactionId', 'matchAddress', 'matchAmount'],
  ['state', 'walletId', 'coin', 'submittedAt', 'updatedAt', 'pollFailures', 'unmatchedPolls', 'enrichFailures', 'match'],
);
export type TrackingView = Pick<
  TransferRecord,
  'sequenceId' | 'state' | 'walletId' | 'coin' | 'submittedAt' | 'updatedAt' | 'pollFailures' | 'unmatchedPolls' | 'enrichFailures' | 'match'
>;


/** A whole record, atomically: the hash and the payload kept apart from it (see transition.lua). */
const RECORD_LUA = `return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2])}`;

/**
 * KEYS[1] the events stream, KEYS[2] the run's marker; ARGV[1] MAXLEN, ARGV[2] the marker's TTL (ms),
 * ARGV[3..] the entry's fields. Returns the stream id of the run's one entry.
 */
const SYSTEM_EVENT_ONCE_LUA = `
local seen = redis.call('GET', KEYS[2])
if seen then return seen end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
redis.call('SET', KEYS[2], id, 'PX', ARGV[2])
return id`;

/** How long a system event's run is remembered: far beyond any reconnect's replay. */
const SYSTEM_EVENT_RUN_TTL_MS = 24 * 3_600_000;

type TransitionReply = Array<number | string | Array<string | null> | undefined>;

interface LedgerCommands {
  transferTransition(...args: Array<string | number>): Promise<TransitionReply>;
  transferRecord(hash: string, payload: string): Promise<[string[], string | null]>;
  systemEventOnce(stream: string, run: string, maxLen: number, ttlMs: number, ...fields: string[]): Promise<string>;
}

export interface LedgerOptions {
  /** Approximate MAXLEN of the events stream. */
  eventsMaxLen: number;
  /** How long a terminal record is kept. */
  retentionMs: number;
  /** How long the tombstone of an ended transfer outlives its record (TOMBSTONE_RETENTION; default 3650 days). */
  tombstoneRetentionMs?: number;
  /**
   * The ledger's clock. Unset (production): Redis's TIME, inside the transition script, so leases and
   * time guards never compare the clocks of different machines. Tests that explore schedules pass a
   * virtual clock to make "this call outlived its lease" deterministic.
   */
  clock?: () => number;
  /** Called once per event this process published. */
  onEvent?: (type: EventType) => void;
}

/**
 * Per-transfer state in Redis. Every change goes through one Lua script that checks the expected
 * state and the lease, applies the change, publishes the event and maintains the indexes atomically.
 * The ledger owns its keys: callers ask it questions instead of reading them.
 */
export class Ledger {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #options: LedgerOptions;

  constructor(redis: RedisClient, keys: Keys, options: LedgerOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#options = options;
    if (!('transferTransition' in redis)) {
      redis.defineCommand('transferTransition', { numberOfKeys: 8, lua: TRANSITION_LUA });
      redis.defineCommand('transferRecord', { numberOfKeys: 2, lua: RECORD_LUA, readOnly: true });
      redis.defineCommand('systemEventOnce', { numberOfKeys: 2, lua: SYSTEM_EVENT_ONCE_LUA });
    }
  }

  get eventsStream(): string {
    return this.#keys.events;
  }

  async get(sequenceId: string): Promise<TransferRecord | undefined> {
    const [flat, payload] = await (this.#redis as unknown as LedgerCommands).transferRecord(
      this.#keys.transfer(sequenceId),
      this.#keys.transferPayload(sequenceId),
    );
    const hash: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) hash[flat[i]!] = flat[i + 1]!;
    if (payload !== null) hash.payload = payload;
    return hash.state ? toRecord(sequenceId, hash) : undefined;
  }

  /** Part of a transfer's record (HMGET); undefined when there is no record. */
  async read<T>(sequenceId: string, view: RecordView<T>): Promise<T | undefined> {
    const values = await this.#redis.hmget(this.#keys.transfer(sequenceId), 'state', ...view.fields);
    return values[0] ? view.build(sequenceId, values.slice(1)) : undefined;
  }

  /**
   * How many replicas acknowledged every write this connection made so far (Redis WAIT, at most
   * `timeoutMs`): called right after the transition that records a send in flight, so a failover to a
   * replica that acknowledged it cannot forget the send. On a Cluster, WAIT goes to the master that
   * holds the ledger's slot (every ledger key shares one hash tag), over the Cluster's own connection
   * to it, which is the one that wrote.
   */
  async replicated(minReplicas: number, timeoutMs: number): Promise<number> {
    const redis = this.#redis;
    if (redis instanceof Cluster) {
      const node = await masterOf(redis, keySlot(this.#keys.active));
      return Number(await node.call('WAIT', minReplicas, timeoutMs));
    }
    return Number(await redis.call('WAIT', minReplicas, timeoutMs));
  }

  /** The ledger's clock, ms: Redis's TIME (or the test clock). Leases and time guards are judged by it. */
  async now(): Promise<number> {
    if (this.#options.clock) return this.#options.clock();
    const [seconds, micros] = await this.#redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** Moves a transfer between states; see transition.lua for the guarantees. */
  async transition(sequenceId: string, request: TransitionRequest): Promise<TransitionResult> {
    return this.#run(this.#keys.transfer(sequenceId), this.#keys.transferPayload(sequenceId), sequenceId, sequenceId, request, undefined);
  }

  /** How a transfer ended, while its tombstone lives (RETENTION + TOMBSTONE_RETENTION); undefined otherwise. */
  async ended(sequenceId: string): Promise<Tombstone | undefined> {
    const text = await this.#redis.get(this.#keys.tombstone(sequenceId));
    return text === null ? undefined : parseTombstone(text);
  }

  /** The same transition, reading back only `view` of the record after the change. */
  async transitionReading<T>(sequenceId: string, request: TransitionRequest, view: RecordView<T>): Promise<TransitionResult<T>> {
    return this.#run(this.#keys.transfer(sequenceId), this.#keys.transferPayload(sequenceId), sequenceId, sequenceId, request, view);
  }

  /**
   * Publishes `transfer.rejected` for a job whose payload had no usable sequenceId, at most once per
   * job id (a retried or stalled job finds the record and publishes nothing).
   */
  async rejectJob(
    jobId: string,
    common: { sequenceId: string; walletId: string; coin: string; metadata: string },
    data: EventData['transfer.rejected'],
  ): Promise<TransitionResult> {
    // A rejected job keeps no payload; its payload key (same hash slot) is never written.
    const key = this.#keys.jobRejection(jobId);
    return this.#run(key, `${key}:payload`, common.sequenceId, '', {
      from: [NO_RECORD],
      to: TransferState.REJECTED,
      set: { jobId, walletId: common.walletId, coin: common.coin, metadata: common.metadata },
      stamp: ['createdAt'],
      event: { type: 'transfer.rejected', data },
    }, undefined);
  }

  /**
   * An event that belongs to no transfer (`reconcile.completed`): empty sequenceId, version 0. Published
   * once per `runId`, whatever happens to the command: a plain XADD that ioredis replays after a
   * reconnect would publish it twice, so the script records the run (SET NX, a day) and the stream id
   * together with the XADD, and a replay returns the first id.
   */
  async publishSystemEvent<K extends EventType>(type: K, data: EventData[K], runId: string): Promise<string> {
    checkEventData(type, data);
    const at = new Date(Date.now()).toISOString();
    const id = await (this.#redis as unknown as LedgerCommands).systemEventOnce(
      this.#keys.events,
      this.#keys.systemEventRun(runId),
      this.#options.eventsMaxLen,
      SYSTEM_EVENT_RUN_TTL_MS,
      ...['event', type, 'sequenceId', '', 'walletId', '', 'coin', '', 'version', '0', 'at', at, 'data', JSON.stringify(data), 'metadata', ''],
    );
    return String(id);
  }

  /** A transfer's events so far, oldest first (those trimmed from the stream are absent). */
  async events(sequenceId: string): Promise<TransferEvent[]> {
    return readTransferEvents(this.#redis, this.#keys, sequenceId);
  }

  /**
   * Non-terminal transfers last changed at or before `cutoff`, oldest first, in pages. Paged by score,
   * not by offset: the caller's own transitions move entries to a later score (out of range) or out of
   * the index while it walks, which an offset would turn into skipped entries. Scores only grow, so a
   * cursor on the score (finishing every member of the boundary score) sees each due entry once.
   */
  async *staleActive(cutoff: number, page: number): AsyncGenerator<string> {
    let min = '-inf';
    for (;;) {
      const flat = await this.#redis.zrangebyscore(this.#keys.active, min, cutoff, 'WITHSCORES', 'LIMIT', 0, page);
      if (flat.length === 0) return;
      const members: string[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) members.push(flat[i]!);
      const last = flat[flat.length - 1]!;
      if (members.length === page) {
        // Entries sharing the last score may continue past this page: take them all now.
        const tied = await this.#redis.zrangebyscore(this.#keys.active, last, last);
        for (const member of tied) if (!members.includes(member)) members.push(member);
      }
      yield* members;
      if (members.length < page) return;
      min = `(${last}`;
    }
  }

  /**
   * Non-terminal transfers last changed before `cutoff`, counted by state (at most `limit` read,
   * oldest first): what the stale-transfers gauge shows.
   */
  async staleByState(cutoff: number, limit: number): Promise<Record<string, number>> {
    const members = await this.#redis.zrangebyscore(this.#keys.active, '-inf', `(${cutoff}`, 'LIMIT', 0, limit);
    const counts: Record<string, number> = {};
    if (members.length === 0) return counts;
    const states = await Promise.all(members.map((member) => this.#redis.hget(this.#keys.transfer(member), 'state')));
    for (const state of states) if (state && !TERMINAL_STATES.has(state as TransferState)) counts[state] = (counts[state] ?? 0) + 1;
    return counts;
  }

  /** How many transfers are not terminal, and the last change of the least recently changed one (ms, Redis time). */
  async activeSummary(): Promise<{ count: number; oldestChangeAt: number | undefined }> {
    const [count, oldest] = await Promise.all([this.#redis.zcard(this.#keys.active), this.#redis.zrange(this.#keys.active, '0', '0', 'WITHSCORES')]);
    return { count, oldestChangeAt: oldest[1] === undefined ? undefined : Number(oldest[1]) };
  }

  /** The transfer's tracking job was added (Queue.add): its tracker outbox entry goes. */
  async trackerAdded(sequenceId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.trackerOutbox, sequenceId);
  }

  /** Transfers whose tracker outbox entry was recorded at or before `cutoff` (ledger clock), oldest first. */
  async pendingTrackers(cutoff: number, limit: number): Promise<string[]> {
    return this.#redis.zrangebyscore(this.#keys.trackerOutbox, '-inf', cutoff, 'LIMIT', 0, limit);
  }

  /** Drops an active-index entry whose record expired or ended without the index following. */
  async dropActive(sequenceId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.active, sequenceId);
  }

  /** Broadcast transfers to re-verify: broadcast at or before `cutoff`, oldest first; older than `windowMs` are dropped. */
  async dueBroadcasts(cutoff: number, windowMs: number, limit: number): Promise<string[]> {
    await this.#redis.zremrangebyscore(this.#keys.broadcast, '-inf', cutoff - windowMs);
    return this.#redis.zrangebyscore(this.#keys.broadcast, '-inf', cutoff, 'LIMIT', 0, limit);
  }

  async verified(sequenceId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.broadcast, sequenceId);
  }

  /** Forgets terminal-index entries older than `before` (their records expire by TTL). Returns how many. */
  async forgetTerminal(before: number): Promise<number> {
    return this.#redis.zremrangebyscore(this.#keys.terminal, '-inf', before);
  }

  /**
   * Runs `task` under the cluster-wide lock `name` (SET NX PX with an owner token, renewed while it
   * runs, released only by its owner). Returns undefined without running it when another holds it.
   */
  async withLock<T>(name: 'reconcile', ttlMs: number, renewMs: number, task: () => Promise<T>): Promise<T | undefined> {
    return withRedisLock(this.#redis, this.#keys.reconcileLock, ttlMs, renewMs, task);
  }

  async #run(key: string, payloadKey: string, eventSequenceId: string, indexMember: string, request: TransitionRequest, view: undefined): Promise<TransitionResult>;
  async #run<T>(key: string, payloadKey: string, eventSequenceId: string, indexMember: string, request: TransitionRequest, view: RecordView<T>): Promise<TransitionResult<T>>;
  async #run<T>(
    key: string,
    payloadKey: string,
    eventSequenceId: string,
    indexMember: string,
    request: TransitionRequest,
    view: RecordView<T> | undefined,
  ): Promise<TransitionResult<T | TransferRecord>> {
    // One safeParse per event: a publisher that builds the wrong shape is a bug, caught here (in tests)
    // before anything changes, instead of by a consumer of the stream.
    if (request.event) checkEventData(request.event.type, request.event.data);
    const clock = this.#options.clock?.();
    // The payload goes to its own key (transition.lua KEYS[6]); every other field into the hash.
    let payload = '';
    const pairs: string[] = [];
    for (const [field, value] of Object.entries(request.set ?? {})) {
      if (field === 'payload') payload = String(value);
      else pairs.push(field, String(value));
    }
    const lease = request.lease;
    const commands = this.#redis as unknown as LedgerCommands;
    // A rejected job without a usable sequenceId (no index member) leaves no tombstone: a key of its own slot, never written.
    const tombstoneKey = indexMember === '' ? `${key}:ended` : this.#keys.tombstone(indexMember);
    const reply = await commands.transferTransition(
      key,
      this.#keys.events,
      this.#keys.active,
      this.#keys.terminal,
      this.#keys.broadcast,
      payloadKey,
      tombstoneKey,
      this.#keys.trackerOutbox,
      eventSequenceId,
      request.from.join(','),
      request.to,
      TERMINAL_STATES.has(request.to) ? '1' : '0',
      clock === undefined ? '' : String(clock),
      new Date(clock ?? Date.now()).toISOString(),
      request.event?.type ?? '',
      request.event ? JSON.stringify(request.event.data) : '',
      this.#options.eventsMaxLen,
      this.#options.retentionMs,
      indexMember,
      lease?.mode ?? '',
      lease && lease.mode !== 'free' ? lease.owner : '',
      lease?.mode === 'take' ? lease.ms : 0,
      request.operator ? '1' : '0',
      (request.unset ?? []).join(','),
      Object.entries(request.increment ?? {}).filter(([, by]) => by !== 0).map(([field, by]) => `${field}=${by}`).join(','),
      (request.requireAbsent ?? []).join(','),
      [...(request.stamp ?? []), ...(request.stampOnce ?? []).map((field) => `?${field}`)].join(','),
      view ? view.fields.join(',') : '*',
      payload,
      request.trackerPending ? '1' : '',
      this.#options.retentionMs + (this.#options.tombstoneRetentionMs ?? DEFAULT_TOMBSTONE_RETENTION_MS),
      ...pairs,
    );
    if (reply[0] === 1) {
      if (request.event) this.#options.onEvent?.(request.event.type);
      const sequenceId = eventSequenceId || indexMember;
      const flat = (reply[3] ?? []) as Array<string | null>;
      const version = Number(reply[1]);
      const streamId = String(reply[2] ?? '');
      if (view) return { ok: true, version, streamId, record: view.build(sequenceId, flat) };
      const fields: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      return { ok: true, version, streamId, record: toRecord(sequenceId, fields) };
    }
    return {
      ok: false,
      state: String(reply[1]) as TransferState | typeof NO_RECORD,
      reason: String(reply[2]) as RefusalReason,
      leaseUntil: Number(reply[3] ?? 0),
      now: Number(reply[4] ?? 0),
      ...(reply[5] ? { ended: parseTombstone(String(reply[5])) } : {}),
    };
  }
}

function toRecord(sequenceId: string, hash: Record<string, string>): TransferRecord {
  const num = (value: string | undefined) => (value === undefined || value === '' ? 0 : Number(value));
  const opt = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);
  return {
    sequenceId,
    state: hash.state as TransferState,
    version: num(hash.version),
    jobId: hash.jobId ?? '',
    walletId: hash.walletId ?? '',
    coin: hash.coin ?? '',
    metadata: hash.metadata ?? '',
    createdAt: num(hash.createdAt),
    updatedAt: num(hash.updatedAt),
    sends: num(hash.sends),
    failures: num(hash.failures),
    leaseOwner: opt(hash.leaseOwner),
    leaseUntil: num(hash.leaseUntil),
    pending: hash.pending === '1',
    unknownSince: opt(hash.unknownSince) === undefined ? undefined : num(hash.unknownSince),
    unresolvedAt: opt(hash.unresolvedAt) === undefined ? undefined : num(hash.unresolvedAt),
    inUseSince: opt(hash.inUseSince) === undefined ? undefined : num(hash.inUseSince),
    payload: opt(hash.payload),
    gate: hash.gateOutcome
      ? {
          setting: JSON.parse(hash.gateSetting ?? '{}') as GateDecision['setting'],
          settingFetchedAt: hash.gateFetchedAt ?? '',
          checkedAt: hash.gateCheckedAt ?? '',
          applies: hash.gateApplies === '1',
          reference: hash.gateReference === '1',
          outcome: hash.gateOutcome as GateDecision['outcome'],
        }
      : undefined,
    match: { transactionId: opt(hash.matchTransactionId), destinationAddress: opt(hash.matchAddress), amount: opt(hash.matchAmount) },
    submittedAt: opt(hash.submittedAt) === undefined ? undefined : num(hash.submittedAt),
    txid: opt(hash.txid),
    pollFailures: num(hash.pollFailures),
    unmatchedPolls: num(hash.unmatchedPolls),
    enrichFailures: num(hash.enrichFailures),
    broadcastAt: opt(hash.broadcastAt) === undefined ? undefined : num(hash.broadcastAt),
    lastError: opt(hash.lastError),
    events: hash.events ? hash.events.split(',') : [],
  };
}

/** The Cluster's connection to the master serving `slot` (CLUSTER SLOTS, matched by port and host). */
async function masterOf(cluster: Cluster, slot: number): Promise<Redis> {
  const ranges = (await cluster.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]], ...unknown[]]>;
  const range = ranges.find(([start, end]) => slot >= start && slot <= end);
  if (!range) throw new Error(`no Redis Cluster master serves slot ${slot}`);
  const [host, port] = range[2];
  const masters = cluster.nodes('master');
  const node = masters.find((m) => m.options.port === port && m.options.host === host) ?? masters.find((m) => m.options.port === port);
  if (!node) throw new Error(`no connection to the Redis Cluster master of slot ${slot}`);
  return node;
}
