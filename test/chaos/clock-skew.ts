/**
 * Preload (`node --import <this file> src/worker.ts`) that runs the process clock CHAOS_CLOCK_SKEW_MS
 * ahead (default +30 s): `Date.now()`, `new Date()` and `Date()` all read the shifted clock, so does
 * every library in the process (pino's `time`, BullMQ's job timestamps and delays, the events' `at`).
 * `new Date(value)`, `Date.parse` and `Date.UTC` are untouched (they read no clock), and so is
 * `performance.now()`, which is monotonic and counts from the process's start, not from the epoch.
 *
 * What must not move with it: leases and every time guard of the ledger are judged by Redis's TIME, so
 * a worker whose clock runs ahead must still never take over a send lease early (a double send) nor
 * expire a transfer early. The chaos suite runs one such worker among the others to check exactly that.
 */
const skewMs = Number(process.env.CHAOS_CLOCK_SKEW_MS ?? '30000');
if (!Number.isFinite(skewMs)) throw new Error('CHAOS_CLOCK_SKEW_MS must be a number of milliseconds');

const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);

function SkewedDate(this: unknown, ...args: unknown[]): Date | string {
  // Called without `new`, Date() returns the current time as text.
  if (new.target === undefined) return new RealDate(realNow() + skewMs).toString();
  const time = args.length === 0 ? [realNow() + skewMs] : args;
  return Reflect.construct(RealDate, time, new.target) as Date;
}
// Same prototype (so `instanceof Date` and every method hold) and the real statics (parse, UTC).
SkewedDate.prototype = RealDate.prototype;
Object.setPrototypeOf(SkewedDate, RealDate);
Object.defineProperty(SkewedDate, 'now', { value: () => realNow() + skewMs, writable: true, configurable: true });

globalThis.Date = SkewedDate as unknown as DateConstructor;
