import { Queue, type JobsOptions } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import {
  EnqueueError,
  InvalidCancelError,
  InvalidPayloadError,
  NotReplicatedError,
  ProducerClosedError,
  ProducerError,
  ProducerUnavailableError,
  VersionMismatchError,
  WaitTimeoutError,
  type ProducerOperation,
} from './errors.ts';
import { EVENT_DATA_SCHEMAS, parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from './events.ts';
import { jobIdFor } from './job-id.ts';
import { defaultEventsStream, ledgerKeys, tombstoneKey, transferKey, transitionKeys } from './keys.ts';
import { parseEnqueuedPayload, SUBMIT_TRANSACTION, type PayloadIssue, type SubmitPayload, type SubmitPayloadInput } from './payload.ts';
import { readTransferEvents, type EventKeys } from './read.ts';
import { connectionSession, replicaAcknowledgement } from './replicas.ts';
import type { TransferStateName } from './catalog.ts';
import { SEQUENCE_ID } from './sequence-id.ts';
import {
  cancelOutcome,
  cancelRequest,
  encodeRequest,
  TRANSITION_LUA,
  type CancelAnswer,
  type CancelResult,
  type RequestContext,
} from './transition.ts';
import { settingDifferences, settingsRecorded, workerSettings, type WorkerSettings } from './worker-settings.ts';

export type { SubmitPayloadInput, PayloadIssue } from './payload.ts';
export type { TransferEvent } from './events.ts';
export type { CancelResult } from './transition.ts';
export { cancelResultSchema } from './cancel-result.ts';
export {
  ProducerError,
  InvalidPayloadError,
  InvalidCancelError,
  ProducerUnavailableError,
  EnqueueError,
  NotReplicatedError,
  WaitTimeoutError,
  ProducerClosedError,
  VersionMismatchError,
} from './errors.ts';
export type { ProducerErrorCode, ProducerOperation } from './errors.ts';
export type { SettingDifference, WorkerSettingField } from './worker-settings.ts';
export { jobIdFor, sequenceIdOfJobId, JOB_ID_PREFIX } from './job-id.ts';

/** What `trySubmit()` did: enqueued the transfer, or found that its sequenceId's transfer ended before. */
export type SubmitReceipt =
  | { outcome: 'enqueued'; sequenceId: string; jobId: string }
  | { outcome: 'ended'; sequenceId: string; ended: { event: TransferEvent['event']; version: number } };

/**
 * The worker's defaults of the settings a cancel writes with (docs/configuration.md): EVENTS_MAXLEN,
 * RETENTION and TOMBSTONE_RETENTION. A worker configured otherwise: pass its values as `ledger`.
 */
export const LEDGER_DEFAULTS = {
  eventsMaxLen: 1_000_000,
  retentionMs: 30 * 24 * 3_600_000,
  tombstoneRetentionMs: 3650 * 24 * 3_600_000,
} as const;

/** What `cancel()` takes besides the sequenceId. */
export interface CancelOptions {
  /**
   * Why the transfer is cancelled, published in `transfer.cancelled` (`data.reason`): one line of 1-256
   * characters, no control characters. Put a ticket reference here, never personal data.
   */
  reason: string;
}

/** Default bound on `submit()` (and on every Redis call of `events`, `waitForTerminal`, `close`). */
export const DEFAULT_SUBMIT_TIMEOUT_MS = 5_000;

export interface ProducerOptions {
  /**
   * An ioredis connection (Redis or Cluster; shared: the producer never closes it) or a Redis URL (the
   * producer then owns its connection: no offline queue, a connect time-out of `submitTimeoutMs`).
   */
  connection: Redis | Cluster | string;
  /** QUEUE_PREFIX of the worker (default `bull`). */
  prefix?: string;
  /** EVENTS_STREAM of the worker (default `<prefix>:transfer-events`). */
  eventsStream?: string;
  /**
   * How long `submit()` may take before it rejects with ProducerUnavailableError (default 5000 ms):
   * waiting for the connection plus the add. Also the bound on each Redis call made while reading events
   * and on `close()`.
   */
  submitTimeoutMs?: number;
  /**
   * With 1 or more (default 0), `submit()` resolves only once every replica the primary lists online,
   * and at least this many, acknowledged the add (Redis `WAIT`), so a failover to any of them keeps
   * the job. Fewer within `replicaTimeoutMs` reject with NotReplicatedError (the job was added on
   * the primary; submit again). On a Redis Cluster, the replicas of the master that holds the
   * queue's slot. `cancel()` waits the same way before it answers `cancelled` or `already-ended`.
   */
  minReplicas?: number;
  /** How long `WAIT` may take (default 1000 ms). */
  replicaTimeoutMs?: number;
  /**
   * The worker's EVENTS_MAXLEN, RETENTION and TOMBSTONE_RETENTION (ms), which a `cancel()` that takes
   * effect writes with (how long the cancelled record and its tombstone are kept, the stream's
   * trimming). Default: the worker's defaults (LEDGER_DEFAULTS).
   */
  ledger?: { eventsMaxLen?: number; retentionMs?: number; tombstoneRetentionMs?: number };
}

export interface EventsOptions {
  /**
   * false (default): the transfer's events so far, then the iteration ends. true: those, then new ones
   * as the worker publishes them, ending after the terminal event.
   */
  follow?: boolean;
  /** Ends a following iteration: the loop throws the signal's reason (an AbortError by default). */
  signal?: AbortSignal;
}

/** Longest single blocking read while following; the loop re-checks its deadline and signal in between. */
const BLOCK_SLICE_MS = 1_000;
/** Entries read per XREAD while following. */
const READ_COUNT = 1_000;
/**
 * How long what the worker recorded (its script and settings) is trusted before a cancel reads it
 * again: besides every (re)connection, so that a long-lived producer follows a deploy of the workers
 * within this long, as their old processes do until they stop. A refusal always reads it again first.
 */
const WORKER_SETTINGS_MAX_AGE_MS = 60_000;

type Client = Redis | Cluster;

/** One wait for a connection to become ready, shared by the calls waiting on it. */
interface Readiness {
  /** Resolves on 'ready'; rejects with CONNECTION_ENDED on 'end'. */
  ready: Promise<void>;
  /** Calls waiting on it now. */
  waiters: number;
  /** Removes the listeners and forgets the wait (idempotent). */
  release: () => void;
}

/** How the shared wait says the connection ended; each caller turns it into its own ProducerUnavailableError. */
const CONNECTION_ENDED = Symbol('connection ended');

/**
 * The typed way for other services to hand transfers to the worker: validates with the worker's own
 * schema, enqueues under `jobIdFor(sequenceId)` (`transfer-<sequenceId>`), reads the transfer's typed
 * events. Every call is bounded: when Redis is unreachable it rejects with ProducerUnavailableError
 * instead of waiting for Redis to come back.
 */
export class TransferProducer {
  readonly #redis: Client;
  readonly #ownsRedis: boolean;
  readonly #queue: Queue;
  readonly #keys: EventKeys;
  readonly #prefix: string;
  readonly #timeoutMs: number;
  readonly #minReplicas: number;
  readonly #replicaTimeoutMs: number;
  readonly #ledger: RequestContext;
  /** Connections of iterations that follow the stream, disconnected by close(). */
  readonly #readers = new Set<Client>();
  /** The wait for readiness of each connection some call is waiting on (see #whenReady). */
  readonly #readiness = new Map<Client, Readiness>();
  #lastError: Error | undefined;
  #closed = false;
  /**
   * The ledger's epoch and the highest tick (its count of transitions) this producer saw under it:
   * every cancel carries them, and the worker's script refuses a cancel under that epoch below that
   * tick (the ledger went back in time: a lagging replica promoted, a snapshot restored), as it does
   * for the worker's own transitions. Read on the first cancel and on every (re)connection.
   */
  #ledgerSeen: { epoch: string; tick: number } | undefined;
  /** What this producer's cancels write with (worker-settings.ts), compared with what the worker recorded. */
  readonly #settings: WorkerSettings;
  /**
   * What the worker recorded (the hash as read, `{}` when absent) and whether the ledger had an epoch,
   * read with the epoch on every (re)connection and when older than WORKER_SETTINGS_MAX_AGE_MS.
   */
  #recorded: { record: Record<string, string>; ledgerHasEpoch: boolean; readAt: number } | undefined;
  readonly #onError = (error: Error): void => {
    this.#lastError = error;
  };
  readonly #onReady = (): void => {
    // A reconnection may lead to another Redis (a failover) or follow a deploy of the workers: the next
    // cancel judges by a read made from now on, whether this one or its own.
    this.#recorded = undefined;
    this.#readLedger().catch(() => {});
  };

  constructor(options: ProducerOptions) {
    const timeoutMs = options.submitTimeoutMs ?? DEFAULT_SUBMIT_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`submitTimeoutMs must be a positive number, got ${timeoutMs}`);
    this.#timeoutMs = timeoutMs;
    this.#minReplicas = options.minReplicas ?? 0;
    this.#replicaTimeoutMs = options.replicaTimeoutMs ?? 1_000;
    if (!Number.isInteger(this.#minReplicas) || this.#minReplicas < 0)
      throw new RangeError(`minReplicas must be a whole number ≥ 0, got ${options.minReplicas}`);
    if (!Number.isFinite(this.#replicaTimeoutMs) || this.#replicaTimeoutMs <= 0) {
      throw new RangeError(`replicaTimeoutMs must be a positive number, got ${options.replicaTimeoutMs}`);
    }
    const ledger = { ...LEDGER_DEFAULTS, ...options.ledger };
    for (const [name, value] of Object.entries(ledger)) {
      if (!Number.isInteger(value) || value <= 0) throw new RangeError(`ledger.${name} must be a positive whole number, got ${value}`);
    }
    this.#ledger = {
      eventsMaxLen: ledger.eventsMaxLen,
      retentionMs: ledger.retentionMs,
      tombstoneTtlMs: ledger.retentionMs + ledger.tombstoneRetentionMs,
    };
    this.#ownsRedis = typeof options.connection === 'string';
    this.#redis =
      typeof options.connection === 'string'
        ? new Redis(options.connection, {
            // Fail fast: a command while disconnected is refused at once instead of queued until Redis
            // returns (a queued add would land long after submit() gave up on it).
            enableOfflineQueue: false,
            connectTimeout: timeoutMs,
            maxRetriesPerRequest: 1,
          })
        : options.connection;
    // Keeps the last connection error for the messages (and stops ioredis printing unhandled errors).
    this.#redis.on('error', this.#onError);
    // What the ledger holds at each (re)connection raises what this producer saw (never lowers it).
    this.#redis.on('ready', this.#onReady);
    const prefix = options.prefix ?? 'bull';
    this.#prefix = prefix;
    this.#keys = { transfer: (sequenceId) => transferKey(prefix, sequenceId), events: options.eventsStream ?? defaultEventsStream(prefix) };
    this.#settings = workerSettings(TRANSITION_LUA, this.#keys.events, this.#ledger);
    this.#queue = new Queue(SUBMIT_TRANSACTION, { connection: this.#redis, prefix });
    // BullMQ re-emits connection errors on the queue; they surface through submit() instead.
    this.#queue.on('error', this.#onError);
  }

  /**
   * Validates and enqueues; resolves with the job id (`jobIdFor(sequenceId)`). Submitting the same
   * sequenceId again, at any time, is harmless: it is one transfer. Once that transfer ended (even long
   * ago: its tombstone outlives the record by TOMBSTONE_RETENTION) the job completes without a send and
   * without an event; `trySubmit()` says so instead of enqueueing. Rejects with
   * - InvalidPayloadError (`INVALID_PAYLOAD`, `.issues`): nothing enqueued, Redis not contacted. The
   *   payload is checked as given and as the queue will hold it (its JSON text parsed back, which is
   *   what the worker checks), so a value whose `toJSON` turns it into something else is judged by that;
   * - ProducerUnavailableError (`REDIS_UNAVAILABLE`) within `submitTimeoutMs` when Redis is unreachable;
   * - EnqueueError (`ENQUEUE_FAILED`) when BullMQ refuses the job (its error as `cause`);
   * - ProducerClosedError (`PRODUCER_CLOSED`) after close().
   */
  async submit(input: SubmitPayloadInput, jobOptions: Omit<JobsOptions, 'jobId'> = {}): Promise<string> {
    const parsed = parseEnqueuedPayload(input);
    if (!parsed.ok) throw new InvalidPayloadError(parsed.issues);
    this.#assertOpen();
    const jobId = jobIdFor(parsed.payload.halfSigned.sequenceId);
    const deadline = Date.now() + this.#timeoutMs;
    // Nothing is sent before the connection is up, so a submit refused here was certainly not enqueued.
    await this.#whenReady(this.#redis, deadline, 'submit');
    await this.#add(parsed.payload, jobOptions, jobId, deadline);
    return jobId;
  }

  /**
   * `submit()` that first asks whether the sequenceId's transfer ended: resolves with
   * `{ outcome: 'enqueued', jobId, sequenceId }`, or `{ outcome: 'ended', sequenceId, ended: { event,
   * version } }` (its terminal event type and last version) without enqueueing anything. Rejects as
   * submit() does. (A transfer that ends between the check and the add is still one transfer: the job
   * completes without a send and without an event.)
   */
  async trySubmit(input: SubmitPayloadInput, jobOptions: Omit<JobsOptions, 'jobId'> = {}): Promise<SubmitReceipt> {
    const parsed = parseEnqueuedPayload(input);
    if (!parsed.ok) throw new InvalidPayloadError(parsed.issues);
    this.#assertOpen();
    const sequenceId = parsed.payload.halfSigned.sequenceId;
    const jobId = jobIdFor(sequenceId);
    const deadline = Date.now() + this.#timeoutMs;
    await this.#whenReady(this.#redis, deadline, 'submit');
    const ended = await bounded(this.#ended(sequenceId), deadline, () =>
      this.#unavailable('submit', `the check did not complete within ${this.#timeoutMs} ms`, false),
    ).catch((error: unknown) => {
      if (error instanceof ProducerError) throw error;
      throw this.#unavailable('submit', (error as Error).message, false, error);
    });
    if (ended) return { outcome: 'ended', sequenceId, ended };
    await this.#add(parsed.payload, jobOptions, jobId, deadline);
    return { outcome: 'enqueued', sequenceId, jobId };
  }

  async #add(payload: SubmitPayload, jobOptions: Omit<JobsOptions, 'jobId'>, jobId: string, deadline: number): Promise<void> {
    const session = this.#minReplicas > 0 ? connectionSession(this.#redis, this.#queue.toKey(jobId)) : '';
    try {
      await bounded(this.#queue.add(SUBMIT_TRANSACTION, payload, { ...jobOptions, jobId }), deadline, () =>
        this.#unavailable('submit', `the add did not complete within ${this.#timeoutMs} ms`, true),
      );
    } catch (error) {
      if (error instanceof ProducerError) throw error;
      if (isConnectionError(error)) throw this.#unavailable('submit', (error as Error).message, true, error);
      throw new EnqueueError(jobId, error);
    }
    if (this.#minReplicas > 0) {
      // WAIT counts the replicas that have every write this connection made so far, the add included
      // (BullMQ's queue writes through the connection it was given; on a Cluster, through the
      // connection to the master of the queue's slot, where WAIT goes too).
      const { acknowledged, required } = await replicaAcknowledgement(
        this.#redis,
        this.#queue.toKey(jobId),
        this.#minReplicas,
        this.#replicaTimeoutMs,
        session,
      ).catch((error: unknown) => {
        throw this.#unavailable('submit', `waiting for replicas to acknowledge the add failed: ${(error as Error).message}`, true, error);
      });
      if (acknowledged < required) throw new NotReplicatedError(jobId, acknowledged, required, this.#replicaTimeoutMs);
    }
  }

  /** How the sequenceId's transfer ended: its record while kept, else its tombstone; undefined if it did not. */
  async #ended(sequenceId: string): Promise<{ event: TransferEvent['event']; version: number } | undefined> {
    const [record, tombstone] = await Promise.all([
      this.#redis.hmget(transferKey(this.#prefix, sequenceId), 'state', 'version'),
      this.#redis.get(tombstoneKey(this.#prefix, sequenceId)),
    ]);
    const [state, version] = record;
    const terminal = (text: string) => ((TERMINAL_EVENTS as ReadonlySet<string>).has(text) ? (text as TransferEvent['event']) : undefined);
    const fromRecord = state ? terminal(`transfer.${state}`) : undefined;
    if (fromRecord) return { event: fromRecord, version: Number(version) };
    if (tombstone === null) return undefined;
    const at = tombstone.lastIndexOf(':');
    const fromTombstone = terminal(`transfer.${tombstone.slice(0, at)}`);
    return fromTombstone ? { event: fromTombstone, version: Number(tombstone.slice(at + 1)) } : undefined;
  }

  /** Reads the ledger's epoch and tick (see #ledgerSeen) and what the worker recorded (see #recorded). */
  async #readLedger(): Promise<void> {
    const keys = ledgerKeys(this.#prefix);
    const [[epoch, tick], record] = await Promise.all([
      this.#redis.hmget(keys.epoch, 'id', 'tick'),
      this.#redis.hgetall(keys.workerSettings),
    ]);
    if (typeof epoch === 'string') this.#sawLedger(epoch, Number(tick ?? 0));
    this.#recorded = { record, ledgerHasEpoch: typeof epoch === 'string', readAt: Date.now() };
  }

  /**
   * Refuses (VersionMismatchError) a cancel whose script or settings differ from what the worker
   * recorded, judged on a read of at most WORKER_SETTINGS_MAX_AGE_MS ago, and on a fresh one before
   * refusing (the workers may have been deployed since). Nothing recorded while the ledger has no
   * epoch either: the cancel goes on, and the script answers too-late without writing anything.
   */
  async #checkWorkerSettings(): Promise<void> {
    let fresh = false;
    if (this.#ledgerSeen === undefined || this.#recorded === undefined || Date.now() - this.#recorded.readAt > WORKER_SETTINGS_MAX_AGE_MS) {
      await this.#call('cancel', () => this.#readLedger());
      fresh = true;
    }
    const differences = (): ReturnType<typeof settingDifferences> => {
      const recorded = this.#recorded!;
      return settingDifferences(recorded.record, this.#settings, recorded.ledgerHasEpoch);
    };
    if (differences().length > 0 && !fresh) await this.#call('cancel', () => this.#readLedger());
    const found = differences();
    if (found.length > 0) throw new VersionMismatchError(found, settingsRecorded(this.#recorded!.record));
  }

  /** The same epoch: the tick seen only rises. Another one: its tick is where this producer starts. */
  #sawLedger(epoch: string, tick: number): void {
    if (this.#ledgerSeen?.epoch === epoch) this.#ledgerSeen.tick = Math.max(this.#ledgerSeen.tick, tick);
    else this.#ledgerSeen = { epoch, tick };
  }

  /**
   * Cancels the transfer of `sequenceId` before any send of it may have been processed
   * (docs/contract.md section 4, "Cancelling a transfer"), `by: 'producer'`. Decided by the worker's own
   * transition script (shipped in this package), in the same atomic step that records a send in flight,
   * so a cancel and a send never both succeed. Resolves with
   * - `{ outcome: 'cancelled', state: 'cancelled', version, streamId }`: the transfer had no record yet
   *   (also a sequenceId never submitted), or was received or gated; `transfer.cancelled` was published
   *   and no send of that sequenceId will ever be made, by any job;
   * - `{ outcome: 'too-late', state, ledger? }`: a send was in flight at least once (or the ledger, with
   *   no epoch or recovering from a loss, cannot vouch that none was); nothing changed;
   * - `{ outcome: 'already-ended', state, version? }`: it had ended (`cancelled` for a second cancel).
   * Rejects with InvalidCancelError (`INVALID_CANCEL`, `.issues`) before Redis is contacted when the
   * sequenceId or reason break their rules; ProducerUnavailableError when Redis is unreachable (the
   * cancel may have taken effect: cancelling again is safe, and answers `already-ended`, `cancelled` if
   * it did); with `minReplicas`, NotReplicatedError (`.cancel`) when fewer replicas acknowledged the
   * cancel in time (cancel again); ProducerClosedError after close(); VersionMismatchError
   * (`VERSION_MISMATCH`, `.fields`) before anything is written when this package's transition script, its
   * `eventsStream` or its `ledger` settings differ from what the worker recorded at start-up, or when no
   * worker recorded them while the ledger has an epoch (a ledger without either answers too-late).
   */
  async cancel(sequenceId: string, options: CancelOptions): Promise<CancelResult> {
    const issues: PayloadIssue[] = [];
    if (typeof sequenceId !== 'string' || !SEQUENCE_ID.test(sequenceId)) {
      issues.push({ path: 'sequenceId', message: 'must be 1-128 of A-Z a-z 0-9 _ -' });
    }
    const parsed = EVENT_DATA_SCHEMAS['transfer.cancelled'].safeParse({
      reason: (options as Partial<CancelOptions> | undefined)?.reason,
      by: 'producer',
    });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) issues.push({ path: issue.path.join('.'), message: issue.message });
    }
    if (!parsed.success || issues.length > 0) throw new InvalidCancelError(issues);
    this.#assertOpen();
    await this.#checkWorkerSettings();
    const seen = this.#ledgerSeen as { epoch: string; tick: number } | undefined;
    const request = cancelRequest({ reason: parsed.data.reason, by: 'producer' });
    const encoded = encodeRequest(
      request,
      { eventSequenceId: sequenceId, indexMember: sequenceId, clock: undefined, epoch: seen?.epoch ?? '', seen: seen?.tick ?? 0 },
      this.#ledger,
      [],
    );
    const keys = transitionKeys(this.#prefix, this.#keys.events, sequenceId, request.from, request.to);
    const session = this.#minReplicas > 0 ? connectionSession(this.#redis, keys[0]!) : '';
    const reply = (await this.#call('cancel', () => this.#redis.eval(TRANSITION_LUA, keys.length, ...keys, encoded))) as unknown[];
    if (Number(reply[0]) === 1 && typeof reply[5] === 'string') this.#sawLedger(reply[5], Number(reply[4]));
    const result = cancelOutcome(sequenceId, decodeAnswer(reply));
    if (this.#minReplicas > 0 && result.outcome !== 'too-late') {
      // A cancel a failover loses would let the job send after all: `cancelled` (or `already-ended`,
      // the answer to a cancel again) only once the replicas have every write of this connection.
      const { acknowledged, required } = await replicaAcknowledgement(
        this.#redis,
        keys[0]!,
        this.#minReplicas,
        this.#replicaTimeoutMs,
        session,
      ).catch((error: unknown) => {
        throw this.#unavailable(
          'cancel',
          `waiting for replicas to acknowledge the cancel failed: ${(error as Error).message}`,
          false,
          error,
        );
      });
      if (acknowledged < required)
        throw new NotReplicatedError(jobIdFor(sequenceId), acknowledged, required, this.#replicaTimeoutMs, sequenceId);
    }
    return result;
  }

  /**
   * The transfer's typed events, oldest first: `for await (const event of producer.events(id))`. With
   * `{ follow: true }` it keeps going with new events and ends after the terminal one (or throws the
   * signal's reason when `signal` aborts). Switch on `event.event` and `event.data` has that type's shape.
   * Rejects with ProducerUnavailableError when Redis is unreachable.
   */
  events(sequenceId: string, options: EventsOptions = {}): AsyncGenerator<TransferEvent, void, undefined> {
    return this.#events(sequenceId, 'events', options.follow ? TERMINAL_EVENTS : undefined, options.signal, undefined);
  }

  /**
   * Resolves with the transfer's terminal event (broadcast, rejected, blocked, failed, expired,
   * cancelled: its `event` names which), past or future. Rejects with WaitTimeoutError after `timeoutMs`, or with
   * ProducerUnavailableError as soon as Redis is unreachable. `terminal` may name other types to wait for
   * (e.g. `new Set(['transfer.submitted'])`).
   */
  async waitForTerminal(sequenceId: string, timeoutMs: number, terminal: ReadonlySet<string> = TERMINAL_EVENTS): Promise<TransferEvent> {
    const deadline = Date.now() + timeoutMs;
    for await (const event of this.#events(sequenceId, 'waitForTerminal', terminal, undefined, deadline)) {
      if (terminal.has(event.event)) return event;
    }
    throw new WaitTimeoutError(sequenceId, timeoutMs);
  }

  /**
   * Stops following iterations and releases the producer's connections (a connection passed in is left
   * open). Never hangs: bounded by `submitTimeoutMs`, then the connection is dropped. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const reader of this.#readers) reader.disconnect();
    this.#readers.clear();
    const deadline = Date.now() + this.#timeoutMs;
    await bounded(this.#queue.close(), deadline, () => new Error('queue close timed out')).catch(() => undefined);
    this.#queue.off('error', this.#onError);
    this.#redis.off('ready', this.#onReady);
    if (!this.#ownsRedis) {
      this.#redis.off('error', this.#onError);
      return;
    }
    if (this.#redis.status === 'ready') {
      const quit = await bounded(this.#redis.quit(), deadline, () => new Error('quit timed out')).then(
        () => true,
        () => false,
      );
      if (quit) return;
    }
    this.#redis.disconnect();
  }

  async *#events(
    sequenceId: string,
    operation: ProducerOperation,
    stopAt: ReadonlySet<string> | undefined,
    signal: AbortSignal | undefined,
    deadline: number | undefined,
  ): AsyncGenerator<TransferEvent, void, undefined> {
    this.#assertOpen();
    signal?.throwIfAborted();
    const redis = this.#redis;
    // Remember where the stream ends before looking at the past, so nothing falls between the two.
    let cursor = '0-0';
    if (stopAt) {
      const last = await this.#call(operation, () => redis.xrevrange(this.#keys.events, '+', '-', 'COUNT', 1));
      cursor = last[0]?.[0] ?? '0-0';
    }
    const past = await this.#call(operation, () => readTransferEvents(redis, this.#keys, sequenceId));
    const seen = new Set<string>();
    for (const event of past) {
      seen.add(event.id);
      yield event;
      if (stopAt?.has(event.event)) return;
    }
    if (!stopAt) return;

    // Following: blocking reads on a connection of their own, so they never hold up the producer's.
    const reader = (redis as Redis).duplicate() as Client;
    reader.on('error', this.#onError);
    this.#readers.add(reader);
    const onAbort = (): void => reader.disconnect();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        signal?.throwIfAborted();
        if (this.#closed) throw new ProducerClosedError();
        const left = deadline === undefined ? BLOCK_SLICE_MS : deadline - Date.now();
        if (left <= 0) return;
        const block = Math.max(1, Math.min(BLOCK_SLICE_MS, left));
        let reply: Array<[string, Array<[string, string[]]>]> | null;
        try {
          await this.#whenReady(reader, Date.now() + this.#timeoutMs, operation);
          reply = (await bounded(
            reader.xread('COUNT', READ_COUNT, 'BLOCK', block, 'STREAMS', this.#keys.events, cursor),
            Date.now() + block + this.#timeoutMs,
            () => this.#unavailable(operation, `no answer to a blocking read within ${block + this.#timeoutMs} ms`, false),
          )) as typeof reply;
        } catch (error) {
          signal?.throwIfAborted();
          if (this.#closed) throw new ProducerClosedError();
          if (error instanceof ProducerError) throw error;
          throw this.#unavailable(operation, (error as Error).message, false, error);
        }
        for (const [, entries] of reply ?? []) {
          for (const entry of entries) {
            cursor = entry[0];
            if (seen.has(entry[0]) || fieldOf(entry[1], 'sequenceId') !== sequenceId) continue;
            const event = parseStreamEntry(entry);
            yield event;
            if (stopAt.has(event.event)) return;
          }
        }
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.#readers.delete(reader);
      reader.off('error', this.#onError);
      reader.disconnect();
    }
  }

  /** One non-blocking Redis call, bounded; connection trouble becomes ProducerUnavailableError. */
  async #call<T>(operation: ProducerOperation, run: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.#timeoutMs;
    await this.#whenReady(this.#redis, deadline, operation);
    try {
      return await bounded(run(), deadline, () => this.#unavailable(operation, `no answer within ${this.#timeoutMs} ms`, false));
    } catch (error) {
      if (error instanceof ProducerError || !isConnectionError(error)) throw error;
      throw this.#unavailable(operation, (error as Error).message, false, error);
    }
  }

  /** Resolves once `client` can take commands; rejects with ProducerUnavailableError at `deadline`. */
  async #whenReady(client: Client, deadline: number, operation: ProducerOperation): Promise<void> {
    if (isLive(client)) return;
    this.#assertOpen();
    if (client.status === 'end') throw this.#unavailable(operation, 'the connection is closed', false);
    if (client.status === 'wait') client.connect().catch(() => undefined);
    // Every caller waiting on this connection shares one wait (one 'ready' and one 'end' listener in all):
    // a listener pair per caller would pass the emitter's limit on a burst of submits (MaxListenersExceededWarning).
    const wait = this.#readiness.get(client) ?? this.#watchReadiness(client);
    wait.waiters += 1;
    try {
      await bounded(wait.ready, deadline, () => this.#unavailable(operation, `not connected within ${this.#timeoutMs} ms`, false));
    } catch (error) {
      if (error === CONNECTION_ENDED) throw this.#unavailable(operation, 'the connection is closed', false);
      throw error;
    } finally {
      wait.waiters -= 1;
      // The last caller to give up takes the listeners away (each caller has its own deadline).
      if (wait.waiters === 0) wait.release();
    }
  }

  /** The shared wait for `client`: settles on its 'ready' (or at once if live) or its 'end', then lets go of both. */
  #watchReadiness(client: Client): Readiness {
    const wait: Readiness = { ready: Promise.resolve(), waiters: 0, release: () => undefined };
    wait.ready = new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        wait.release();
        resolve();
      };
      const onEnd = (): void => {
        wait.release();
        reject(CONNECTION_ENDED);
      };
      wait.release = () => {
        client.off('ready', onReady);
        client.off('end', onEnd);
        if (this.#readiness.get(client) === wait) this.#readiness.delete(client);
      };
      client.once('ready', onReady);
      client.once('end', onEnd);
      this.#readiness.set(client, wait);
      // A Cluster may count as connected without a 'ready' of its own.
      if (isLive(client)) onReady();
    });
    return wait;
  }

  #unavailable(operation: ProducerOperation, detail: string, maybeEnqueued: boolean, cause?: unknown): ProducerUnavailableError {
    const last = this.#lastError && this.#lastError !== cause ? ` (last connection error: ${this.#lastError.message})` : '';
    const hint =
      operation === 'submit'
        ? `; ${maybeEnqueued ? 'the job may still be added' : 'nothing was enqueued'}, submitting again is safe`
        : operation === 'cancel'
          ? '; the cancel may have taken effect, cancelling again is safe (already-ended, state cancelled, if it did)'
          : '';
    return new ProducerUnavailableError(operation, `${detail}${last}${hint}`, { maybeEnqueued, cause: cause ?? this.#lastError });
  }

  #assertOpen(): void {
    if (this.#closed) throw new ProducerClosedError();
  }
}

function isLive(client: Client): boolean {
  return client.status === 'ready' || (client.status === 'connect' && !(client instanceof Redis));
}

/** `promise`, or `onTimeout()` thrown at `deadline` (the promise's own later failure is swallowed). */
function bounded<T>(promise: Promise<T>, deadline: number, onTimeout: () => Error): Promise<T> {
  promise.catch(() => undefined);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), Math.max(0, deadline - Date.now()));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
const CONNECTION_NAMES = new Set(['MaxRetriesPerRequestError', 'ConnectionClosedError', 'ClusterAllFailedError']);
const CONNECTION_MESSAGES =
  /Connection is closed|Stream isn't writeable|enableOfflineQueue|connect E[A-Z]+|Command timed out|Failed to refresh slots cache|LOADING|MASTERDOWN|READONLY/;

/** Trouble reaching Redis, as opposed to a refusal of the job itself. */
function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (
    (typeof code === 'string' && CONNECTION_CODES.has(code)) || CONNECTION_NAMES.has(error.name) || CONNECTION_MESSAGES.test(error.message)
  );
}

/** transition.lua's answer: `{1, version, streamId, fields}` or `{0, state, reason, leaseUntil, now, tombstone}`. */
function decodeAnswer(reply: unknown): CancelAnswer {
  const flat = reply as Array<string | number | null | undefined>;
  if (Number(flat[0]) === 1) return { ok: true, version: Number(flat[1]), streamId: String(flat[2] ?? '') };
  const reason = String(flat[2]) as Extract<CancelAnswer, { ok: false }>['reason'];
  const state = String(flat[1]) as Extract<CancelAnswer, { ok: false }>['state'];
  if (reason !== 'ended' || !flat[5]) return { ok: false, state, reason };
  const tombstone = String(flat[5]);
  const at = tombstone.lastIndexOf(':');
  return {
    ok: false,
    state,
    reason,
    ended: { state: tombstone.slice(0, at) as TransferStateName, version: Number(tombstone.slice(at + 1)) },
  };
}

function fieldOf(fields: string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
