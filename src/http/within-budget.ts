/**
 * How long /metrics waits for its Redis reads, and the transfer lookups for the ledger: the contract says
 * /metrics answers within 2 s whatever Redis does; 1.5 s leaves half a second for the rest.
 */
export const SCRAPE_REDIS_BUDGET_MS = 1_500;

export const TIMED_OUT = Symbol('timed out');

/** `promise`'s value, or TIMED_OUT once `ms` passed (the promise goes on; its rejection is the caller's). */
export function withinBudget<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
