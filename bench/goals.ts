/**
 * The goals of `npm run bench:budget` and `npm run bench:scale`, in one place: budget.ts prints its own
 * beside each figure, and tools/docs/generate.ts puts both beside the committed results in
 * bench/README.md. (`npm run bench` records its targets in its result file: report.ts `targets()`.)
 * No side effects: the benchmarks themselves run on import, this module does not.
 */

/** bench:budget, each figure measured against the floor the budget R sets. */
export const BUDGET_GOALS = {
  /** First N submitted ÷ its floor N/R: at most. */
  firstNSubmitted: 1.3,
  /** New sends' p99 ÷ its floor K/R: at most. */
  sendP99: 2,
  /** Last transfer.broadcast after the txids appeared ÷ its floor 2(N+K)/R: at most. */
  lastBroadcast: 1.2,
  /** Upstream calls per transfer from txid to broadcast: at most. */
  callsPerTransfer: 2.2,
  /** Provider 429s: at most. */
  provider429s: 0,
  /** Share of R used while polls alone spend it: at least. */
  budgetUsedWhilePolling: 0.9,
  /** With the provider's webhook: txid shown → transfer.broadcast p99, over one budget interval 1/R, in s: at most. */
  wakeupP99OverIntervalS: 1,
} as const;

/** bench:scale, per size N, ours. */
export const SCALE_GOALS = {
  /** Redis commands per upstream call: at most. */
  redisCommandsPerCall: 60,
  /** Worker CPU per upstream call, ms: at most. */
  workerCpuMsPerCall: 1.5,
  /** Each per-call cost (commands, worker CPU, Redis CPU) at a larger N over the smallest N's: at most. */
  perCallGrowth: 1.2,
  /** Upstream calls per second ÷ R: at least. */
  budgetUsed: 0.97,
  /** Provider 429s: at most. */
  provider429s: 0,
  /** Redis bytes per tracked transfer at the largest N (smaller N carry the fixed part): at most. */
  bytesPerTransfer: 2048,
} as const;
