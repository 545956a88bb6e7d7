import { createHash } from 'node:crypto';
import type { Keys } from '../../ledger/keys.ts';
import type { RedisClient } from '../../redis.ts';

/** How long the first answer to an `Idempotency-Key` is kept: a client retrying within a day gets it again. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** What an `Idempotency-Key` may be: printable ASCII, as the IETF draft's examples (a UUID fits). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** A stored answer: the status and JSON body the first request got. */
export interface StoredAnswer {
  status: number;
  body: unknown;
}

type Slot = { state: 'pending'; fingerprint: string } | ({ state: 'done'; fingerprint: string } & StoredAnswer);

export type Claim =
  | { kind: 'first' }
  | { kind: 'repeat'; answer: StoredAnswer }
  /** The first request with this key is still running: nothing was done for this one. */
  | { kind: 'in-progress' }
  /** The key was used for another request (another route or body). */
  | { kind: 'reused' };

/** What identifies a request under one key: its method, path and body. */
export function fingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(method)
    .update('\0')
    .update(path)
    .update('\0')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}

/**
 * The first answer per user and `Idempotency-Key`, in Redis under the prefix (Keys.idempotency). A
 * request claims the key first (SET NX, so two at once never both run the action); its answer then
 * replaces the claim. An answer of 5xx (Redis, replicas) is not kept, the claim is dropped: the same
 * request again runs the action again, which every action allows (src/operations/).
 * A crash between the claim and the answer leaves the claim until its TTL: repeats then answer
 * 409 in progress, never run the action a second time.
 */
export class IdempotencyStore {
  readonly #redis: RedisClient;
  readonly #keys: Keys;
  readonly #ttlMs: number;

  constructor(redis: RedisClient, keys: Keys, ttlMs = IDEMPOTENCY_TTL_MS) {
    this.#redis = redis;
    this.#keys = keys;
    this.#ttlMs = ttlMs;
  }

  async claim(user: string, key: string, print: string): Promise<Claim> {
    const slot = this.#keys.idempotency(user, key);
    const pending: Slot = { state: 'pending', fingerprint: print };
    if ((await this.#redis.set(slot, JSON.stringify(pending), 'PX', this.#ttlMs, 'NX')) === 'OK') return { kind: 'first' };
    const text = await this.#redis.get(slot);
    // Expired between the two reads: claim again.
    if (text === null) return this.claim(user, key, print);
    const stored = JSON.parse(text) as Slot;
    if (stored.fingerprint !== print) return { kind: 'reused' };
    if (stored.state === 'pending') return { kind: 'in-progress' };
    return { kind: 'repeat', answer: { status: stored.status, body: stored.body } };
  }

  async answer(user: string, key: string, print: string, answer: StoredAnswer): Promise<void> {
    const slot = this.#keys.idempotency(user, key);
    if (answer.status >= 500) {
      await this.#redis.del(slot);
      return;
    }
    const done: Slot = { state: 'done', fingerprint: print, ...answer };
    await this.#redis.set(slot, JSON.stringify(done), 'PX', this.#ttlMs);
  }

  /** The request failed before it had an answer: the key is free again. */
  async release(user: string, key: string): Promise<void> {
    await this.#redis.del(this.#keys.idempotency(user, key));
  }
}
