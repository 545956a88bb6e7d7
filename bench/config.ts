import { join } from 'node:path';

/**
 * The benchmark's settings, read once from BENCH_* variables. BENCH_QUICK=1 swaps every default for a
 * tiny one (the smoke test); an explicit variable still wins over either.
 */
export interface BenchConfig {
  quick: boolean;
  /** BENCH_REDIS_URL: use this Redis (fresh key prefixes, never a flush) instead of a private one. */
  redisUrl: string | undefined;
  /** BENCH_REDIS_ARGS: extra redis-server arguments for the private Redis (e.g. `--hash-max-listpack-value 256`). */
  redisArgs: string[];
  /** BENCH_WORKER_SCRIPT: the worker entry to measure (default src/worker.ts), e.g. a changed copy. */
  workerScript: string | undefined;
  /** BENCH_SAME_WORK (default on; 0 turns it off): a third side in the submission rounds, bench/bare-worker.ts's submit-same-work. */
  sameWork: boolean;
  /** BENCH_SUBMISSIONS_ONLY=1: warm-up and submission rounds only (no latency, tracking or memory phase), a result of its own. */
  submissionsOnly: boolean;
  /** Jobs in each measured backlog of the submission phase (ours and bare each). */
  submissions: number;
  /** Measured rounds per side (submissions and tracking), alternating ours and bare; the median counts. */
  rounds: number;
  /** Jobs run before the measurement so both workers are warm (JIT, connections, token). */
  warmup: number;
  /** SUBMIT_CONCURRENCY of ours and the concurrency of the bare submit worker. */
  submitConcurrency: number;
  /** Keep-alive connections to the simulator (CUSTODY_CONNECTIONS; the bare worker's pool too). */
  connections: number;
  /** Length of the paced latency run and of each tracking window (each round). */
  seconds: number;
  /** Fractions of ours' maximum rate at which both sides' latency is measured too (the half-load point is always measured). */
  sweep: number[];
  /** Length of each sweep run. */
  sweepSeconds: number;
  /** Transfers being tracked while polls are counted. */
  trackTransfers: number;
  /** TRACK_CONCURRENCY of ours and the concurrency of the bare tracking worker. */
  trackConcurrency: number;
  /** TRACK_POLL_MIN = TRACK_POLL_MAX during the tracking phase (10 ms is the configuration's floor). */
  trackPollMs: number;
  /** Polling before each tracking window opens. */
  trackWarmupSeconds: number;
  /** Transfers left in tracking for the memory measurement. */
  tracked: number;
  /** SUBMIT_CONCURRENCY while loading the memory phase (a fast way to get there, not a measured figure). */
  memoryConcurrency: number;
  /** Write `--cpu-prof` profiles of the worker children to this directory. */
  cpuProfDir: string | undefined;
  /** Where the JSON result goes. */
  resultFile: string;
  /** Echo the children's output (debugging). */
  verbose: boolean;
}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 1): number {
  const text = env[name]?.trim();
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) < min) throw new Error(`${name}: must be a whole number of at least ${min}`);
  return Number(text);
}

/** A comma-separated list of fractions, each above 0 and below 1; empty turns the sweep off. */
function fractions(env: NodeJS.ProcessEnv, name: string, fallback: number[]): number[] {
  const text = env[name];
  if (text === undefined) return fallback;
  const parts = text
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  for (const part of parts) {
    if (!/^0?\.\d+$/.test(part) || Number(part) <= 0)
      throw new Error(`${name}: must be a comma-separated list of fractions between 0 and 1, e.g. 0.1,0.3`);
  }
  return [...new Set(parts.map(Number))].sort((a, b) => a - b);
}

function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  return ['1', 'true', 'yes'].includes((env[name] ?? '').trim().toLowerCase());
}

/**
 * `resultsDir`: where `latest.json` goes (`quick.json` for BENCH_QUICK, so it never replaces a real run's
 * figures; `submissions.json` for BENCH_SUBMISSIONS_ONLY, `quick-submissions.json` for both).
 */
export function readBenchConfig(env: NodeJS.ProcessEnv, resultsDir: string): BenchConfig {
  const quick = flag(env, 'BENCH_QUICK');
  const submissionsOnly = flag(env, 'BENCH_SUBMISSIONS_ONLY');
  const resultName = [quick && 'quick', submissionsOnly && 'submissions'].filter(Boolean).join('-') || 'latest';
  const pick = (full: number, small: number) => (quick ? small : full);
  const cpuProf = env.BENCH_CPU_PROF?.trim();
  return {
    quick,
    redisUrl: env.BENCH_REDIS_URL?.trim() || undefined,
    redisArgs: (env.BENCH_REDIS_ARGS ?? '').split(/\s+/).filter((arg) => arg !== ''),
    workerScript: env.BENCH_WORKER_SCRIPT?.trim() || undefined,
    sameWork: !['0', 'false', 'no'].includes((env.BENCH_SAME_WORK ?? '').trim().toLowerCase()),
    submissionsOnly,
    submissions: int(env, 'BENCH_SUBMISSIONS', pick(20_000, 300)),
    rounds: int(env, 'BENCH_ROUNDS', pick(3, 1)),
    warmup: int(env, 'BENCH_WARMUP', pick(3_000, 100)),
    submitConcurrency: int(env, 'BENCH_CONCURRENCY', 64),
    connections: int(env, 'BENCH_CONNECTIONS', 64),
    seconds: int(env, 'BENCH_SECONDS', pick(10, 2)),
    sweep: fractions(env, 'BENCH_SWEEP', quick ? [0.25] : [0.1, 0.2, 0.3, 0.4]),
    sweepSeconds: int(env, 'BENCH_SWEEP_SECONDS', pick(10, 1)),
    trackTransfers: int(env, 'BENCH_TRACK_TRANSFERS', pick(2_000, 100)),
    trackConcurrency: int(env, 'BENCH_TRACK_CONCURRENCY', 64),
    trackPollMs: int(env, 'BENCH_TRACK_POLL_MS', 10, 10),
    trackWarmupSeconds: int(env, 'BENCH_TRACK_WARMUP_SECONDS', pick(2, 1), 0),
    tracked: int(env, 'BENCH_TRACKED', pick(100_000, 1_000)),
    memoryConcurrency: int(env, 'BENCH_MEMORY_CONCURRENCY', 128),
    cpuProfDir: cpuProf && cpuProf !== '0' ? (cpuProf === '1' ? join(resultsDir, 'prof') : cpuProf) : undefined,
    resultFile: env.BENCH_RESULT_FILE?.trim() || join(resultsDir, `${resultName}.json`),
    verbose: flag(env, 'BENCH_VERBOSE'),
  };
}
