import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { CustodyPort, WalletRef } from './port.ts';
import { BudgetClass } from './budget.ts';

/** How long a probe's finding is kept: a provider changes how it answers rarely, and a probe costs one call. */
export const NARROWING_PROBE_TTL_MS = 24 * 3_600_000;

/**
 * Whether get-transfer by sequenceId answers only with the transfer that holds that sequenceId, for a
 * wallet (upstream API 4.1 leaves it open). Only then does an answer of exactly one `send` record, carrying no
 * sequenceId, identify the transfer; otherwise it may be any other transfer of the wallet, and taking
 * it for ours would be a guess.
 *
 * Found out by asking: a lookup of a sequenceId nobody ever used (a fresh random one) in the same wallet
 * must answer nothing. The finding is kept in Redis for every worker process (NARROWING_PROBE_TTL_MS).
 * A probe that fails says "cannot tell" (false), and is asked again next time.
 */
export class LookupNarrowing {
  readonly #redis: Redis | Cluster;
  readonly #custody: Pick<CustodyPort, 'getTransfersBySequenceId'>;
  readonly #key: (wallet: WalletRef) => string;

  constructor(redis: Redis | Cluster, custody: Pick<CustodyPort, 'getTransfersBySequenceId'>, keyOf: (wallet: WalletRef) => string) {
    this.#redis = redis;
    this.#custody = custody;
    this.#key = keyOf;
  }

  async narrows(wallet: WalletRef, signal?: AbortSignal): Promise<boolean> {
    const key = this.#key(wallet);
    const known = await this.#redis.get(key);
    if (known !== null) return known === '1';
    let narrowed: boolean;
    try {
      const probe = `probe-${randomUUID()}`;
      const list = await this.#custody.getTransfersBySequenceId(wallet, probe, {
        signal,
        budget: { klass: BudgetClass.SETTLE, member: probe },
      });
      narrowed = list.length === 0;
    } catch {
      return false;
    }
    await this.#redis.set(key, narrowed ? '1' : '0', 'PX', NARROWING_PROBE_TTL_MS);
    return narrowed;
  }
}
