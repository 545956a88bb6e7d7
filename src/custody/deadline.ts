/**
 * A deadline as an AbortSignal, whose timer is cleared once the work it bounds has ended. It aborts
 * like `AbortSignal.timeout` (reason: a DOMException named `TimeoutError`), or with the reason of the
 * outer signal it follows, whichever comes first. `AbortSignal.timeout` cannot be cancelled: the timer
 * of every request fired long after the request had ended (15 s, 35 s) and built a DOMException and its
 * stack, and `AbortSignal.any` added a composite signal per request: work spent on deadlines of calls
 * already answered (bench/README.md, "What the profile found").
 */
export class Deadline {
  readonly #controller = new AbortController();
  readonly #timer: NodeJS.Timeout;
  readonly #outer: AbortSignal | undefined;
  readonly #onOuterAbort: (() => void) | undefined;

  constructor(ms: number, outer?: AbortSignal) {
    const controller = this.#controller;
    this.#timer = setTimeout(() => controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), ms);
    // Like AbortSignal.timeout: a pending deadline alone does not keep the process alive.
    this.#timer.unref();
    if (outer) {
      if (outer.aborted) {
        controller.abort(outer.reason);
      } else {
        this.#outer = outer;
        this.#onOuterAbort = () => controller.abort(outer.reason);
        outer.addEventListener('abort', this.#onOuterAbort, { once: true });
      }
    }
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The work ended: the deadline will not fire, and no longer follows the outer signal. */
  clear(): void {
    clearTimeout(this.#timer);
    if (this.#onOuterAbort) this.#outer?.removeEventListener('abort', this.#onOuterAbort);
  }
}
