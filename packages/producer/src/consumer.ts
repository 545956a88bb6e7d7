import { Redis, type Cluster } from 'ioredis';
import { EVENT_TYPES } from './catalog.ts';
import { parseStreamEntry, type TransferEvent } from './events.ts';
import { consumerEpochKey, consumerVersionKey, defaultDeadLetterStream, defaultEventsStream, seenKey } from './keys.ts';
import { SEQUENCE_ID } from './sequence-id.ts';

export { defaultDeadLetterStream } from './keys.ts';

type Client = Redis | Cluster;
type RawEntry = [id: string, fields: string[] | null];

export interface TransferEventsOptions {
  /**
   * An ioredis connection (Redis or Cluster; shared: never closed here) or a Redis URL (then owned and
   * closed by `close()`). Each `consume()` also opens a duplicate of it for its blocking reads.
   */
  connection: Redis | Cluster | string;
  /** QUEUE_PREFIX of the worker (default `bull`); the seen markers live under it too. */
  prefix?: string;
  /** EVENTS_STREAM of the worker (default `<prefix>:transfer-events`). */
  eventsStream?: string;
  /**
   * How long a handled event's seen marker is kept (default 7 days). An entry re-delivered, or a
   * duplicate published, after its marker expired is handed to the handler again. The epochs a group
   * handled per transfer (see `onNewEpoch`) are kept as long after the transfer's last such event.
   */
  seenTtlMs?: number;
}

/** Where `onError` was called from. New stages may come in minor versions: give a `switch` a default. */
export type ConsumeErrorStage =
  /**
   * The handler threw or rejected: the entry is not acknowledged and will be retried (pending/autoclaim),
   * up to `maxDeliveries` deliveries; then it goes to the dead-letter (reason `'dead-lettered'`).
   */
  | 'handler'
  /**
   * The entry is not a valid event, or of a type this version does not know: it goes to the dead-letter
   * and is acknowledged. Or it was trimmed from the stream before it was handled (nothing left to keep):
   * acknowledged, skipped.
   */
  | 'parse'
  /** A Redis command failed: the loop waits a moment and goes on. */
  | 'redis'
  /**
   * Not a failure: the entry's transfer started a new life after the ledger was lost (a `NewEpochError`,
   * see `ConsumeOptions.onNewEpoch`), reported here when no `onNewEpoch` is given; or `onNewEpoch` threw.
   * The entry is handed to the handler as usual.
   */
  | 'epoch'
  /**
   * The entry's version is lower than one the group already handled for the transfer in the same life
   * (a `StaleVersionError`): an older event arriving late, e.g. retried after newer ones were handled.
   * The entry is handed to the handler as usual.
   */
  | 'version'
  /** The dead-letter could not take an entry (its XADD failed, or the callback threw): the entry stays pending and is tried again. */
  | 'dead-letter';

/** Why `onError` was called: one reason per kind of report. New reasons may come in minor versions. */
export type ConsumeErrorReason =
  /** Stage `'parse'`: not a valid event (missing or invalid fields, data or metadata not JSON, data not of its type's shape). */
  | 'malformed'
  /** Stage `'parse'`: an `event` type this version of the package does not know (a newer worker's). */
  | 'unknown-type'
  /** Stage `'parse'`: the entry was trimmed from the stream before it was handled. */
  | 'trimmed'
  /** Stage `'handler'`: the handler threw; the entry will be delivered again. */
  | 'handler'
  /** Stage `'handler'`: the entry reached `maxDeliveries` without its handler succeeding; it went to the dead-letter. */
  | 'dead-lettered'
  /** Stage `'version'`: a version lower than one the group handled for the transfer (same epoch). */
  | 'stale-version'
  /** Stage `'epoch'`: the transfer started a new life (or `onNewEpoch` threw). */
  | 'new-epoch'
  /** Stage `'dead-letter'`: the dead-letter refused the entry; it stays pending. */
  | 'dead-letter-failed'
  /** Stage `'redis'`: a Redis command of the loop failed. */
  | 'redis';

export interface ConsumeErrorInfo {
  stage: ConsumeErrorStage;
  /** Why, more precisely than `stage`. */
  reason: ConsumeErrorReason;
  /** The stream entry concerned, when there is one. */
  entryId?: string;
  /** The entry's event type, when it has a well-formed one (known or not). */
  type?: string;
  /** The entry's sequenceId, when it has a well-formed one (empty for events of no transfer). */
  sequenceId?: string;
  /** How many times Redis delivered the entry to the group, this delivery included (XPENDING's counter). */
  deliveries?: number;
  /** Where the entry went when it was moved to the dead-letter: the stream's name, or `'callback'`. */
  deadLetter?: string;
}

/** Why an entry went to the dead-letter. */
export type DeadLetterReason =
  /** Its handler did not succeed in `maxDeliveries` deliveries. */
  | 'max-deliveries'
  /** Not a valid event. */
  | 'malformed'
  /** An event type this version of the package does not know. */
  | 'unknown-type';

/** An entry handed to a dead-letter callback. */
export interface DeadLetterEntry {
  /** Its id in the events stream. */
  id: string;
  /** Its fields as Redis holds them: name, value, name, value, … */
  fields: string[];
  /** The event, when the entry is one (reason `'max-deliveries'`). */
  event?: TransferEvent;
}

/** What a dead-letter callback is told besides the entry. */
export interface DeadLetterInfo {
  reason: DeadLetterReason;
  /** How many times Redis delivered the entry to the group (XPENDING's counter). */
  deliveries: number;
  group: string;
  consumer: string;
  /** The events stream the entry came from. */
  stream: string;
  /** The handler's last error (`'max-deliveries'`), or what made the entry invalid. */
  error: Error;
}

/** A dead-letter callback: the entry is acknowledged once it resolves; if it throws, the entry stays pending. */
export type DeadLetterHandler = (entry: DeadLetterEntry, info: DeadLetterInfo) => void | Promise<void>;

export interface ConsumeOptions {
  /** The consumer group: every group gets every event; the consumers of one group share them. */
  group: string;
  /** This consumer's name within the group (stable across restarts, so it picks up its own pending entries). */
  consumer: string;
  /**
   * Where a group that does not exist yet starts: `$` (default: only events published from now on),
   * `0` (the whole stream as kept) or an entry id. Ignored when the group exists.
   */
  from?: string;
  /** Entries read (and claimed) at a time (default 100). */
  batch?: number;
  /** Longest blocking read (default 5000 ms). */
  blockMs?: number;
  /**
   * Entries pending longer than this with any consumer of the group (a crashed one, or a handler that
   * threw) are claimed and handled again (default 60000 ms); also how often this consumer looks for them.
   */
  claimIdleMs?: number;
  /**
   * How many times an entry may be delivered to the group (Redis counts each delivery: the first read,
   * then each claim or re-read, XPENDING's delivery counter) before it goes to the dead-letter when its
   * handler fails (default 10). An entry already delivered more often (its consumers crashed in the
   * handler) goes there without calling the handler again.
   */
  maxDeliveries?: number;
  /**
   * Where entries go that no handler could take: malformed ones, ones of an unknown event type, and
   * ones whose handler failed `maxDeliveries` times. A stream name (XADD of the entry's own fields plus
   * `deadLetter.reason`, `deadLetter.deliveries`, `deadLetter.group`, `deadLetter.consumer`,
   * `deadLetter.entryId`, `deadLetter.stream`, `deadLetter.error` and `deadLetter.at`, in one MULTI with
   * the XACK), or a callback (the entry is acknowledged once it resolved). Default: the stream
   * `<events stream>:dead` (`defaultDeadLetterStream`). An entry is acknowledged only once its
   * dead-letter took it: if that fails, it stays pending and is tried again.
   */
  deadLetter?: string | DeadLetterHandler;
  /**
   * Called for every handler failure, entry sent to the dead-letter, unparsable entry, stale version and
   * Redis error, with its `stage` and `reason`; the loop never stops for them. Without `onNewEpoch`, also
   * for every transfer that started a new life (stage `'epoch'`, a `NewEpochError` whose message says
   * the transfer started a new life after the ledger was lost). Default: one line on stderr
   * (`console.error`) per report, naming the entry by id, type and sequenceId, never its data.
   */
  onError?: (error: Error, info: ConsumeErrorInfo) => void;
  /**
   * Called, before the handler, when an event carries an epoch (`event.epoch`) and the group handled
   * events of its sequenceId under another epoch before, but none under this one: the worker's Redis lost
   * its data and the transfer was enqueued again, so it lives a second life whose versions start again at
   * 1. Those events are not duplicates: each `(epoch, sequenceId, version)` is handed to the handler. Reset
   * what you keep per transfer here. `previous` is the epoch the group handled most recently for it.
   *
   * Once per new epoch of a transfer per group, as long as one of its events was handled: a handler that
   * throws on the first event of the new epoch has it reported again when retried. Events without an epoch
   * neither trigger nor set it. An `onNewEpoch` that throws is reported to `onError` (stage `'epoch'`),
   * and the event is handled anyway. Without `onNewEpoch`, the report goes to `onError` (stage `'epoch'`).
   */
  onNewEpoch?: (info: NewEpochInfo) => void;
}

/** What `onNewEpoch` is told: the transfer, the epoch it was known under, the new one and the entry. */
export interface NewEpochInfo {
  sequenceId: string;
  /** The epoch of the events of this transfer the group handled most recently. */
  previous: string;
  /** The event's own epoch: the transfer's new life. */
  epoch: string;
  /** The stream entry of the event (handed to the handler next). */
  entryId: string;
}

/** What `onError` gets (stage `'epoch'`) when a transfer started a new life and no `onNewEpoch` is given. */
export class NewEpochError extends Error {
  readonly code = 'NEW_EPOCH';
  readonly sequenceId: string;
  readonly previous: string;
  readonly epoch: string;
  readonly entryId: string;
  constructor(info: NewEpochInfo) {
    super(
      `transfer ${info.sequenceId} started a new life after the ledger was lost: epoch ${info.epoch} (was ${info.previous}), entry ${info.entryId}`,
    );
    this.name = 'NewEpochError';
    this.sequenceId = info.sequenceId;
    this.previous = info.previous;
    this.epoch = info.epoch;
    this.entryId = info.entryId;
  }
}

/** What `onError` gets (stage `'version'`) for an event whose version is lower than one the group handled for its transfer. */
export class StaleVersionError extends Error {
  readonly code = 'STALE_VERSION';
  readonly sequenceId: string;
  readonly version: number;
  /** The highest version of the transfer (in the event's life) the group handled before. */
  readonly highest: number;
  readonly epoch: string | undefined;
  readonly entryId: string;
  constructor(info: { sequenceId: string; version: number; highest: number; epoch: string | undefined; entryId: string }) {
    const life = info.epoch === undefined ? '' : ` (epoch ${info.epoch})`;
    super(
      `transfer ${info.sequenceId}${life}: version ${info.version} after version ${info.highest} was handled, entry ${info.entryId}; handled all the same`,
    );
    this.name = 'StaleVersionError';
    this.sequenceId = info.sequenceId;
    this.version = info.version;
    this.highest = info.highest;
    this.epoch = info.epoch;
    this.entryId = info.entryId;
  }
}

/** What `onError` gets (stage `'handler'`, reason `'dead-lettered'`) when an entry went to the dead-letter; `cause` is the handler's last error. */
export class DeadLetteredError extends Error {
  readonly code = 'DEAD_LETTERED';
  readonly entryId: string;
  readonly deliveries: number;
  /** The dead-letter stream's name, or `'callback'`. */
  readonly deadLetter: string;
  constructor(entryId: string, deliveries: number, deadLetter: string, cause?: unknown) {
    super(
      `entry ${entryId} went to the dead-letter ${deadLetter} after ${deliveries} deliveries`,
      cause === undefined ? undefined : { cause },
    );
    this.name = 'DeadLetteredError';
    this.entryId = entryId;
    this.deliveries = deliveries;
    this.deadLetter = deadLetter;
  }
}

/** The running consumer of one `consume()` call. */
export interface ConsumeHandle {
  /**
   * Stops gracefully: the batch being handled is finished and acknowledged, no new entries are read,
   * the blocking connection is closed. Resolves when the loop has ended. Idempotent.
   */
  stop(): Promise<void>;
  /** Resolves when the loop has ended (after `stop()` or `close()`). */
  readonly done: Promise<void>;
}

export type TransferEventHandler = (event: TransferEvent, entryId: string) => Promise<void>;

/** One event of a batch handed to a `consumeBatches` handler. */
export interface BatchedTransferEvent {
  event: TransferEvent;
  /** Its id in the events stream. */
  entryId: string;
}

/**
 * A `consumeBatches` handler: the events of one read to handle, in stream order. When it resolves they
 * are all recorded and acknowledged together; when it throws, each counts as a failed handler.
 */
export type TransferEventBatchHandler = (events: BatchedTransferEvent[]) => Promise<void>;

/** The handler a loop calls: one event at a time, or a read's events at once. */
type LoopHandler = { one: TransferEventHandler; batch?: undefined } | { one?: undefined; batch: TransferEventBatchHandler };

/** Default lifetime of a seen marker. */
export const DEFAULT_SEEN_TTL_MS = 7 * 24 * 3_600_000;

/** Default `maxDeliveries`: deliveries of an entry whose handler fails before it goes to the dead-letter. */
export const DEFAULT_MAX_DELIVERIES = 10;

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;
/** The blocking read is also bounded by this, after blockMs, in case the connection silently hangs. */
const BLOCK_GRACE_MS = 10_000;

/**
 * Every event of the worker's stream, through a Redis consumer group: at least once per group, handed
 * to the handler once per (epoch, sequenceId, version) per group as long as the seen marker is kept.
 *
 * - Entries are acknowledged (XACK) only after the handler resolved, in one MULTI with the entry's seen
 *   marker (`SET <prefix>:events:seen:<group>:<sequenceId>:<version>[:<epoch>] NX PX seenTtlMs`; an
 *   event without an epoch has the marker it always had) and, for an event with an epoch, the epoch
 *   recorded for its transfer (`HSETNX <prefix>:consumer:<group>:epoch:<sequenceId> <epoch> <ms>`).
 * - Before handling, an entry whose marker exists is acknowledged without calling the handler: a
 *   duplicate publication of the same (epoch, sequenceId, version), or a redelivery of an entry handled
 *   and recorded. Events without a sequenceId (`reconcile.completed`) are keyed by their entry id.
 * - An event whose epoch the group has not handled for its transfer, while it handled another, is a new
 *   life of the transfer (the ledger was lost): reported (`onNewEpoch`, else `onError`), then handled.
 * - A handler that throws leaves its entry pending; it is retried once idle for `claimIdleMs` (by this
 *   consumer or another of the group, XAUTOCLAIM). A consumer that crashes after its handler ran but
 *   before the marker was written has its entry handled again: that is the at-least-once part.
 * - Redis counts the deliveries of each entry (XPENDING). One whose handler fails on its
 *   `maxDeliveries`-th delivery, or that comes a delivery past it, goes to the dead-letter (a stream,
 *   `<events stream>:dead` by default, or a callback) and is acknowledged; so do entries that are not
 *   events of a type this version knows. Nothing is acknowledged that no handler or dead-letter took,
 *   except entries trimmed from the stream (reported).
 * - A version lower than one the group handled for the transfer in the same life is reported (stage
 *   `'version'`), then handled: the group keeps the highest version it handled per transfer and epoch.
 * - Two consumers of one group handling two copies of one (sequenceId, version) at the same moment may
 *   both call their handler (the marker is written after the handler, never before).
 *
 * On Redis Cluster the stream and the markers must share a slot: a hash-tagged prefix (as BullMQ needs
 * anyway, e.g. `{bull}`) and the default stream name.
 */
export class TransferEvents {
  readonly #redis: Client;
  readonly #ownsRedis: boolean;
  readonly #prefix: string;
  readonly #stream: string;
  readonly #seenTtlMs: number;
  readonly #loops = new Set<ConsumeHandle>();
  #closed = false;

  constructor(options: TransferEventsOptions) {
    const seenTtlMs = options.seenTtlMs ?? DEFAULT_SEEN_TTL_MS;
    if (!Number.isSafeInteger(seenTtlMs) || seenTtlMs <= 0) throw new RangeError(`seenTtlMs must be a positive integer, got ${seenTtlMs}`);
    this.#seenTtlMs = seenTtlMs;
    this.#ownsRedis = typeof options.connection === 'string';
    // A consumer outlives outages: its own connection keeps retrying instead of failing commands.
    this.#redis =
      typeof options.connection === 'string' ? new Redis(options.connection, { maxRetriesPerRequest: null }) : options.connection;
    this.#prefix = options.prefix ?? 'bull';
    this.#stream = options.eventsStream ?? defaultEventsStream(this.#prefix);
  }

  /** The stream this reads. */
  get stream(): string {
    return this.#stream;
  }

  /**
   * Starts a consumer loop for `group`/`consumer` and returns at once. The group is created (with the
   * stream, if need be) at `from`; this consumer's own pending entries are handled first, then new ones,
   * and every `claimIdleMs` the group's entries idle for that long are claimed.
   */
  consume(options: ConsumeOptions, handler: TransferEventHandler): ConsumeHandle {
    return this.#start(options, { one: handler });
  }

  /**
   * As `consume()`, but the handler gets the events of each read at once (those it would have been
   * handed one by one, in the same order, each after its `onNewEpoch` and stale-version reports), and
   * they are recorded and acknowledged together, in one MULTI, once it resolved. When it throws, every
   * one of them counts as a failed handler (retried, or dead-lettered at `maxDeliveries`). Fewer round
   * trips per event, for a handler that can take many events in one step.
   */
  consumeBatches(options: ConsumeOptions, handler: TransferEventBatchHandler): ConsumeHandle {
    return this.#start(options, { batch: handler });
  }

  #start(options: ConsumeOptions, handler: LoopHandler): ConsumeHandle {
    if (this.#closed) throw new Error('TransferEvents is closed');
    const settings = {
      group: nonEmpty(options.group, 'group'),
      consumer: nonEmpty(options.consumer, 'consumer'),
      from: options.from ?? '$',
      batch: positiveInteger(options.batch ?? 100, 'batch'),
      blockMs: positiveInteger(options.blockMs ?? 5_000, 'blockMs'),
      claimIdleMs: positiveInteger(options.claimIdleMs ?? 60_000, 'claimIdleMs'),
      maxDeliveries: positiveInteger(options.maxDeliveries ?? DEFAULT_MAX_DELIVERIES, 'maxDeliveries'),
      deadLetter: deadLetterOf(options.deadLetter, this.#stream),
      onError: options.onError ?? defaultOnError(options.group, options.consumer),
      onNewEpoch: options.onNewEpoch,
    };
    const keys = {
      seen: seenKey(this.#prefix, settings.group),
      epoch: consumerEpochKey(this.#prefix, settings.group),
      version: consumerVersionKey(this.#prefix, settings.group),
    };
    const loop = new ConsumerLoop(this.#redis, this.#stream, keys, this.#seenTtlMs, settings, handler);
    const handle: ConsumeHandle = {
      stop: async () => {
        await loop.stop();
        this.#loops.delete(handle);
      },
      done: loop.done,
    };
    this.#loops.add(handle);
    return handle;
  }

  /** Stops every loop (gracefully, as `stop()`), then closes the connection if it was opened from a URL. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#loops].map((handle) => handle.stop()));
    if (!this.#ownsRedis) return;
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }
}

interface LoopSettings {
  group: string;
  consumer: string;
  from: string;
  batch: number;
  blockMs: number;
  claimIdleMs: number;
  maxDeliveries: number;
  deadLetter: string | DeadLetterHandler;
  onError: (error: Error, info: ConsumeErrorInfo) => void;
  onNewEpoch: ((info: NewEpochInfo) => void) | undefined;
}

/** What a report says besides its stage and reason. */
type ReportDetail = Omit<ConsumeErrorInfo, 'stage' | 'reason'>;

/** The highest version handled per life of one transfer: epoch (`''` for none) -> version. */
type HighestVersions = Map<string, number>;

/** Epoch -> when the group first handled an event of it (ms), for one transfer. */
type KnownEpochs = Map<string, number>;

/** An entry of a read on its way to the handler, with what recording it takes. */
interface Ready {
  id: string;
  fields: string[];
  event: TransferEvent;
  marker: string;
  /** Its deliveries to the group, this one included. */
  count: number;
  life: { epoch: string; known: KnownEpochs } | undefined;
  highest: HighestVersions | undefined;
}

class ConsumerLoop {
  readonly done: Promise<void>;
  readonly #redis: Client;
  readonly #blocker: Client;
  readonly #stream: string;
  readonly #seenPrefix: string;
  readonly #epochPrefix: string;
  readonly #versionPrefix: string;
  readonly #seenTtlMs: number;
  readonly #s: LoopSettings;
  readonly #handler: LoopHandler;
  #stopping = false;
  /** True while waiting on the blocking read (nothing delivered is being handled). */
  #blocked = false;
  /** The group vanished under this consumer (NOGROUP): it is made again from the stream's start. */
  #lostGroup = false;
  #wakeRetry: (() => void) | undefined;

  constructor(
    redis: Client,
    stream: string,
    keys: { seen: string; epoch: string; version: string },
    seenTtlMs: number,
    settings: LoopSettings,
    handler: LoopHandler,
  ) {
    this.#redis = redis;
    this.#stream = stream;
    this.#seenPrefix = keys.seen;
    this.#epochPrefix = keys.epoch;
    this.#versionPrefix = keys.version;
    this.#seenTtlMs = seenTtlMs;
    this.#s = settings;
    this.#handler = handler;
    // Blocking reads get a connection of their own, so they never hold up the other commands.
    this.#blocker = (redis as Redis).duplicate() as Client;
    this.#blocker.on('error', () => undefined);
    this.done = this.#run().finally(() => this.#blocker.disconnect());
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wakeRetry?.();
    // Interrupting the blocking read loses nothing: an entry delivered to a dropped read stays pending
    // with this consumer and is handled on its next start (or claimed by another consumer).
    if (this.#blocked) this.#blocker.disconnect();
    await this.done;
  }

  #report(error: unknown, stage: ConsumeErrorStage, reason: ConsumeErrorReason, detail: ReportDetail = {}): void {
    const info: ConsumeErrorInfo = { stage, reason };
    // Only what is known, so an info compares equal to a literal of its known fields.
    for (const [key, value] of Object.entries(detail)) if (value !== undefined) Object.assign(info, { [key]: value });
    try {
      this.#s.onError(error instanceof Error ? error : new Error(String(error)), info);
    } catch {
      // A throwing onError must not end the loop.
    }
  }

  async #run(): Promise<void> {
    let failures = 0;
    // Each phase runs until it is done; a Redis error reports, waits, and resumes the phase.
    let phase: 'group' | 'pending' | 'new' = 'group';
    let pendingCursor = '0';
    let nextClaimAt = 0;
    while (!this.#stopping) {
      try {
        if (phase === 'group') {
          await this.#createGroup();
          phase = 'pending';
        } else if (phase === 'pending') {
          // This consumer's own entries delivered before (a previous run that stopped or crashed).
          const entries = await this.#read(this.#redis, pendingCursor, undefined);
          if (entries.length === 0) phase = 'new';
          else {
            // The cursor moves past entries whose handler failed: they wait for autoclaim.
            pendingCursor = entries[entries.length - 1]![0];
            await this.#handleBatch(entries, false);
          }
        } else {
          if (Date.now() >= nextClaimAt) {
            await this.#claimIdle();
            nextClaimAt = Date.now() + Math.max(RETRY_MIN_MS, this.#s.claimIdleMs);
            continue;
          }
          const block = Math.max(1, Math.min(this.#s.blockMs, nextClaimAt - Date.now()));
          this.#blocked = true;
          let entries: RawEntry[];
          try {
            entries = await this.#read(this.#blocker, '>', block);
          } finally {
            this.#blocked = false;
          }
          await this.#handleBatch(entries, true);
        }
        failures = 0;
      } catch (error) {
        if (this.#stopping) break;
        this.#report(error, 'redis', 'redis');
        if (/NOGROUP/.test((error as Error).message)) {
          // The stream or its group is gone (Redis lost its data, or the stream was deleted): make the
          // group again, from the start of the stream, since every entry there is newer than the loss.
          this.#lostGroup = true;
          phase = 'group';
          pendingCursor = '0';
        }
        failures++;
        await this.#pause(Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** Math.min(failures, 6)));
      }
    }
  }

  async #createGroup(): Promise<void> {
    try {
      await this.#redis.xgroup('CREATE', this.#stream, this.#s.group, this.#lostGroup ? '0' : this.#s.from, 'MKSTREAM');
    } catch (error) {
      if (!/BUSYGROUP/.test((error as Error).message)) throw error;
    }
  }

  /** XREADGROUP from `id` (`>` for new entries, else this consumer's pending ones after `id`). */
  async #read(client: Client, id: string, blockMs: number | undefined): Promise<RawEntry[]> {
    const args: Array<string | number> = ['GROUP', this.#s.group, this.#s.consumer, 'COUNT', this.#s.batch];
    if (blockMs !== undefined) args.push('BLOCK', blockMs);
    args.push('STREAMS', this.#stream, id);
    // The typed command, not call(): ioredis turns a RESP3 map reply into the RESP2 shape.
    const xreadgroup = client.xreadgroup.bind(client) as unknown as (
      ...args: Array<string | number>
    ) => Promise<Array<[string, RawEntry[]]> | null>;
    const call = xreadgroup(...args);
    const reply = blockMs === undefined ? await call : await bounded(call, blockMs + BLOCK_GRACE_MS, client);
    return reply?.[0]?.[1] ?? [];
  }

  /** XAUTOCLAIM every entry of the group idle for claimIdleMs, a batch at a time, handling each batch. */
  async #claimIdle(): Promise<void> {
    let cursor = '0-0';
    do {
      const reply = (await this.#redis.call(
        'XAUTOCLAIM',
        this.#stream,
        this.#s.group,
        this.#s.consumer,
        this.#s.claimIdleMs,
        cursor,
        'COUNT',
        this.#s.batch,
      )) as [string, RawEntry[], string[]?];
      cursor = reply[0];
      // Redis 7 lists entries deleted from the stream (trimmed) apart, and drops them from the pending list.
      for (const id of reply[2] ?? [])
        this.#report(new Error(`entry ${id} was trimmed from the stream before it was handled`), 'parse', 'trimmed', { entryId: id });
      await this.#handleBatch(reply[1], false);
    } while (cursor !== '0-0' && !this.#stopping);
  }

  /**
   * Handles a batch in order; finishes it even when stop() is called meanwhile. `fresh`: read as new
   * entries (`>`), so delivered once; else (own pending, claimed) Redis's delivery counter is looked up.
   */
  async #handleBatch(entries: RawEntry[], fresh: boolean): Promise<void> {
    if (entries.length === 0) return;
    const deliveries = fresh ? undefined : await this.#deliveries(entries.map(([id]) => id));
    const countOf = (id: string): number => deliveries?.get(id) ?? 1;
    const parsed: Array<{ id: string; fields: string[]; event: TransferEvent; marker: string }> = [];
    const trimmed: string[] = [];
    for (const [id, fields] of entries) {
      if (fields === null) {
        this.#report(new Error(`entry ${id} was trimmed from the stream before it was handled`), 'parse', 'trimmed', { entryId: id });
        trimmed.push(id);
        continue;
      }
      let event: TransferEvent;
      try {
        event = parseStreamEntry([id, fields]);
      } catch (error) {
        // Retrying cannot help: kept in the dead-letter, then acknowledged.
        await this.#invalid(id, fields, error, countOf(id));
        continue;
      }
      parsed.push({ id, fields, event, marker: this.#marker(event) });
    }
    // Entries that vanished are acknowledged: there is nothing left to keep.
    if (trimmed.length > 0) await this.#redis.xack(this.#stream, this.#s.group, ...trimmed);
    if (parsed.length === 0) return;

    const seen = await this.#seen(parsed.map((p) => p.marker));
    // What the group handled so far of the transfers of the new events; kept up to date below.
    const { epochs, versions } = await this.#transfers(
      parsed.filter((p, i) => seen[i] === null && p.event.sequenceId !== '').map((p) => p.event.sequenceId),
    );
    const handled = new Set<string>();
    const reported = new Set<string>();
    // Batches only: the events for the handler, and copies of one of them further on in the read.
    const ready: Ready[] = [];
    const copies: string[] = [];
    const seenBefore: string[] = [];
    for (const [i, { id, fields, event, marker }] of parsed.entries()) {
      if (seen[i] !== null || handled.has(marker)) {
        // Handled before under this (epoch, sequenceId, version): acknowledge without calling the handler
        // (a copy of an event of this read once that event is recorded).
        if (this.#handler.batch === undefined) await this.#redis.xack(this.#stream, this.#s.group, id);
        else (seen[i] !== null ? seenBefore : copies).push(id);
        continue;
      }
      const count = countOf(id);
      if (count > this.#s.maxDeliveries) {
        // Delivered past the cap without ever being recorded: its consumers died in the handler.
        const error = new Error(`entry ${id} was delivered ${count} times without its handler succeeding`);
        await this.#exhausted({ id, fields, event }, count, error);
        continue;
      }
      // The transfer's life this event belongs to, when it carries an epoch.
      const life = tracksEpoch(event)
        ? { epoch: event.epoch, known: epochs.get(event.sequenceId) ?? new Map<string, number>() }
        : undefined;
      if (life !== undefined) {
        epochs.set(event.sequenceId, life.known);
        const previous = latest(life.known);
        const name = `${event.sequenceId}:${life.epoch}`;
        // A new life: reported once per batch (recording the epoch below makes it once for good).
        if (previous !== undefined && !life.known.has(life.epoch) && !reported.has(name)) {
          reported.add(name);
          this.#newEpoch({ sequenceId: event.sequenceId, previous, epoch: life.epoch, entryId: id });
        }
      }
      // The highest versions handled per life of the transfer, when it is one (not reconcile.completed).
      const highest = event.sequenceId === '' ? undefined : (versions.get(event.sequenceId) ?? new Map<string, number>());
      if (highest !== undefined) {
        versions.set(event.sequenceId, highest);
        const before = highest.get(event.epoch ?? '');
        if (before !== undefined && event.version < before) {
          const error = new StaleVersionError({
            sequenceId: event.sequenceId,
            version: event.version,
            highest: before,
            epoch: event.epoch,
            entryId: id,
          });
          this.#report(error, 'version', 'stale-version', { entryId: id, ...identity(event), deliveries: count });
        }
      }
      const item: Ready = { id, fields, event, marker, count, life, highest };
      if (this.#handler.batch !== undefined) {
        // Counted as handled for the rest of the read, as it will be once the batch is recorded.
        ready.push(item);
        handled.add(marker);
        this.#remember(item);
        continue;
      }
      try {
        await this.#handler.one(event, id);
      } catch (error) {
        await this.#failed(item, error);
        continue;
      }
      handled.add(marker);
      await this.#record([item], []);
      this.#remember(item);
    }
    if (seenBefore.length > 0) await this.#redis.xack(this.#stream, this.#s.group, ...seenBefore);
    if (this.#handler.batch === undefined || ready.length === 0) return;
    try {
      await this.#handler.batch(ready.map(({ event, id }) => ({ event, entryId: id })));
    } catch (error) {
      // The copies stay pending with them, and are acknowledged once one of them is recorded.
      for (const item of ready) await this.#failed(item, error);
      return;
    }
    await this.#record(ready, copies);
  }

  /** A handler failed on an entry: reported, or to the dead-letter on its last delivery. */
  async #failed({ id, fields, event, count }: Ready, error: unknown): Promise<void> {
    if (count >= this.#s.maxDeliveries) await this.#exhausted({ id, fields, event }, count, error);
    else this.#report(error, 'handler', 'handler', { entryId: id, ...identity(event), deliveries: count });
  }

  /**
   * Records handled entries and acknowledges them (with `copies`, entries acknowledged without their
   * own handler), in one MULTI: each one's seen marker, its transfer's epoch and highest version.
   */
  async #record(items: Ready[], copies: string[]): Promise<void> {
    const record = this.#redis.multi();
    for (const { id, event, marker, life, highest } of items) {
      record.set(marker, id, 'PX', this.#seenTtlMs, 'NX');
      if (life !== undefined) {
        const key = `${this.#epochPrefix}:${event.sequenceId}`;
        record.hsetnx(key, life.epoch, String(Date.now())).pexpire(key, this.#seenTtlMs);
      }
      if (highest !== undefined) {
        // GT: never lowers the version recorded by a consumer that handled a later one meanwhile.
        const key = `${this.#versionPrefix}:${event.sequenceId}`;
        record.zadd(key, 'GT', event.version, event.epoch ?? '').pexpire(key, this.#seenTtlMs);
      }
    }
    record.xack(this.#stream, this.#s.group, ...items.map(({ id }) => id), ...copies);
    await record.exec().then(execResult);
  }

  /** What the rest of a read knows once an entry is handled: its transfer's epoch and highest version. */
  #remember({ event, life, highest }: Ready): void {
    if (life !== undefined && !life.known.has(life.epoch)) life.known.set(life.epoch, Date.now());
    if (highest !== undefined) highest.set(event.epoch ?? '', Math.max(event.version, highest.get(event.epoch ?? '') ?? 0));
  }

  /** An entry that is no event of a type this version knows: reported, then kept in the dead-letter. */
  async #invalid(id: string, fields: string[], error: unknown, deliveries: number): Promise<void> {
    const raw = rawIdentity(fields);
    const reason = raw.type !== undefined && !(EVENT_TYPES as readonly string[]).includes(raw.type) ? 'unknown-type' : 'malformed';
    const where = await this.#deadLetter({ id, fields }, reason, deliveries, error);
    this.#report(error, 'parse', reason, { entryId: id, ...raw, deliveries, deadLetter: where });
  }

  /** An event whose handler did not succeed within maxDeliveries: to the dead-letter, reported. */
  async #exhausted(entry: DeadLetterEntry & { event: TransferEvent }, deliveries: number, error: unknown): Promise<void> {
    const where = await this.#deadLetter(entry, 'max-deliveries', deliveries, error);
    // Not taken: the failure was reported (stage 'dead-letter'), the entry stays pending and comes again.
    if (where === undefined) return;
    const report = new DeadLetteredError(entry.id, deliveries, where, error);
    this.#report(report, 'handler', 'dead-lettered', { entryId: entry.id, ...identity(entry.event), deliveries, deadLetter: where });
  }

  /**
   * Hands an entry to the dead-letter and acknowledges it; resolves with where it went (the stream's
   * name, or `'callback'`), or undefined when the dead-letter failed (reported; the entry stays pending).
   */
  async #deadLetter(entry: DeadLetterEntry, reason: DeadLetterReason, deliveries: number, error: unknown): Promise<string | undefined> {
    const target = this.#s.deadLetter;
    const cause = error instanceof Error ? error : new Error(String(error));
    try {
      if (typeof target === 'string') {
        const fields = [
          ...entry.fields,
          ...['deadLetter.reason', reason, 'deadLetter.deliveries', String(deliveries)],
          ...['deadLetter.group', this.#s.group, 'deadLetter.consumer', this.#s.consumer],
          ...['deadLetter.entryId', entry.id, 'deadLetter.stream', this.#stream],
          ...['deadLetter.error', `${cause.name}: ${cause.message}`.slice(0, 1_000), 'deadLetter.at', new Date().toISOString()],
        ];
        await this.#redis
          .multi()
          .xadd(target, '*', ...fields)
          .xack(this.#stream, this.#s.group, entry.id)
          .exec()
          .then(execResult);
        return target;
      }
      const info: DeadLetterInfo = {
        reason,
        deliveries,
        group: this.#s.group,
        consumer: this.#s.consumer,
        stream: this.#stream,
        error: cause,
      };
      await target(entry, info);
      await this.#redis.xack(this.#stream, this.#s.group, entry.id);
      return 'callback';
    } catch (failure) {
      const raw = entry.event === undefined ? rawIdentity(entry.fields) : identity(entry.event);
      this.#report(failure, 'dead-letter', 'dead-letter-failed', { entryId: entry.id, ...raw, deliveries });
      return undefined;
    }
  }

  /** Redis's delivery counter of each entry still pending with the group (XPENDING, pipelined). */
  async #deliveries(ids: string[]): Promise<Map<string, number>> {
    const pipeline = this.#redis.pipeline();
    for (const id of ids) pipeline.xpending(this.#stream, this.#s.group, id, id, 1);
    const replies = await pipeline.exec();
    if (replies === null) throw new Error('pipeline was aborted');
    const counts = new Map<string, number>();
    for (const [error, reply] of replies) {
      if (error) throw error;
      // [[id, consumer, idle ms, deliveries]], or [] when no longer pending (another consumer acknowledged it).
      const [pending] = reply as Array<[string, string, number, number]>;
      if (pending !== undefined) counts.set(pending[0], Number(pending[3]));
    }
    return counts;
  }

  /**
   * The seen marker of an event: its (sequenceId, version), or its entry id for events of no transfer;
   * followed by `:<epoch>` when it has one (a sequenceId never has `:`, so this never meets the old form).
   */
  #marker(event: TransferEvent): string {
    const identity = event.sequenceId === '' ? `@${event.id}` : `${event.sequenceId}:${event.version}`;
    return event.epoch === undefined ? `${this.#seenPrefix}:${identity}` : `${this.#seenPrefix}:${identity}:${event.epoch}`;
  }

  /**
   * For each sequenceId, the epochs the group handled events of and the highest version it handled per
   * epoch (one HGETALL and one ZRANGE each, pipelined).
   */
  async #transfers(sequenceIds: string[]): Promise<{ epochs: Map<string, KnownEpochs>; versions: Map<string, HighestVersions> }> {
    const epochs = new Map<string, KnownEpochs>();
    const versions = new Map<string, HighestVersions>();
    const unique = [...new Set(sequenceIds)];
    if (unique.length === 0) return { epochs, versions };
    const pipeline = this.#redis.pipeline();
    for (const sequenceId of unique) {
      pipeline.hgetall(`${this.#epochPrefix}:${sequenceId}`);
      pipeline.zrange(`${this.#versionPrefix}:${sequenceId}`, '0', '-1', 'WITHSCORES');
    }
    const replies = await pipeline.exec();
    if (replies === null) throw new Error('pipeline was aborted');
    for (const [i, sequenceId] of unique.entries()) {
      const [[epochError, epochReply], [versionError, versionReply]] = [replies[2 * i]!, replies[2 * i + 1]!];
      if (epochError) throw epochError;
      if (versionError) throw versionError;
      const known = Object.entries((epochReply ?? {}) as Record<string, string>).map(([epoch, at]): [string, number] => [
        epoch,
        Number(at),
      ]);
      epochs.set(sequenceId, new Map(known));
      const flat = (versionReply ?? []) as string[];
      versions.set(
        sequenceId,
        new Map(Array.from({ length: flat.length / 2 }, (_, j): [string, number] => [flat[2 * j]!, Number(flat[2 * j + 1])])),
      );
    }
    return { epochs, versions };
  }

  /** Tells onNewEpoch, or else onError (stage 'epoch'); neither may end the loop or keep the event from its handler. */
  #newEpoch(info: NewEpochInfo): void {
    const detail = { entryId: info.entryId, sequenceId: info.sequenceId };
    if (this.#s.onNewEpoch === undefined) {
      this.#report(new NewEpochError(info), 'epoch', 'new-epoch', detail);
      return;
    }
    try {
      this.#s.onNewEpoch(info);
    } catch (error) {
      this.#report(error, 'epoch', 'new-epoch', detail);
    }
  }

  async #seen(markers: string[]): Promise<Array<string | null>> {
    // One key at a time on a Cluster would work across slots too; they share the stream's slot anyway.
    return this.#redis.mget(...markers);
  }

  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wakeRetry = done;
    }).finally(() => {
      this.#wakeRetry = undefined;
    });
  }
}

/** Whether an event's epoch is recorded for its transfer: it has one, and a transfer (not `reconcile.completed`). */
function tracksEpoch(event: TransferEvent): event is TransferEvent & { epoch: string } {
  return event.epoch !== undefined && event.sequenceId !== '';
}

/** What a report may say of an event: its type and sequenceId. */
function identity(event: TransferEvent): { type: string; sequenceId: string } {
  return { type: event.event, sequenceId: event.sequenceId };
}

/** An event type as the worker writes them: what a report may name even when it is unknown. */
const TYPE_TEXT = /^[a-z][a-z0-9._-]{0,63}$/;

/** The type and sequenceId of an entry that is no valid event, when each is well-formed (never other values). */
function rawIdentity(fields: string[]): { type?: string; sequenceId?: string } {
  const found: { type?: string; sequenceId?: string } = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [name, value] = [fields[i]!, fields[i + 1]!];
    if (name === 'event' && TYPE_TEXT.test(value)) found.type = value;
    if (name === 'sequenceId' && (value === '' || SEQUENCE_ID.test(value))) found.sequenceId = value;
  }
  return found;
}

/** The dead-letter a consume() uses: the default stream, a stream named, or a callback. */
function deadLetterOf(deadLetter: string | DeadLetterHandler | undefined, stream: string): string | DeadLetterHandler {
  if (deadLetter === undefined) return defaultDeadLetterStream(stream);
  if (typeof deadLetter === 'function') return deadLetter;
  nonEmpty(deadLetter, 'deadLetter');
  if (deadLetter === stream) throw new RangeError('deadLetter must not be the events stream itself');
  return deadLetter;
}

/** Errors whose message the consumer writes itself: they name entries and transfers, never an event's data. */
const OWN_CODES = new Set(['NEW_EPOCH', 'STALE_VERSION', 'DEAD_LETTERED']);

/**
 * onError when none is given: one line on stderr per report. It names the entry (id, type, sequenceId),
 * never an event's data or metadata: the message of a parse or handler error may quote them, so only
 * their name (and code) is written; the consumer's own errors and Redis's are written whole.
 */
function defaultOnError(group: string, consumer: string): (error: Error, info: ConsumeErrorInfo) => void {
  return (error, info) => {
    const code = (error as { code?: unknown }).code;
    const own = typeof code === 'string' && OWN_CODES.has(code);
    const what = own || info.stage === 'redis' ? error.message : `${error.name}${typeof code === 'string' ? ` (${code})` : ''}`;
    const about = [
      info.entryId === undefined ? undefined : `entry ${info.entryId}`,
      info.type === undefined ? undefined : `type ${info.type}`,
      info.sequenceId === undefined || info.sequenceId === '' ? undefined : `sequenceId ${info.sequenceId}`,
      info.deliveries === undefined ? undefined : `deliveries ${info.deliveries}`,
      info.deadLetter === undefined ? undefined : `dead-letter ${info.deadLetter}`,
    ].filter((part) => part !== undefined);
    const line = `custody-transfer-producer: consumer ${consumer} of group ${group}: ${info.reason} (stage ${info.stage})${about.length > 0 ? ` [${about.join(', ')}]` : ''}: ${what}`;
    console.error(line.replace(/[\r\n]+/g, ' '));
  };
}

/** The epoch first handled most recently, if any. */
function latest(known: KnownEpochs): string | undefined {
  let found: [string, number] | undefined;
  for (const entry of known) if (found === undefined || entry[1] >= found[1]) found = entry;
  return found?.[0];
}

/** `exec()` reports a failed command inside its reply; this throws it instead. */
function execResult(result: Array<[Error | null, unknown]> | null): void {
  if (result === null) throw new Error('MULTI was aborted');
  for (const [error] of result) if (error) throw error;
}

/** A blocking read that outlives blockMs by far means a dead connection: drop it, it reconnects. */
function bounded<T>(promise: Promise<T>, ms: number, client: Client): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      client.disconnect(true);
      reject(new Error(`no answer to a blocking read within ${ms} ms`));
    }, ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function positiveInteger(value: number, name: string): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

function nonEmpty(value: string, name: string): string {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be a non-empty string`);
  return value;
}
