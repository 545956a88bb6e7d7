import type { Logger } from './logger.ts';
import type { RedisClient } from './redis.ts';
import { READY_CHECK_TIMEOUT_MS, READY_PROBE_TTL_MS, REDIS_ERROR_LOG_INTERVAL_MS } from './timing.ts';

/** Error codes of a connection that failed or dropped: repeated on every reconnect attempt while Redis is away. */
export const CONNECTION_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * The first words of the replies with which a Redis that answers (PING, reads) refuses every write:
 *   OOM         used memory is over `maxmemory` (with `noeviction`, as the worker requires);
 *   READONLY    the node is a replica (a demoted primary, a client pointed at a replica);
 *   MISCONF     an RDB save failed and `stop-writes-on-bgsave-error` stops writes until one succeeds;
 *   NOREPLICAS  fewer replicas than `min-replicas-to-write` are connected within `min-replicas-max-lag`.
 * Every one holds until an operator or Redis fixes the cause; until then no job can move.
 */
export const REFUSED_WRITE_CODES = ['OOM', 'READONLY', 'MISCONF', 'NOREPLICAS'] as const;
export type RefusedWriteCode = (typeof REFUSED_WRITE_CODES)[number];
const REFUSED: ReadonlySet<string> = new Set(REFUSED_WRITE_CODES);

/**
 * Replies of a Redis that answers but serves nothing for now, repeated on every command while it lasts:
 * loading its data set, its primary down (a replica with `replica-serve-stale-data no`), the cluster
 * down, a slot moving, a script running too long.
 */
const UNAVAILABLE_REPLY_CODES: ReadonlySet<string> = new Set(['LOADING', 'MASTERDOWN', 'CLUSTERDOWN', 'TRYAGAIN', 'BUSY']);

export type RedisErrorClass =
  | { kind: 'connection'; code: string }
  | { kind: 'refused'; code: RefusedWriteCode }
  | { kind: 'unavailable'; code: string }
  | { kind: 'other' };

/**
 * What an error from ioredis or BullMQ says about Redis: a connection error by its `code`, a reply by
 * its first word (`OOM command not allowed when used memory > 'maxmemory'.`, also when a write inside
 * one of BullMQ's scripts was refused: Redis 7 keeps the code). A transaction aborted because a queued
 * command was refused (EXECABORT) counts as that refusal.
 */
export function classifyRedisError(error: unknown): RedisErrorClass {
  if (typeof error !== 'object' || error === null) return { kind: 'other' };
  const { code, message, previousErrors } = error as { code?: unknown; message?: unknown; previousErrors?: unknown };
  if (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) return { kind: 'connection', code };
  const word = typeof message === 'string' ? /^([A-Z]+)(?:\s|$)/.exec(message)?.[1] : undefined;
  if (word === undefined) return { kind: 'other' };
  if (REFUSED.has(word)) return { kind: 'refused', code: word as RefusedWriteCode };
  if (UNAVAILABLE_REPLY_CODES.has(word)) return { kind: 'unavailable', code: word };
  if (word === 'EXECABORT' && Array.isArray(previousErrors)) {
    for (const previous of previousErrors as unknown[]) {
      const cause = classifyRedisError(previous);
      if (cause.kind === 'refused') return cause;
    }
  }
  return { kind: 'other' };
}

/** At most this much of a reply's text goes into a log line (Redis's own text, never a command's arguments). */
const MESSAGE_CHARS = 300;

const LOG_LINES = {
  connection: 'redis connection error, retrying',
  refused: 'redis refuses writes, retrying (runbook: Redis refuses writes)',
  unavailable: 'redis unavailable, retrying',
} as const;

export interface RedisErrorsOptions {
  logger: Logger;
  /** Writes the readiness probe (`SET key <now> PX READY_PROBE_TTL_MS`). */
  redis: RedisClient;
  /** The probe's key, under QUEUE_PREFIX (one cluster slot with the rest). */
  probeKey: string;
  /** Every refused write seen, by code (custody_redis_refused_writes_total). */
  onRefused(code: RefusedWriteCode): void;
}

export type WriteProbe = { accepted: true } | { accepted: false; code: string; refused: boolean };

/**
 * The `error` events of the process's BullMQ workers and queues and of its Redis client, in one place.
 *
 * Errors Redis repeats on every command while a cause lasts (a connection down, a refused write, a node
 * loading) come by the thousand: a worker whose job moves are refused retries at once, a line each time.
 * Each such code is logged at most once per REDIS_ERROR_LOG_INTERVAL_MS for the whole process, naming
 * the code, the source that met it, the other sources that met it since and how many were left out
 * (`suppressed`); never a job's data (the reply's text is Redis's, and the logger drops a command's
 * arguments). Anything else is logged each time, as a `worker error`.
 *
 * Whether Redis refuses writes is decided by a probe, not by these events: readiness writes one small
 * key (`probeWrites`) and is not ready while that write is refused. The events cannot tell it: a worker
 * with nothing due issues no write, so a Redis that refuses them would go unnoticed (producers' adds
 * failing) until a job came due, and after the cause went away the last event would keep readiness
 * down for a while longer. The events still count every refusal (the metric) and tell the watchdog
 * that one was seen lately (`refusing`, queues/watchdog.ts).
 */
export class RedisErrors {
  readonly #options: RedisErrorsOptions;
  readonly #throttles = new Map<string, { loggedAt: number; suppressed: number; sources: Set<string> }>();
  #lastRefused: { code: RefusedWriteCode; at: number } | undefined;
  /** The code the last probe was refused with; undefined when it was accepted (or none ran yet). */
  #probeRefused: string | undefined;

  constructor(options: RedisErrorsOptions) {
    this.#options = options;
  }

  /** An `error` listener for one source: a queue's worker (its name), a queue (`queue-<name>`) or `redis`. */
  listener(source: string): (error: Error) => void {
    return (error) => this.report(source, error);
  }

  report(source: string, error: unknown): void {
    const kind = classifyRedisError(error);
    if (kind.kind === 'other') {
      this.#options.logger.error({ err: error, queue: source }, 'worker error');
      return;
    }
    if (kind.kind === 'refused') this.#refused(kind.code);
    const now = Date.now();
    const throttle = this.#throttles.get(kind.code) ?? { loggedAt: -Infinity, suppressed: 0, sources: new Set<string>() };
    this.#throttles.set(kind.code, throttle);
    if (now - throttle.loggedAt < REDIS_ERROR_LOG_INTERVAL_MS) {
      throttle.suppressed++;
      if (throttle.sources.size < 20) throttle.sources.add(source);
      return;
    }
    const message = String((error as { message?: unknown }).message ?? '').slice(0, MESSAGE_CHARS);
    const fields = { code: kind.code, source, message, suppressed: throttle.suppressed, suppressedSources: [...throttle.sources] };
    if (kind.kind === 'refused') this.#options.logger.error(fields, LOG_LINES.refused);
    else this.#options.logger.warn(fields, LOG_LINES[kind.kind]);
    throttle.loggedAt = now;
    throttle.suppressed = 0;
    throttle.sources.clear();
  }

  /** The code of the last refusal seen, if one was seen within `withinMs`, else of the probe's refusal now, else undefined. */
  async refusing(withinMs: number): Promise<string | undefined> {
    const last = this.#lastRefused;
    if (last && Date.now() - last.at < withinMs) return last.code;
    const probe = await this.probeWrites(READY_CHECK_TIMEOUT_MS);
    return !probe.accepted && probe.refused ? probe.code : undefined;
  }

  /**
   * Whether Redis takes a write now: `SET <prefix>:ready-probe <now> PX READY_PROBE_TTL_MS`, one small
   * key that expires by itself. Refused with one of REFUSED_WRITE_CODES: counted, remembered and logged
   * (throttled) like an event's, from the source `ready-probe`. Another failure, or no answer within
   * `timeoutMs` (Redis away: PING says so too), is reported with its code, not as a refusal.
   * The first probe accepted after refused ones logs once that Redis takes writes again.
   */
  async probeWrites(timeoutMs: number): Promise<WriteProbe> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const write = this.#options.redis.set(this.#options.probeKey, String(Date.now()), 'PX', READY_PROBE_TTL_MS);
      const timedOut = new Promise<'timed out'>((resolve) => {
        timer = setTimeout(resolve, timeoutMs, 'timed out');
        timer.unref();
      });
      if ((await Promise.race([write, timedOut])) === 'timed out') {
        write.catch(() => undefined);
        return { accepted: false, code: 'TIMEOUT', refused: false };
      }
    } catch (error) {
      const kind = classifyRedisError(error);
      if (kind.kind === 'refused') {
        this.report('ready-probe', error);
        this.#probeRefused = kind.code;
        return { accepted: false, code: kind.code, refused: true };
      }
      const word = /^([A-Z]+)(?:\s|$)/.exec(String((error as { message?: unknown }).message))?.[1];
      return { accepted: false, code: kind.kind === 'other' ? (word ?? 'ERROR') : kind.code, refused: false };
    } finally {
      clearTimeout(timer);
    }
    if (this.#probeRefused !== undefined) {
      this.#options.logger.warn({ code: this.#probeRefused }, 'redis takes writes again');
      this.#probeRefused = undefined;
    }
    return { accepted: true };
  }

  #refused(code: RefusedWriteCode): void {
    this.#lastRefused = { code, at: Date.now() };
    this.#options.onRefused(code);
  }
}
