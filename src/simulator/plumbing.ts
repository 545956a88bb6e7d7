import type { Server, ServerResponse } from 'node:http';

/**
 * What every simulated provider's HTTP server needs besides its endpoints: sleeps that close() can
 * cut short, answers withheld by 'timeout' faults (destroyed on close), and a request limit.
 */
export class ServerPlumbing {
  /** Answers withheld by 'timeout' faults, destroyed on close. */
  readonly held = new Set<ServerResponse>();
  readonly #timers = new Set<NodeJS.Timeout>();

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resolve();
      }, ms);
      this.#timers.add(timer);
    });
  }

  /** Withholds `res` until close (a 'timeout' fault: processed, never answered). */
  hold(res: ServerResponse): void {
    this.held.add(res);
    res.on('close', () => this.held.delete(res));
  }

  async close(server: Server): Promise<void> {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    const closed = new Promise<void>((resolve) => {
      server.close(() => resolve());
    });
    for (const res of this.held) res.destroy();
    this.held.clear();
    server.closeAllConnections();
    await closed;
  }
}

/** A request limit of `rps` per second as a token bucket of one second's worth, refilled continuously (0: none). */
export class TokenBucket {
  #tokens = 0;
  #at = 0;
  #rps = 0;

  /** Takes one token when there is one; false when the limit is reached. */
  take(rps: number, now: number): boolean {
    if (rps <= 0) return true;
    if (this.#rps !== rps) {
      this.#tokens = rps;
      this.#at = now;
      this.#rps = rps;
    }
    this.#tokens = Math.min(rps, this.#tokens + ((now - this.#at) / 1000) * rps);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  /** Seconds until the next token (for Retry-After), at least 1. */
  waitSeconds(): number {
    return this.#rps <= 0 ? 1 : Math.max(1, Math.ceil((1 - this.#tokens) / this.#rps));
  }

  reset(): void {
    this.#tokens = 0;
    this.#at = 0;
    this.#rps = 0;
  }
}
