import { Redis, type Cluster } from 'ioredis';
import { parseStreamEntry, type TransferEvent } from './events.ts';
import { consumerEpochKey, defaultEventsStream, seenKey } from './keys.ts';

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

/** Where `onError` was called from. */
export type ConsumeErrorStage =
  /** The handler threw or rejected: the entry is not acknowledged and will be retried (pending/autoclaim). */
  | 'handler'
  /** The entry is not a valid event (or was trimmed from the stream before it was handled): acknowledged, skipped. */
  | 'parse'
  /** A Redis command failed: the loop waits a moment and goes on. */
  | 'redis'
  /**
   * Not a failure: the entry's transfer started a new life after the ledger was lost (a `NewEpochError`,
   * see `ConsumeOptions.onNewEpoch`), reported here when no `onNewEpoch` is given; or `onNewEpoch` threw.
   * The entry is handed to the handler as usual.
   */
  | 'epoch';

export interface ConsumeErrorInfo {
  stage: ConsumeErrorStage;
  /** The stream entry concerned, when there is one. */
  entryId?: string;
}

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
   * Called for every handler failure, unparsable entry and Redis error; the loop never stops for them.
   * Without `onNewEpoch`, also for every transfer that started a new life (stage `'epoch'`, a
   * `NewEpochError` whose message says the transfer started a new life after the ledger was lost).
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

/** Default lifetime of a seen marker. */
export const DEFAULT_SEEN_TTL_MS = 7 * 24 * 3_600_000;

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
    if (this.#closed) throw new Error('TransferEvents is closed');
    const settings = {
      group: nonEmpty(options.group, 'group'),
      consumer: nonEmpty(options.consumer, 'consumer'),
      from: options.from ?? '$',
      batch: positiveInteger(options.batch ?? 100, 'batch'),
      blockMs: positiveInteger(options.blockMs ?? 5_000, 'blockMs'),
      claimIdleMs: positiveInteger(options.claimIdleMs ?? 60_000, 'claimIdleMs'),
      onError: options.onError ?? (() => undefined),
      onNewEpoch: options.onNewEpoch,
    };
    const keys = { seen: seenKey(this.#prefix, settings.group), epoch: consumerEpochKey(this.#prefix, settings.group) };
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
  onError: (error: Error, info: ConsumeErrorInfo) => void;
  onNewEpoch: ((info: NewEpochInfo) => void) | undefined;
}

/** Epoch -> when the group first handled an event of it (ms), for one transfer. */
type KnownEpochs = Map<string, number>;

class ConsumerLoop {
  readonly done: Promise<void>;
  readonly #redis: Client;
  readonly #blocker: Client;
  readonly #stream: string;
  readonly #seenPrefix: string;
  readonly #epochPrefix: string;
  readonly #seenTtlMs: number;
  readonly #s: LoopSettings;
  readonly #handler: TransferEventHandler;
  #stopping = false;
  /** True while waiting on the blocking read (nothing delivered is being handled). */
  #blocked = false;
  /** The group vanished under this consumer (NOGROUP): it is made again from the stream's start. */
  #lostGroup = false;
  #wakeRetry: (() => void) | undefined;

  constructor(
    redis: Client,
    stream: string,
    keys: { seen: string; epoch: string },
    seenTtlMs: number,
    settings: LoopSettings,
    handler: TransferEventHandler,
  ) {
    this.#redis = redis;
    this.#stream = stream;
    this.#seenPrefix = keys.seen;
    this.#epochPrefix = keys.epoch;
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

  #report(error: unknown, stage: ConsumeErrorStage, entryId?: string): void {
    try {
      this.#s.onError(error instanceof Error ? error : new Error(String(error)), entryId === undefined ? { stage } : { stage, entryId });
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
            await this.#handleBatch(entries);
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
          await this.#handleBatch(entries);
        }
        failures = 0;
      } catch (error) {
        if (this.#stopping) break;
        this.#report(error, 'redis');
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
        this.#report(new Error(`entry ${id} was trimmed from the stream before it was handled`), 'parse', id);
      await this.#handleBatch(reply[1]);
    } while (cursor !== '0-0' && !this.#stopping);
  }

  /** Handles a batch in order; finishes it even when stop() is called meanwhile. */
  async #handleBatch(entries: RawEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const parsed: Array<{ id: string; event: TransferEvent; marker: string }> = [];
    const broken: string[] = [];
    for (const [id, fields] of entries) {
      if (fields === null) {
        this.#report(new Error(`entry ${id} was trimmed from the stream before it was handled`), 'parse', id);
        broken.push(id);
        continue;
      }
      try {
        const event = parseStreamEntry([id, fields]);
        parsed.push({ id, event, marker: this.#marker(event) });
      } catch (error) {
        this.#report(error, 'parse', id);
        broken.push(id);
      }
    }
    // Unparsable (or vanished) entries are acknowledged: retrying them cannot help.
    if (broken.length > 0) await this.#redis.xack(this.#stream, this.#s.group, ...broken);
    if (parsed.length === 0) return;

    const seen = await this.#seen(parsed.map((p) => p.marker));
    // The epochs handled so far of the transfers whose new events carry one; kept up to date below.
    const epochs = await this.#knownEpochs(
      parsed.filter((p, i) => seen[i] === null && tracksEpoch(p.event)).map((p) => p.event.sequenceId),
    );
    const handled = new Set<string>();
    const reported = new Set<string>();
    for (const [i, { id, event, marker }] of parsed.entries()) {
      if (seen[i] !== null || handled.has(marker)) {
        // Handled before under this (epoch, sequenceId, version): acknowledge without calling the handler.
        await this.#redis.xack(this.#stream, this.#s.group, id);
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
      try {
        await this.#handler(event, id);
      } catch (error) {
        this.#report(error, 'handler', id);
        continue;
      }
      handled.add(marker);
      const record = this.#redis.multi().set(marker, id, 'PX', this.#seenTtlMs, 'NX').xack(this.#stream, this.#s.group, id);
      if (life !== undefined) {
        const key = `${this.#epochPrefix}:${event.sequenceId}`;
        record.hsetnx(key, life.epoch, String(Date.now())).pexpire(key, this.#seenTtlMs);
      }
      await record.exec().then(execResult);
      if (life !== undefined && !life.known.has(life.epoch)) life.known.set(life.epoch, Date.now());
    }
  }

  /**
   * The seen marker of an event: its (sequenceId, version), or its entry id for events of no transfer;
   * followed by `:<epoch>` when it has one (a sequenceId never has `:`, so this never meets the old form).
   */
  #marker(event: TransferEvent): string {
    const identity = event.sequenceId === '' ? `@${event.id}` : `${event.sequenceId}:${event.version}`;
    return event.epoch === undefined ? `${this.#seenPrefix}:${identity}` : `${this.#seenPrefix}:${identity}:${event.epoch}`;
  }

  /** For each sequenceId, the epochs the group handled events of (one HGETALL each, pipelined). */
  async #knownEpochs(sequenceIds: string[]): Promise<Map<string, KnownEpochs>> {
    const known = new Map<string, KnownEpochs>();
    const unique = [...new Set(sequenceIds)];
    if (unique.length === 0) return known;
    const pipeline = this.#redis.pipeline();
    for (const sequenceId of unique) pipeline.hgetall(`${this.#epochPrefix}:${sequenceId}`);
    const replies = await pipeline.exec();
    if (replies === null) throw new Error('pipeline was aborted');
    for (const [i, [error, reply]] of replies.entries()) {
      if (error) throw error;
      const epochs = Object.entries((reply ?? {}) as Record<string, string>).map(([epoch, at]): [string, number] => [epoch, Number(at)]);
      known.set(unique[i]!, new Map(epochs));
    }
    return known;
  }

  /** Tells onNewEpoch, or else onError (stage 'epoch'); neither may end the loop or keep the event from its handler. */
  #newEpoch(info: NewEpochInfo): void {
    if (this.#s.onNewEpoch === undefined) {
      this.#report(new NewEpochError(info), 'epoch', info.entryId);
      return;
    }
    try {
      this.#s.onNewEpoch(info);
    } catch (error) {
      this.#report(error, 'epoch', info.entryId);
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
