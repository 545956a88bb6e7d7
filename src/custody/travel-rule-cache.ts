import type { Cluster, Redis } from 'ioredis';
import { withRedisLock } from '../lib/redis-lock.ts';
import { TRAVEL_RULE_WAIT_STEP_MS } from '../timing.ts';
import type { CustodyPort, TravelRuleSetting } from './port.ts';

/** The part of the setting (upstream API 2.6) a decision needs. The originator data (`dataJson`) is never kept. */
export interface GateSetting {
  outgoingTxn: number;
  mandatory: boolean;
  blockTxn: boolean;
  fetchedAt: string;
}

/** Where a lookup found the setting: the shared Redis cache, or the provider. */
export const TRAVEL_RULE_SOURCES = ['cache', 'upstream'] as const;
export type TravelRuleSource = (typeof TRAVEL_RULE_SOURCES)[number];

export interface TravelRuleCacheOptions {
  ttlMs: number;
  /** How long one refresh may take before another process may try (the upstream time-out and a margin). */
  refreshTimeoutMs: number;
  onLookup?: (source: TravelRuleSource) => void;
  /** A monotonic clock, ms (tests pass their own). */
  monotonicNow?: () => number;
}

/**
 * The is-enabled answer, cached in Redis for all worker processes. A refresh takes a lock so one
 * process calls upstream while the others wait for the cached answer; a crashed refresher's lock
 * expires after `refreshTimeoutMs`. Within a process concurrent callers share one lookup.
 */
export class TravelRuleCache {
  readonly #redis: Redis | Cluster;
  readonly #custody: Required<Pick<CustodyPort, 'getTravelRuleSetting'>>;
  readonly #key: string;
  readonly #lockKey: string;
  readonly #options: TravelRuleCacheOptions;
  #inflight: Promise<GateSetting> | undefined;
  /** The cached answer as this process last read it, and until when (monotonic ms) Redis keeps it. */
  #local: { setting: GateSetting; until: number } | undefined;
  readonly #now: () => number;

  constructor(
    redis: Redis | Cluster,
    custody: Required<Pick<CustodyPort, 'getTravelRuleSetting'>>,
    keys: { travelRule: string; travelRuleLock: string },
    options: TravelRuleCacheOptions,
  ) {
    this.#redis = redis;
    this.#custody = custody;
    this.#key = keys.travelRule;
    this.#lockKey = keys.travelRuleLock;
    this.#options = options;
    this.#now = options.monotonicNow ?? (() => performance.now());
  }

  /**
   * The cached answer is kept in the process too, no longer than Redis keeps it (its remaining PTTL,
   * counted from before the read): a job reads the same setting it would have read from Redis, without
   * a round trip on its way to the send.
   */
  async setting(): Promise<GateSetting> {
    if (this.#options.ttlMs === 0) return this.#fetch();
    const local = this.#local;
    if (local && this.#now() < local.until) {
      this.#options.onLookup?.('cache');
      return local.setting;
    }
    this.#inflight ??= this.#lookup().finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #lookup(): Promise<GateSetting> {
    const deadline = Date.now() + this.#options.refreshTimeoutMs;
    for (;;) {
      const asked = this.#now();
      // One atomic read: the value and how long Redis keeps it.
      const [[getError, cached], [pttlError, pttl]] = (await this.#redis.multi().get(this.#key).pttl(this.#key).exec()) as [
        [Error | null, string | null],
        [Error | null, number],
      ];
      if (getError ?? pttlError) throw getError ?? pttlError;
      if (cached) {
        this.#options.onLookup?.('cache');
        const setting = JSON.parse(cached) as GateSetting;
        this.#local = pttl > 0 ? { setting, until: asked + pttl } : undefined;
        return setting;
      }
      const fetched = await withRedisLock(this.#redis, this.#lockKey, this.#options.refreshTimeoutMs, 0, async () => {
        const setting = await this.#fetch();
        const written = this.#now();
        await this.#redis.set(this.#key, JSON.stringify(setting), 'PX', this.#options.ttlMs);
        this.#local = { setting, until: written + this.#options.ttlMs };
        return setting;
      });
      if (fetched) return fetched;
      // Another process is refreshing: wait for its answer, or for its lock to go if it failed.
      if (Date.now() > deadline) return this.#fetch();
      await new Promise((resolve) => setTimeout(resolve, TRAVEL_RULE_WAIT_STEP_MS));
    }
  }

  async #fetch(): Promise<GateSetting> {
    const setting: TravelRuleSetting = await this.#custody.getTravelRuleSetting();
    this.#options.onLookup?.('upstream');
    return {
      outgoingTxn: setting.outgoingTxn,
      mandatory: setting.mandatory,
      blockTxn: setting.blockTxn,
      fetchedAt: new Date().toISOString(),
    };
  }
}
