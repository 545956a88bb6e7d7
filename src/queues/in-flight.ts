/**
 * Counts the jobs our processors are running, so shutdown knows when every in-flight job has
 * finished even when BullMQ's own close cannot tell (see `closeWorkers`).
 */
export class InFlight {
  #count = 0;
  #waiters: Array<() => void> = [];

  get count(): number {
    return this.#count;
  }

  start(): void {
    this.#count++;
  }

  end(): void {
    this.#count--;
    if (this.#count === 0) for (const resolve of this.#waiters.splice(0)) resolve();
  }

  /** Resolves once no job is running. */
  idle(): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}
