/**
 * The transfers that a tracker found nothing left to do for in another transfer's answer (not ours,
 * already ended, or already found with their txid, or being settled by a concurrent poll), remembered for a while by one worker process so
 * that the answers listing them again do not read their records again: a provider that does not narrow
 * its lookups lists the wallet's newest transfers, txid and all, in every answer, long after they were
 * broadcast. At most `capacity` of them, the oldest forgotten first; each for `ttlMs`. Forgetting one
 * too soon costs a read; remembering one wrongly (a ledger restored from an older copy) costs only the
 * poll that another answer would have saved: its own tracker goes on polling.
 */
export class SettledListing {
  readonly #until = new Map<string, number>();
  readonly #ttlMs: number;
  readonly #capacity: number;
  readonly #now: () => number;

  constructor(ttlMs: number, capacity: number, now: () => number = Date.now) {
    this.#ttlMs = ttlMs;
    this.#capacity = capacity;
    this.#now = now;
  }

  has(sequenceId: string): boolean {
    const until = this.#until.get(sequenceId);
    if (until === undefined) return false;
    if (until > this.#now()) return true;
    this.#until.delete(sequenceId);
    return false;
  }

  add(sequenceId: string): void {
    this.#until.delete(sequenceId);
    this.#until.set(sequenceId, this.#now() + this.#ttlMs);
    if (this.#until.size > this.#capacity) this.#until.delete(this.#until.keys().next().value as string);
  }

  delete(sequenceId: string): void {
    this.#until.delete(sequenceId);
  }

  get size(): number {
    return this.#until.size;
  }
}
