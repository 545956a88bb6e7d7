import type { Job, Queue, Worker } from 'bullmq';
import { InFlight } from './in-flight.ts';

/**
 * Jobs of one queue in this process: counts them in the process's InFlight too (shutdown waits for
 * all), and remembers when the last one started.
 */
export class QueueActivity extends InFlight {
  readonly #process: InFlight;
  lastStartedAt = Date.now();

  constructor(process: InFlight) {
    super();
    this.#process = process;
  }

  override start(): void {
    super.start();
    this.#process.start();
    this.lastStartedAt = Date.now();
  }

  override end(): void {
    super.end();
    this.#process.end();
  }
}

export interface Watched {
  readonly queue: Queue;
  readonly activity: QueueActivity;
  /** The queue's worker in this process now. */
  current(): Worker;
  /** Starts a new worker for the queue and makes it current; the old one is closed by the watchdog. */
  replace(): void;
}

export interface WatchdogOptions {
  /** How long a worker may start no job while its queue has work due (WORKER_STALL_TIMEOUT). */
  stallMs: number;
  /** A job's lock: how long after its last start a delayed job may still legitimately be moving. */
  lockDurationMs: number;
  onReplaced(queue: string, reason: string): void;
  onError(error: unknown): void;
  /**
   * Whether Redis refuses writes (OOM, READONLY, MISCONF, NOREPLICAS: src/redis-errors.ts): the code of
   * a refusal seen within `withinMs` or of a write probed now, else undefined. Asked only about a worker
   * that looks stalled.
   */
  writesRefused?(withinMs: number): Promise<string | undefined>;
  /** A stalled-looking worker was kept because Redis refuses writes: called once per such spell. */
  onHeldOff?(queue: string, reason: string, code: string): void;
}

/**
 * BullMQ workers can stop fetching for good after a Redis failover while the rest of the process
 * works: on a Redis Cluster the worker's blocking connection (an ioredis Cluster duplicate) can wedge
 * and never recover (bullmq#4138, open), and a worker whose fetch loop ended on an error takes nothing
 * either (we never pause ours: a worker not running while the process runs is one of these). The
 * failover test saw it: every tracking job of a run due, none started by either process for minutes,
 * both processes' other workers busy as usual.
 *
 * Every `stallMs / 3`, each worker of this process is checked: when it has no job running, has started
 * none for `stallMs`, and its queue has work due (a job waiting, or the earliest delayed job overdue by
 * more than `stallMs`) that is neither paused nor rate limited, on two checks in a row, it is replaced
 * by a new Worker (BullMQ's public API) and the old one closed in the background. A false alarm (say,
 * other processes took every job) costs one worker restart; nothing is lost, and jobs in flight on the
 * old worker finish there.
 *
 * A worker starts no job either while Redis refuses writes (out of memory, say): every move of a job
 * is refused, and a new worker's would be too. While a refusal was seen within `stallMs`, or a probe
 * write is refused now, no worker is replaced; that is said once per spell (`onHeldOff`), and after it
 * a worker again has `stallMs` and two checks to start a job before it is replaced.
 */
export function startWatchdog(watched: Watched[], options: WatchdogOptions): { stop(): void } {
  const suspect = new Set<Watched>();
  let checking = false;
  /** The refusal code this spell of holding off was reported with. */
  let holding: string | undefined;
  let heldThisRound = false;
  let refusal: Promise<string | undefined> | undefined;
  const check = async (entry: Watched): Promise<void> => {
    const reason = await stalled(entry, options);
    if (!reason) {
      suspect.delete(entry);
      return;
    }
    // One question to Redis per round, however many workers look stalled.
    refusal ??= options.writesRefused?.(options.stallMs) ?? Promise.resolve(undefined);
    const code = await refusal;
    if (code !== undefined) {
      suspect.delete(entry);
      heldThisRound = true;
      if (holding !== code) options.onHeldOff?.(entry.queue.name, reason, code);
      holding = code;
      return;
    }
    if (!suspect.has(entry)) {
      suspect.add(entry);
      return;
    }
    suspect.delete(entry);
    const old = entry.current();
    entry.replace();
    entry.activity.lastStartedAt = Date.now();
    options.onReplaced(entry.queue.name, reason);
    // close() lets its jobs in flight finish, then ends its blocking connection (it may never resolve
    // when that connection is the wedged one). Not disconnect(): that closes the process's shared one.
    old.close().catch(() => undefined);
  };
  const timer = setInterval(
    () => {
      if (checking) return;
      checking = true;
      heldThisRound = false;
      refusal = undefined;
      Promise.all(watched.map((entry) => check(entry).catch(options.onError))).finally(() => {
        if (!heldThisRound) holding = undefined;
        checking = false;
      });
    },
    Math.max(1, Math.floor(options.stallMs / 3)),
  );
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/** Why the worker counts as stalled now, or undefined. */
async function stalled(entry: Watched, options: WatchdogOptions): Promise<string | undefined> {
  const now = Date.now();
  if (entry.activity.count > 0 || now - entry.activity.lastStartedAt < options.stallMs) return undefined;
  const counts = await entry.queue.getJobCounts('wait', 'prioritized');
  let reason = (counts.wait ?? 0) + (counts.prioritized ?? 0) > 0 ? 'jobs waiting' : undefined;
  if (!reason) {
    const [earliest] = (await entry.queue.getJobs(['delayed'], 0, 0, true)) as Array<Job | undefined>;
    if (earliest && dueAt(earliest, options.lockDurationMs) + options.stallMs < now) reason = 'delayed jobs overdue';
  }
  if (!reason) return undefined;
  if (await entry.queue.isPaused()) return undefined;
  if ((await entry.queue.getRateLimitTtl()) > 0) return undefined;
  return reason;
}

/**
 * The latest a delayed job can be due, from its public fields: its delay counts from when it was added
 * or, for a job put back after running, from its last start (at most a lock duration before the move).
 */
function dueAt(job: Job, lockDurationMs: number): number {
  const from = Math.max(job.timestamp, job.processedOn ?? 0);
  return from + (job.delay ?? 0) + (job.processedOn ? lockDurationMs : 0);
}
