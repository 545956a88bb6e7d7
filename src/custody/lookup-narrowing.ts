import type { Cluster, Redis } from 'ioredis';
import type { WalletRef } from './port.ts';

/** How long a probe's finding is kept: a provider changes how it answers rarely, and a probe costs one call. */
export const NARROWING_PROBE_TTL_MS = 24 * 3_600_000;

/**
 * Whether a provider's lookup by sequenceId answers only with the transfer that holds that sequenceId,
 * for a wallet, when its API leaves it open (the first provider's, upstream API 4.1). Only then does an
 * answer of exactly one `send` record, carrying no sequenceId, identify the transfer; otherwise it may
 * be any other transfer of the wallet, and taking it for ours would be a guess.
 *
 * Found out by asking: the adapter's `probe` looks up a sequenceId nobody ever used (a fresh random
 * one) in the same wallet, which must answer nothing. The finding is kept in Redis for every worker
 * process (NARROWING_PROBE_TTL_MS). A probe that fails says "cannot tell" (false), and is asked again
 * next time. The worker hands it to the adapter (provider-kind.ts, AdapterOptions).
 */
export class LookupNarrowing {
  readonly #redis: Redis | Cluster;
  readonly #key: (wallet: WalletRef) => string;

  constructor(redis: Redis | Cluster, keyOf: (wallet: WalletRef) => string) {
    this.#redis = redis;
    this.#key = keyOf;
  }

  /** `probe`: whether a lookup of a fresh, never used sequenceId in this wallet answered nothing. */
  async narrows(wallet: WalletRef, probe: () => Promise<boolean>): Promise<boolean> {
    const key = this.#key(wallet);
    const known = await this.#redis.get(key);
    if (known !== null) return known === '1';
    let narrowed: boolean;
    try {
      narrowed = await probe();
    } catch {
      return false;
    }
    await this.#redis.set(key, narrowed ? '1' : '0', 'PX', NARROWING_PROBE_TTL_MS);
    return narrowed;
  }
}

/** What an adapter uses of LookupNarrowing. */
export type NarrowingMemo = Pick<LookupNarrowing, 'narrows'>;
