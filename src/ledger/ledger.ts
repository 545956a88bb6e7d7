import { checkEventData, type EventData, type EventType, type TransferEvent } from '../../packages/producer/src/events.ts';
import { readTransferEvents } from '../../packages/producer/src/read.ts';
import { withRedisLock } from '../lib/redis-lock.ts';
import { connectionSession, replicaAcknowledgement, type ReplicaAcknowledgement } from '../../packages/producer/src/replicas.ts';
import type { RedisClient } from '../redis.ts';
import type { Keys } from './keys.ts';
import { CALLS_FIELD, NO_VIEW, parseTombstone, toRecord, type RecordView, type Tombstone, type TransferRecord } from './record.ts';
import { op, SEND_ACCEPTED, SEND_ACCEPTED_AT_BEFORE, type Attempt } from './operations.ts';
import { cancelOutcome, type CancelResult } from '../../packages/producer/src/transition.ts';
import { NotReplicatedError, VersionMismatchError } from '../../packages/producer/src/errors.ts';
import {
  settingDifferences,
  settingsFields,
  settingsRecorded,
  workerSettings,
  type SettingDifference,
  type WorkerSettings,
} from '../../packages/producer/src/worker-settings.ts';
import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import { LedgerEpoch, type EpochOptions } from './epoch.ts';
import { READY_PROBE_TTL_MS } from '../timing.ts';
import {
  encodeRequest,
  ISO_TIME_LUA,
  TRANSITION_LUA,
  type RefusalReason,
  type RequestContext,
  type TransitionRequest,
  type TransitionResult,
} from './request.ts';
import { NO_RECORD, NON_TERMINAL_STATES, TERMINAL_STATES, TransferState } from './states.ts';
import { ATTENTION_REASONS } from '../../packages/producer/src/keys.ts';

// The ledger's vocabulary, for callers that import it from one place.
export * from './states.ts';
export * from './record.ts';
export type { LeaseRequest, RefusalReason, TransitionRequest, TransitionResult } from './request.ts';
export type { EpochState, LedgerInit } from './epoch.ts';
export type { ReplicaAcknowledgement } from '../../packages/producer/src/replicas.ts';

/** How long a found get-transfer record waits for its wallet-transaction lookup, at most. */
const FOUND_TRANSFER_TTL_MS = 3_600_000;

/** TOMBSTONE_RETENTION's default (docs/configuration.md): ten years, the horizon of a record-keeping obligation. */
export const DEFAULT_TOMBSTONE_RETENTION_MS = 3650 * 24 * 3_600_000;

/** A whole record, atomically: the hash and the payload kept apart from it (see transition.lua). */
const RECORD_LUA = `return {redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2])}`;

/**
 * KEYS[1] the events stream, KEYS[2] the run's marker, KEYS[3] the ledger's epoch; ARGV[1] MAXLEN,
 * ARGV[2] the marker's TTL (ms), ARGV[3] the clock (ms, '' = Redis TIME), ARGV[4..] the entry's fields
 * but `at` and `epoch`, which the script adds (Redis's clock, the ledger's epoch). Returns the stream
 * id of the run's one entry.
 */
const SYSTEM_EVENT_ONCE_LUA = `${ISO_TIME_LUA}
local seen = redis.call('GET', KEYS[2])
if seen then return seen end
local now
if ARGV[3] ~= '' then now = tonumber(ARGV[3]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'at', isoTime(now),
  'epoch', redis.call('HGET', KEYS[3], 'id') or '', unpack(ARGV, 4))
redis.call('SET', KEYS[2], id, 'PX', ARGV[2])
return id`;

/**
 * KEYS[1] a transfer's record; ARGV[1] its calls field, ARGV[2] the state in which a call is counted,
 * ARGV[3] the index (in the reply) of the field whose presence stops the count, ARGV[4..] the fields
 * read, 'state' first. The HMGET's reply; counts one call only on a record in that state without that
 * field (never creating one).
 */
const READ_COUNTING_LUA = `local values = redis.call('HMGET', KEYS[1], unpack(ARGV, 4))
if values[1] == ARGV[2] and not values[tonumber(ARGV[3])] then redis.call('HINCRBY', KEYS[1], ARGV[1], 1) end
return values`;

/**
 * KEYS[1] one failed submit job's reconciliation retries; ARGV[1] the most allowed; ARGV[2] TTL (ms).
 * Counts one more, up to ARGV[1] + 1, and keeps the count ARGV[2] longer. Returns {count, counted}:
 * counted is 0 once the count stood at ARGV[1] + 1 already (given up before).
 */
const RECONCILE_RETRY_LUA = `
local max = tonumber(ARGV[1])
local n = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if n > max then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {n, 0}
end
n = n + 1
redis.call('SET', KEYS[1], n, 'PX', ARGV[2])
return {n, 1}`;

/**
 * KEYS[1] the worker's recorded settings (a hash); ARGV[1] `replace` (at start-up: whatever is
 * recorded, the last worker to start wins) or `if-absent` (after a reconnection: only when nothing is
 * recorded, so a Redis that lost its data gets the record back while workers of two versions that
 * reconnect do not overwrite each other); ARGV[2] the clock (ms, '' = Redis TIME); ARGV[3..] field,
 * value, ... Adds `recordedAt` when it writes. Returns the hash as it was (HGETALL).
 */
const RECORD_SETTINGS_LUA = `
local before = redis.call('HGETALL', KEYS[1])
if ARGV[1] == 'if-absent' and redis.call('HEXISTS', KEYS[1], 'script') == 1 then return before end
local now
if ARGV[2] ~= '' then now = tonumber(ARGV[2]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
redis.call('HSET', KEYS[1], 'recordedAt', now, unpack(ARGV, 3))
return before`;

/**
 * Retention of ended transfers' index entries: their records expire by their own TTL (RETENTION, set by
 * the terminal transition), their listing entries go here, from what the terminal transition recorded
 * of them (transition.lua, KEYS[13]). KEYS[1] the terminal index, KEYS[2] those records, KEYS[3] every
 * sequenceId, KEYS[4] by txid, KEYS[5] by job id, KEYS[6] the txid and job id search entries (members
 * name the transfer: each goes), KEYS[7..] the state and attention indexes whose names are ARGV[3..]
 * (`state:<state>`, `attention:<reason>`); ARGV[1] the cutoff (ms), ARGV[2] how many at most. A lookup
 * entry goes only while it still names this transfer. Returns how many ended
 * transfers it forgot (fewer than ARGV[2]: none is left before the cutoff).
 */
const FORGET_ENDED_LUA = `
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #members == 0 then return 0 end
local index = {}
for i = 5, #KEYS do index[ARGV[i - 2]] = KEYS[i] end
for _, member in ipairs(members) do
  local text = redis.call('HGET', KEYS[2], member)
  if text then
    local entry = cjson.decode(text)
    local state = index['state:' .. entry.state]
    if state then redis.call('ZREM', state, member) end
    local attention = index['attention:' .. entry.attention]
    if attention then redis.call('ZREM', attention, member) end
    if entry.txid ~= '' then redis.call('ZREM', KEYS[4], 't:' .. entry.txid .. '\\n' .. member) end
    if entry.jobId ~= '' then redis.call('ZREM', KEYS[4], 'j:' .. entry.jobId .. '\\n' .. member) end
  end
end
redis.call('HDEL', KEYS[2], unpack(members))
redis.call('ZREM', KEYS[3], unpack(members))
redis.call('ZREM', KEYS[1], unpack(members))
return #members`;

/**
 * KEYS[1] the claims hash, then per claim its transfer's record and tombstone; ARGV the claims' fields
 * and the sequenceIds read with them (field, sequenceId, ...). Removes each field that still names the
 * same sequenceId while that transfer has neither a record nor a tombstone: a claim lives as long as
 * either does (transition.lua writes it with the change that stores its id). Returns how many.
 */
const FORGET_CLAIMS_LUA = `
local removed = 0
for i = 1, #ARGV, 2 do
  -- ARGV[i]'s transfer: its record is KEYS[i + 1], its tombstone KEYS[i + 2].
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] and redis.call('EXISTS', KEYS[i + 1], KEYS[i + 2]) == 0 then
    removed = removed + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return removed`;

/** Fields of the claims hash one HSCAN reads (COUNT), and HSCANs one retention run makes at most. */
const CLAIMS_SCAN_COUNT = 500;
const CLAIMS_SCANS_PER_RUN = 20;

/** How many ended transfers one call of FORGET_ENDED_LUA forgets at most: bounds the script's run. */
const FORGET_ENDED_BATCH = 500;

/**
 * KEYS[1] a transfer's record, KEYS[2..] the indexes of the non-terminal states, then (when the
 * record is gone) every attention index and every sequenceId; ARGV[1] the member, ARGV[2] how many
 * keys of KEYS[2..] are state indexes. Drops its entries from what a record that expired or vanished
 * leaves behind; an ended record's own entries stay (retention takes them).
 */
const DROP_ACTIVE_LUA = `
local gone = redis.call('EXISTS', KEYS[1]) == 0
local last = #KEYS
if not gone then last = 1 + tonumber(ARGV[2]) end
for i = 2, last do redis.call('ZREM', KEYS[i], ARGV[1]) end`;

/**
 * One entry of the index of non-terminal transfers that workers before contract v1.4 kept
 * (Keys.legacyActive), moved into the state index of its record's state (kept if already there) and
 * the sequenceId index. KEYS[1] that index, KEYS[2] the record, KEYS[3] every sequenceId, KEYS[4..]
 * the non-terminal state indexes; ARGV[1] the member, ARGV[2] its score, ARGV[3..] the states of
 * KEYS[4..]. An entry whose record is gone or ended is dropped (reconciliation's stale entry).
 */
const ADOPT_LEGACY_ACTIVE_LUA = `
local state = redis.call('HGET', KEYS[2], 'state')
for i = 4, #KEYS do
  if ARGV[i - 1] == state then
    redis.call('ZADD', KEYS[i], 'NX', ARGV[2], ARGV[1])
    redis.call('ZADD', KEYS[3], 'NX', 0, ARGV[1])
  end
end
redis.call('ZREM', KEYS[1], ARGV[1])`;

/**
 * REDIS_MIN_REPLICAS and REDIS_REPLICA_TIMEOUT for a write made on an operator's behalf
 * (Ledger.writeReplicated): with `min` ≥ 1 its answer waits until the replicas have it.
 */
/** One entry of a transfer's attempts list: what operations.ts `Attempt` says, and when (the ledger's ms). */
export type AttemptEntry = Attempt & { at: number };

export type ReplicaWait = { min: number; timeoutMs: number };

/**
 * What an answer of Ledger.writeReplicated rests on: `written`, the write this call made; `held`, a
 * state the primary holds although this call changed nothing (a cancel or a resolve again: the first
 * one's answer may have been NOT_REPLICATED); `nothing`, no state anyone could lose (a refusal that
 * changed nothing and promises nothing), which waits for no replica.
 */
export type AnswerRestsOn = 'written' | 'held' | 'nothing';

/** `too-late` changed nothing and promises no cancel: nothing to lose in a failover. */
const CANCEL_RESTS_ON: Record<CancelResult['outcome'], AnswerRestsOn> = {
  cancelled: 'written',
  'already-ended': 'held',
  'too-late': 'nothing',
};

/** What a cancel did (Ledger.cancel): the producer package's CancelResult, one type for both. */
export type { CancelResult } from '../../packages/producer/src/transition.ts';

/** What reconciliation does with one failed submit job (Ledger.reconcileRetry). */
export type ReconcileRetry = 'retry' | 'give-up' | 'given-up';

/** How long a system event's run is remembered: far beyond any reconnect's replay. */
const SYSTEM_EVENT_RUN_TTL_MS = 24 * 3_600_000;

type TransitionReply = Array<number | string | Array<string | null> | undefined>;

interface LedgerCommands {
  transferTransition(numberOfKeys: number, ...keysAndRequest: string[]): Promise<TransitionReply>;
  transferRecord(hash: string, payload: string): Promise<[string[], string | null]>;
  transferReadCounting(
    hash: string,
    callsField: string,
    state: string,
    unlessIndex: string,
    ...fields: string[]
  ): Promise<Array<string | null>>;
  reconcileRetry(key: string, max: number, ttlMs: number): Promise<[number, number]>;
  forgetEnded(numberOfKeys: number, ...keysAndArgs: Array<string | number>): Promise<number>;
  forgetClaims(numberOfKeys: number, ...keysAndArgs: string[]): Promise<number>;
  dropActive(numberOfKeys: number, ...keysAndArgs: string[]): Promise<number>;
  adoptLegacyActive(numberOfKeys: number, ...keysAndArgs: string[]): Promise<number>;
  recordWorkerSettings(key: string, mode: 'replace' | 'if-absent', clock: string, ...fields: string[]): Promise<string[]>;
  systemEventOnce(
    stream: string,
    run: string,
    epoch: string,
    maxLen: number,
    ttlMs: number,
    clock: string,
    ...fields: string[]
  ): Promise<string>;
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
  /** LEDGER_INIT, LEDGER_RECOVERY_WINDOW and what to tell about the epoch (epoch.ts); default: auto, 24 h. */
  epoch?: Omit<EpochOptions, 'clock'>;
}

/** LEDGER_RECOVERY_WINDOW's default is TRACK_DEADLINE's (24 h); the config passes it. */
const DEFAULT_EPOCH: Omit<EpochOptions, 'clock'> = { init: 'auto', recoveryWindowMs: 24 * 3_600_000 };

/**
 * Per-transfer state in Redis. Every change goes through one Lua script that checks the expected
 * state and the lease, applies the change, publishes the event and maintains the indexes atomically.
 * The ledger owns its keys: callers ask it questions instead of reading them.
 */
export class Ledger {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #options: LedgerOptions;
  /** What every transition writes with besides its request (the script has no configuration of its own). */
  readonly #context: RequestContext;
  /**
   * What this ledger's transitions write with: its transition script (by SHA1), the events stream and
   * the settings (worker-settings.ts), as the worker records them and other processes compare theirs.
   */
  readonly settings: WorkerSettings;
  /** The ledger's identity, as this process knows it (epoch.ts). */
  readonly epoch: LedgerEpoch;

  constructor(redis: RedisClient, keys: Keys, options: LedgerOptions) {
    this.#redis = redis;
    this.#keys = keys;
    this.#options = options;
    this.#context = {
      eventsMaxLen: options.eventsMaxLen,
      retentionMs: options.retentionMs,
      tombstoneTtlMs: options.retentionMs + (options.tombstoneRetentionMs ?? DEFAULT_TOMBSTONE_RETENTION_MS),
    };
    this.settings = workerSettings(TRANSITION_LUA, keys.events, this.#context);
    this.epoch = new LedgerEpoch(redis, keys.epoch, { ...(options.epoch ?? DEFAULT_EPOCH), clock: options.clock });
    if (!('transferTransition' in redis)) {
      // The number of keys goes first: eight, the listing indexes, the claims hash when the change claims
      // something, then the attempts key (transition.lua's header).
      redis.defineCommand('transferTransition', { lua: TRANSITION_LUA });
      redis.defineCommand('transferRecord', { numberOfKeys: 2, lua: RECORD_LUA, readOnly: true });
      redis.defineCommand('systemEventOnce', { numberOfKeys: 3, lua: SYSTEM_EVENT_ONCE_LUA });
      redis.defineCommand('transferReadCounting', { numberOfKeys: 1, lua: READ_COUNTING_LUA });
      redis.defineCommand('reconcileRetry', { numberOfKeys: 1, lua: RECONCILE_RETRY_LUA });
      redis.defineCommand('recordWorkerSettings', { numberOfKeys: 1, lua: RECORD_SETTINGS_LUA });
      redis.defineCommand('forgetEnded', { lua: FORGET_ENDED_LUA });
      redis.defineCommand('forgetClaims', { lua: FORGET_CLAIMS_LUA });
      redis.defineCommand('dropActive', { lua: DROP_ACTIVE_LUA });
      redis.defineCommand('adoptLegacyActive', { lua: ADOPT_LEGACY_ACTIVE_LUA });
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

  /**
   * A transfer's send attempts and settling lookups, oldest first (the newest ATTEMPTS_CAP the text
   * keeps, one JSON entry a line, transition.lua), with the send whose own answer proved it accepted
   * put back in its place from the record (SEND_ACCEPTED, at submittedAt): one GET and one HMGET. An entry that does
   * not read as one is left out.
   */
  async attempts(sequenceId: string): Promise<AttemptEntry[]> {
    const [[, stored], [, [accepted, submittedAt, acceptedBefore]]] = (await this.#redis
      .multi()
      .get(this.#keys.attempts(sequenceId))
      .hmget(this.#keys.transfer(sequenceId), SEND_ACCEPTED, 'submittedAt', SEND_ACCEPTED_AT_BEFORE)
      .exec()) as [[unknown, string | null], [unknown, Array<string | null>]];
    const acceptedAt = accepted === '1' ? submittedAt : acceptedBefore;
    const entries = (stored ?? '').split('\n').flatMap((text) => {
      if (text === '') return [];
      try {
        const entry = JSON.parse(text) as AttemptEntry;
        return typeof entry.at === 'number' && (entry.kind === 'send' || entry.kind === 'lookup') ? [entry] : [];
      } catch {
        return [];
      }
    });
    if (acceptedAt) {
      const at = Number(acceptedAt);
      // The send that led to `submitted` came after whatever was recorded up to that millisecond.
      const place = entries.findIndex((entry) => entry.at > at);
      entries.splice(place === -1 ? entries.length : place, 0, { at, kind: 'send', outcome: 'accepted', proof: 'accepted' });
    }
    return entries;
  }

  /** Part of a transfer's record (HMGET); undefined when there is no record. */
  async read<T>(sequenceId: string, view: RecordView<T>): Promise<T | undefined> {
    const values = await this.#redis.hmget(this.#keys.transfer(sequenceId), 'state', ...view.fields);
    return values[0] ? view.build(sequenceId, values.slice(1)) : undefined;
  }

  /**
   * `read`, and in the same round trip counts one upstream call on the record (CALLS_FIELD) when the
   * record is in `state` and has no `unless` field yet: the tracker's poll, counted as it reads the
   * record it polls for, instead of by a command of its own per call (budget.ts counts the others).
   * The count is the call about to be made: one that is then not made (a provider pause turned it
   * away) is counted all the same. Never creates a record.
   */
  async readCounting<T>(sequenceId: string, view: RecordView<T>, when: { state: TransferState; unless: string }): Promise<T | undefined> {
    const unlessIndex = view.fields.indexOf(when.unless);
    if (unlessIndex < 0) throw new Error(`readCounting: ${when.unless} is not a field of the view`);
    const values = await (this.#redis as unknown as LedgerCommands).transferReadCounting(
      this.#keys.transfer(sequenceId),
      CALLS_FIELD,
      when.state,
      // HMGET's replies: 'state' first, then the view's fields.
      String(unlessIndex + 2),
      'state',
      ...view.fields,
    );
    return values[0] ? view.build(sequenceId, values.slice(1)) : undefined;
  }

  /**
   * Waits until the replicas acknowledge every write this process made so far on the ledger's
   * connection (see replicaAcknowledgement): called right after the transition that records a send
   * in flight, with the `session()` taken before it, so a failover cannot forget the send. On a Cluster, WAIT goes to the connection
   * ioredis routes the ledger's slot to (every ledger key shares one hash tag), the one that wrote.
   */
  async replicated(session: string, minReplicas: number, timeoutMs: number): Promise<ReplicaAcknowledgement> {
    return replicaAcknowledgement(this.#redis, this.#keys.epoch, minReplicas, timeoutMs, session);
  }

  /** Names the ledger's connection now (connectionSession): taken before a write that `replicated` must cover. */
  session(): string {
    return connectionSession(this.#redis, this.#keys.epoch);
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

  /**
   * Cancels a transfer before any send of it may have been processed (op.cancel: one transition, so a
   * send claim and a cancel never both succeed). `data` is checked against transfer.cancelled's schema
   * before anything changes (EventShapeError). See CancelResult for the outcomes.
   */
  async cancel(sequenceId: string, data: EventData['transfer.cancelled'], replicas?: ReplicaWait): Promise<CancelResult> {
    // A cancel a failover loses would let the job send after all: `cancelled` (or `already-ended`,
    // the answer to a cancel again) only once the replicas have it, as the producer's cancel() waits.
    return this.writeReplicated(
      replicas,
      // The outcome is read from the script's answer by the package's cancelOutcome, as its cancel() does.
      async () => {
        let answer = await this.transitionReading(sequenceId, op.cancel(data), NO_VIEW);
        // Refused under this process's epoch: #run has dealt with it (adopted the epoch in force, or
        // declared the ledger lost); judged once more under the epoch now known.
        if (!answer.ok && answer.reason === 'epoch') answer = await this.transitionReading(sequenceId, op.cancel(data), NO_VIEW);
        return cancelOutcome(sequenceId, answer);
      },
      (result) => CANCEL_RESTS_ON[result.outcome],
      ({ acknowledged, required }, timeoutMs) =>
        new NotReplicatedError(jobIdFor(sequenceId), acknowledged, required, timeoutMs, sequenceId),
    );
  }

  /**
   * Runs `write` (a change made on an operator's behalf: a cancel, a resolve, the epoch's init or
   * accept) and, with `replicas.min` ≥ 1, answers only once the replicas hold what its answer rests
   * on (`restsOn`), else throws `notReplicated`'s error: a failover to a replica without it would undo
   * an answer someone already acted on (a resolve as failed that the promoted replica still has in
   * submitting is sent again, and the producer resubmits it: paid twice). The session is taken before
   * the write, so the WAIT counts it only on the connection that made it (see `replicated`).
   *
   * A `held` answer changed nothing, yet must wait for what an earlier call wrote (perhaps from
   * another process). WAIT waits for this connection's offset: a fresh connection's first WAIT
   * answers at once with every replica (seen on Redis 7.0 with the replica stopped); 7.0 sets the
   * offset on any command, so the ROLE before it covers that there, but a Redis that sets it only on
   * a write would not. One write first (the readiness probe's key, which nobody reads) puts this
   * connection past every write the primary holds, since replicas apply them in order.
   */
  async writeReplicated<T>(
    replicas: ReplicaWait | undefined,
    write: () => Promise<T>,
    restsOn: (result: T) => AnswerRestsOn,
    notReplicated: (acknowledgement: ReplicaAcknowledgement, timeoutMs: number) => Error,
  ): Promise<T> {
    if (!replicas || replicas.min <= 0) return write();
    const session = this.session();
    const result = await write();
    const basis = restsOn(result);
    if (basis === 'nothing') return result;
    if (basis === 'held') await this.#redis.set(this.#keys.readyProbe, String(Date.now()), 'PX', READY_PROBE_TTL_MS);
    const acknowledgement = await this.replicated(session, replicas.min, replicas.timeoutMs);
    if (acknowledgement.acknowledged < acknowledgement.required) throw notReplicated(acknowledgement, replicas.timeoutMs);
    return result;
  }

  /**
   * Records `settings` in Redis for the processes that cancel with their own copy of the script (the
   * producer package, the CLI). `replace` at a worker's start-up: the last worker to start wins, so a
   * deploy moves the record to the new version and its settings; `if-absent` after a reconnection
   * (Redis may have lost its data). Resolves with how what was recorded before differs from this
   * ledger's (empty when it was absent or the same): another worker runs another version or other
   * settings, as during a rolling deploy.
   */
  async recordSettings(mode: 'replace' | 'if-absent'): Promise<SettingDifference[]> {
    const clock = this.#options.clock?.();
    const flat = await (this.#redis as unknown as LedgerCommands).recordWorkerSettings(
      this.#keys.workerSettings,
      mode,
      clock === undefined ? '' : String(clock),
      ...settingsFields(this.settings),
    );
    const before: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) before[flat[i]!] = flat[i + 1]!;
    return settingsRecorded(before) ? settingDifferences(before, this.settings, true) : [];
  }

  /**
   * For a process that cancels with its own configuration (the CLI): rejects with VersionMismatchError
   * when this ledger's script or settings differ from what the worker recorded, or when nothing is
   * recorded while the ledger has an epoch (worker-settings.ts, settingDifferences). The worker's own
   * cancels need no check: they write with what it recorded.
   */
  async assertSettingsRecorded(): Promise<void> {
    const [record, epoch] = await Promise.all([this.#redis.hgetall(this.#keys.workerSettings), this.#redis.hget(this.#keys.epoch, 'id')]);
    const differences = settingDifferences(record, this.settings, epoch !== null);
    if (differences.length > 0) throw new VersionMismatchError(differences, settingsRecorded(record));
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
    return this.#run(
      key,
      `${key}:payload`,
      common.sequenceId,
      '',
      {
        from: [NO_RECORD],
        to: TransferState.REJECTED,
        set: { jobId, walletId: common.walletId, coin: common.coin, metadata: common.metadata },
        stamp: ['createdAt'],
        event: { type: 'transfer.rejected', data },
      },
      undefined,
    );
  }

  /**
   * An event that belongs to no transfer (`reconcile.completed`): empty sequenceId, version 0. Published
   * once per `runId`, whatever happens to the command: a plain XADD that ioredis replays after a
   * reconnect would publish it twice, so the script records the run (SET NX, a day) and the stream id
   * together with the XADD, and a replay returns the first id.
   */
  async publishSystemEvent<K extends EventType>(type: K, data: EventData[K], runId: string): Promise<string> {
    checkEventData(type, data);
    const clock = this.#options.clock?.();
    const id = await (this.#redis as unknown as LedgerCommands).systemEventOnce(
      this.#keys.events,
      this.#keys.systemEventRun(runId),
      this.#keys.epoch,
      this.#options.eventsMaxLen,
      SYSTEM_EVENT_RUN_TTL_MS,
      clock === undefined ? '' : String(clock),
      ...['event', type, 'sequenceId', '', 'walletId', '', 'coin', '', 'version', '0', 'data', JSON.stringify(data), 'metadata', ''],
    );
    return String(id);
  }

  /** A transfer's events so far, oldest first (those trimmed from the stream are absent). */
  async events(sequenceId: string): Promise<TransferEvent[]> {
    return readTransferEvents(this.#redis, this.#keys, sequenceId);
  }

  /**
   * Non-terminal transfers last changed at or before `cutoff`, state by state (the state indexes),
   * each state's oldest first, in pages. Paged by score, not by offset: the caller's own transitions
   * move entries to a later score (out of range) or to another index while it walks, which an offset
   * would turn into skipped entries. Scores only grow, so a cursor on the score (finishing every member
   * of the boundary score) sees each due entry of a state once; an entry that moves to a state walked
   * later has a score after `cutoff` by then.
   */
  async *staleActive(cutoff: number, page: number): AsyncGenerator<string> {
    for (const state of NON_TERMINAL_STATES) {
      const key = this.#keys.byState(state);
      let min = '-inf';
      for (;;) {
        const flat = await this.#redis.zrangebyscore(key, min, cutoff, 'WITHSCORES', 'LIMIT', 0, page);
        if (flat.length === 0) break;
        const members: string[] = [];
        for (let i = 0; i + 1 < flat.length; i += 2) members.push(flat[i]!);
        const last = flat[flat.length - 1]!;
        if (members.length === page) {
          // Entries sharing the last score may continue past this page: take them all now.
          const tied = await this.#redis.zrangebyscore(key, last, last);
          for (const member of tied) if (!members.includes(member)) members.push(member);
        }
        yield* members;
        if (members.length < page) break;
        min = `(${last}`;
      }
    }
  }

  /**
   * Moves what the index of non-terminal transfers of workers before contract v1.4 still holds
   * (Keys.legacyActive) into the state indexes, in pages; returns how many entries it took. Run by
   * every reconciliation, so that transfers last changed by an older worker (during a rolling upgrade
   * too) are walked, listed and counted like the others.
   */
  async adoptLegacyActive(page = 500): Promise<number> {
    const states = NON_TERMINAL_STATES;
    const commands = this.#redis as unknown as LedgerCommands;
    let adopted = 0;
    for (;;) {
      const flat = await this.#redis.zrange(this.#keys.legacyActive, '0', String(page - 1), 'WITHSCORES');
      if (flat.length === 0) return adopted;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const member = flat[i]!;
        const keys = [
          this.#keys.legacyActive,
          this.#keys.transfer(member),
          this.#keys.ids,
          ...states.map((state) => this.#keys.byState(state)),
        ];
        await commands.adoptLegacyActive(keys.length, ...keys, member, flat[i + 1]!, ...states);
        adopted++;
      }
    }
  }

  /**
   * Non-terminal transfers last changed before `cutoff`, counted by state: what the stale-transfers
   * gauge shows (one ZCOUNT per state).
   */
  async staleByState(cutoff: number): Promise<Record<string, number>> {
    const counts = await Promise.all(
      NON_TERMINAL_STATES.map((state) => this.#redis.zcount(this.#keys.byState(state), '-inf', `(${cutoff}`)),
    );
    return Object.fromEntries(NON_TERMINAL_STATES.map((state, i) => [state, counts[i]!]));
  }

  /** How many transfers are not terminal, and the last change of the least recently changed one (ms, Redis time). */
  async activeSummary(): Promise<{ count: number; oldestChangeAt: number | undefined }> {
    const perState = await Promise.all(
      NON_TERMINAL_STATES.map(async (state) => {
        const key = this.#keys.byState(state);
        const [count, oldest] = await Promise.all([this.#redis.zcard(key), this.#redis.zrange(key, '0', '0', 'WITHSCORES')]);
        return { count, oldest: oldest[1] === undefined ? undefined : Number(oldest[1]) };
      }),
    );
    const oldest = perState.flatMap((part) => (part.oldest === undefined ? [] : [part.oldest]));
    return {
      count: perState.reduce((sum, part) => sum + part.count, 0),
      oldestChangeAt: oldest.length === 0 ? undefined : Math.min(...oldest),
    };
  }

  /**
   * Remembers which transfer an accepted send's record id is (Keys.acceptedRecord), as long as a
   * tombstone, unless another already holds it: only a provider's wake-up reads it, to poll sooner.
   * Written after the `submitted` transition, not in it: a crash in between costs the wake-up, never a
   * poll (the scheduled ones go on).
   */
  async rememberAcceptedRecord(sequenceId: string, recordId: string): Promise<void> {
    await this.#redis.set(this.#keys.acceptedRecord(recordId), sequenceId, 'PX', this.#context.tombstoneTtlMs, 'NX');
  }

  /**
   * The sequenceId that claimed this upstream record id (or whose accepted send it was), else this txid (transition.lua writes each
   * claim with the change that stores it, and it lives as long as the transfer's tombstone): how a
   * provider's wake-up (a webhook naming its transfer id or the hash) finds the transfer. One MULTI:
   * an HGET per id, and a GET for a record id.
   */
  async claimedBy(ids: { recordId?: string | undefined; txid?: string | undefined }): Promise<string | undefined> {
    if (!ids.recordId && !ids.txid) return undefined;
    // In the order they count: the record id's claim, its accepted send, the txid's claim.
    const read = this.#redis.multi();
    if (ids.recordId) {
      read.hget(this.#keys.claims, this.#keys.claimField('record', ids.recordId)).get(this.#keys.acceptedRecord(ids.recordId));
    }
    if (ids.txid) read.hget(this.#keys.claims, this.#keys.claimField('txid', ids.txid));
    const replies = (await read.exec()) as Array<[unknown, string | null]>;
    return replies.map(([, holder]) => holder).find((holder): holder is string => holder !== null);
  }

  /**
   * Which of `records` the ledger holds for a sequenceId other than `sequenceId` (their record id or
   * txid claimed by another transfer's transition, transition.lua): their record ids. One HMGET.
   */
  async heldByOthers(sequenceId: string, records: ReadonlyArray<{ id: string; txid: string }>): Promise<ReadonlySet<string>> {
    const fields: string[] = [];
    const owners: string[] = [];
    for (const record of records) {
      fields.push(this.#keys.claimField('record', record.id));
      owners.push(record.id);
      if (record.txid !== '') {
        fields.push(this.#keys.claimField('txid', record.txid));
        owners.push(record.id);
      }
    }
    const held = new Set<string>();
    if (fields.length === 0) return held;
    const holders = await this.#redis.hmget(this.#keys.claims, ...fields);
    holders.forEach((holder, i) => {
      if (holder !== null && holder !== sequenceId) held.add(owners[i]!);
    });
    return held;
  }

  /**
   * Keeps the record a tracker found with its txid (an hour at most) while the wallet-transaction
   * lookup waits for the budget, so the next run does not poll again for what it already saw.
   */
  async rememberFound(sequenceId: string, transfer: object): Promise<void> {
    await this.#redis.set(this.#keys.foundTransfer(sequenceId), JSON.stringify(transfer), 'PX', FOUND_TRANSFER_TTL_MS);
  }

  /** The record rememberFound kept, if any. */
  async found(sequenceId: string): Promise<unknown> {
    const text = await this.#redis.get(this.#keys.foundTransfer(sequenceId));
    return text === null ? undefined : (JSON.parse(text) as unknown);
  }

  /** The transfer's tracking job was added (Queue.add): its tracker outbox entry goes. */
  async trackerAdded(sequenceId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.trackerOutbox, sequenceId);
  }

  /** Transfers whose tracker outbox entry was recorded at or before `cutoff` (ledger clock), oldest first. */
  async pendingTrackers(cutoff: number, limit: number): Promise<string[]> {
    return this.#redis.zrangebyscore(this.#keys.trackerOutbox, '-inf', cutoff, 'LIMIT', 0, limit);
  }

  /**
   * Drops the non-terminal state index entries of a record that expired or ended without the index
   * following, and, when the record is gone, its listing entries (the lookups by txid and job id,
   * which need the record to be found, stay until their transfer's sequenceId is taken again).
   */
  async dropActive(sequenceId: string): Promise<void> {
    const states = NON_TERMINAL_STATES.map((state) => this.#keys.byState(state));
    const keys = [
      this.#keys.transfer(sequenceId),
      ...states,
      ...ATTENTION_REASONS.map((reason) => this.#keys.attention(reason)),
      this.#keys.ids,
    ];
    await (this.#redis as unknown as LedgerCommands).dropActive(keys.length, ...keys, sequenceId, String(states.length));
  }

  /** Broadcast transfers to re-verify: broadcast at or before `cutoff`, oldest first; older than `windowMs` are dropped. */
  async dueBroadcasts(cutoff: number, windowMs: number, limit: number): Promise<string[]> {
    await this.#redis.zremrangebyscore(this.#keys.broadcast, '-inf', cutoff - windowMs);
    return this.#redis.zrangebyscore(this.#keys.broadcast, '-inf', cutoff, 'LIMIT', 0, limit);
  }

  async verified(sequenceId: string): Promise<void> {
    await this.#redis.zrem(this.#keys.broadcast, sequenceId);
  }

  /**
   * Retention: forgets the transfers that ended at or before `before` from every index (their records
   * expire by TTL, RETENTION after they ended), in batches. Returns how many.
   */
  async forgetTerminal(before: number): Promise<number> {
    const named = [
      ...[...TERMINAL_STATES].map((state) => [`state:${state}`, this.#keys.byState(state)] as const),
      ...ATTENTION_REASONS.map((reason) => [`attention:${reason}`, this.#keys.attention(reason)] as const),
    ];
    const keys = [this.#keys.terminal, this.#keys.endedEntries, this.#keys.ids, this.#keys.search, ...named.map(([, key]) => key)];
    const names = named.map(([name]) => name);
    let forgotten = 0;
    for (;;) {
      const count = await (this.#redis as unknown as LedgerCommands).forgetEnded(
        keys.length,
        ...keys,
        before,
        FORGET_ENDED_BATCH,
        ...names,
      );
      forgotten += count;
      if (count < FORGET_ENDED_BATCH) return forgotten;
    }
  }

  /**
   * Retention of the claims (Keys.claims): goes on with the claims hash's HSCAN where the last call
   * stopped (Keys.claimsCursor), at most `scans` reads of CLAIMS_SCAN_COUNT fields, and removes each
   * claim whose transfer has neither a record nor a tombstone any more (FORGET_CLAIMS_LUA, atomic per
   * read). A whole pass takes (claims ÷ 10,000) reconciliation runs; a claim outlives its tombstone by
   * at most that. Returns how many it removed.
   */
  async forgetClaims(scans = CLAIMS_SCANS_PER_RUN): Promise<number> {
    const commands = this.#redis as unknown as LedgerCommands;
    let cursor = (await this.#redis.get(this.#keys.claimsCursor)) ?? '0';
    let removed = 0;
    for (let scan = 0; scan < scans; scan++) {
      const [next, flat] = await this.#redis.hscan(this.#keys.claims, cursor, 'COUNT', CLAIMS_SCAN_COUNT);
      const keys: string[] = [];
      for (let i = 0; i < flat.length; i += 2) keys.push(this.#keys.transfer(flat[i + 1]!), this.#keys.tombstone(flat[i + 1]!));
      if (flat.length > 0) removed += await commands.forgetClaims(1 + keys.length, this.#keys.claims, ...keys, ...flat);
      cursor = next;
      if (cursor === '0') break;
    }
    await this.#redis.set(this.#keys.claimsCursor, cursor);
    return removed;
  }

  /**
   * Whether reconciliation may retry the failed submit job `job` (its id and creation time, so a later
   * job under the same id starts afresh) once more: `retry` for its first `max` retries, then
   * `give-up` once (log it, count it) and `given-up` from then on. The count is the worker's own key
   * (never BullMQ's, never the job's data, which is the producer's), kept RETENTION after the job was
   * last seen failed.
   */
  async reconcileRetry(job: { id: string; timestamp: number }, max: number): Promise<ReconcileRetry> {
    const [count, counted] = await (this.#redis as unknown as LedgerCommands).reconcileRetry(
      this.#keys.reconcileRetries(job.id, job.timestamp),
      max,
      this.#options.retentionMs,
    );
    if (counted === 0) return 'given-up';
    return count > max ? 'give-up' : 'retry';
  }

  /**
   * Runs `task` under the cluster-wide lock `name` (SET NX PX with an owner token, renewed while it
   * runs, released only by its owner). Returns undefined without running it when another holds it.
   */
  async withLock<T>(name: 'reconcile', ttlMs: number, renewMs: number, task: () => Promise<T>): Promise<T | undefined> {
    return withRedisLock(this.#redis, this.#keys.reconcileLock, ttlMs, renewMs, task);
  }

  async #run(
    key: string,
    payloadKey: string,
    eventSequenceId: string,
    indexMember: string,
    request: TransitionRequest,
    view: undefined,
  ): Promise<TransitionResult>;
  async #run<T>(
    key: string,
    payloadKey: string,
    eventSequenceId: string,
    indexMember: string,
    request: TransitionRequest,
    view: RecordView<T>,
  ): Promise<TransitionResult<T>>;
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
    const commands = this.#redis as unknown as LedgerCommands;
    // A rejected job without a usable sequenceId (no index member) leaves no tombstone: a key of its own slot, never written.
    const tombstoneKey = indexMember === '' ? `${key}:ended` : this.#keys.tombstone(indexMember);
    const claims = [
      ...(request.claims?.recordIds ?? []).map((id) => this.#keys.claimField('record', id)),
      ...(request.claims?.txids ?? []).map((txid) => this.#keys.claimField('txid', txid)),
    ];
    const encoded = encodeRequest(
      request,
      {
        eventSequenceId,
        indexMember,
        clock: this.#options.clock?.(),
        epoch: this.epoch.known,
        seen: this.epoch.seen,
        ...(this.epoch.writer === '' ? {} : { writer: { id: this.epoch.writer, mine: this.epoch.mine } }),
        claims,
      },
      this.#context,
      view ? view.fields : '*',
    );
    const indexes = this.#keys.transitionIndex(request.from, request.to);
    // A rejected job without a usable sequenceId (no index member) gets no list: a key of its own slot, never written.
    const attemptsKey = indexMember === '' ? `${key}:attempts` : this.#keys.attempts(indexMember);
    const claimsKey = claims.length > 0 ? [this.#keys.claims] : [];
    const reply = await commands.transferTransition(
      9 + indexes.length + claimsKey.length,
      key,
      this.#keys.events,
      this.#keys.terminal,
      this.#keys.broadcast,
      payloadKey,
      tombstoneKey,
      this.#keys.trackerOutbox,
      this.#keys.epoch,
      ...indexes,
      ...claimsKey,
      attemptsKey,
      encoded,
    );
    if (reply[0] === 1) {
      if (request.event) this.#options.onEvent?.(request.event.type);
      // What the ledger says of itself: a tick gone back or another epoch is dealt with before the
      // caller's next transition (epoch.ts); this change was made, under the epoch the reply names.
      const known = this.epoch.known;
      if (known !== '' && (reply[5] !== known || Number(reply[4]) > this.epoch.seen))
        await this.epoch.observe(String(reply[5] ?? ''), Number(reply[4]));
      // Marked in the ledger as this process's (`w:`): a ledger that comes back without it went back.
      this.epoch.madeChange(String(reply[5] ?? ''), Number(reply[4]));
      const sequenceId = eventSequenceId || indexMember;
      const flat = (reply[3] ?? []) as Array<string | null>;
      const version = Number(reply[1]);
      const streamId = String(reply[2] ?? '');
      if (view) return { ok: true, version, streamId, record: view.build(sequenceId, flat) };
      const fields: Record<string, string> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      return { ok: true, version, streamId, record: toRecord(sequenceId, fields) };
    }
    const reason = String(reply[2]) as RefusalReason;
    // The ledger no longer holds this process's epoch (or it has none yet), or holds it with a tick
    // below the one this process saw (it went back in time): find out why before the caller tries
    // again (epoch.ts), so that its next try is judged under the epoch now in force.
    if (reason === 'epoch') await this.epoch.mismatch();
    else if (reason === 'recovery') await this.epoch.refresh();
    return {
      ok: false,
      state: String(reply[1]) as TransferState | typeof NO_RECORD,
      reason,
      leaseUntil: Number(reply[3] ?? 0),
      now: Number(reply[4] ?? 0),
      ...(reason === 'ended' && reply[5] ? { ended: parseTombstone(String(reply[5])) } : {}),
    };
  }
}
