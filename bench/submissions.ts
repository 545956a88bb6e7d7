/**
 * Submissions end to end, the same way for ours and the bare worker:
 *
 *  - throughput: after a warm-up batch, in rounds: the queue is paused, a backlog of N jobs is
 *    enqueued, the queue is resumed, and the rate is N / (resume → the N-th `transfer.submitted`
 *    entry, by its stream id, i.e. the Redis clock when the event was written). run.ts alternates
 *    rounds of ours and of the bare worker, so both meet the same background load.
 *  - latency: jobs enqueued one by one at a fixed rate for some seconds; each latency is from just
 *    before the enqueue call to the moment a stream reader (XREAD BLOCK) sees its event.
 */
import type { Redis } from 'ioredis';
import type { ValidSamplePayload } from '../tools/sample-payloads.ts';
import { cpuWindow, type CpuShare } from './cpu.ts';
import { commandWindow, type CommandCounts } from './redis-stats.ts';
import { entryMs, forEachLimited, lastEntryId, readStream, settlesWithin, sleep, waitForStreamLength, type SubmitTarget } from './load.ts';

/** Jobs in flight while the load generator fills a queue (not a measured figure). */
const ENQUEUE_PARALLEL = 128;

export interface ThroughputRound {
  jobs: number;
  seconds: number;
  perSecond: number;
  /** CPU used meanwhile by the benchmark's processes and by everything else (cores). */
  cpu: CpuShare | undefined;
  /** Redis commands per job (INFO commandstats; commands inside scripts included). */
  redisCommands: CommandCounts;
}

export interface LatencyResult {
  offeredPerSecond: number;
  seconds: number;
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
  /** [percentile, ms] pairs from p0 to p100, denser in the tail (the chart's curve). */
  percentiles: Array<[number, number]>;
  cpu: CpuShare | undefined;
}

/** One rate of the latency sweep: both sides' figures at the same offered rate. */
export interface SweepPoint {
  /** Offered rate as a fraction of ours' maximum (submissions median). */
  fraction: number;
  offeredPerSecond: number;
  ours: SweepSide;
  bare: SweepSide;
}

export type SweepSide = Pick<LatencyResult, 'p50Ms' | 'p90Ms' | 'p99Ms' | 'maxMs' | 'count' | 'cpu'>;

export function sweepPoint(fraction: number, ours: LatencyResult, bare: LatencyResult): SweepPoint {
  const side = ({ p50Ms, p90Ms, p99Ms, maxMs, count, cpu }: LatencyResult): SweepSide => ({ p50Ms, p90Ms, p99Ms, maxMs, count, cpu });
  return { fraction, offeredPerSecond: ours.offeredPerSecond, ours: side(ours), bare: side(bare) };
}

function drainTimeoutMs(jobs: number): number {
  // generous: 50 jobs/s at worst, plus a minute
  return 60_000 + jobs * 20;
}

/** Runs `jobs` through the target and waits for all their events (JIT, connections, token). */
export async function warmUp(redis: Redis, target: SubmitTarget, jobs: ValidSamplePayload[]): Promise<void> {
  const start = await redis.xlen(target.stream);
  await forEachLimited(jobs, ENQUEUE_PARALLEL, target.enqueue);
  await waitForStreamLength(redis, target.stream, start + jobs.length, drainTimeoutMs(jobs.length), `${target.label} warm-up`);
}

/** One backlog: enqueued into the paused queue, then drained; the clock runs from resume to the last event. */
export async function throughputRound(redis: Redis, target: SubmitTarget, backlog: ValidSamplePayload[]): Promise<ThroughputRound> {
  await target.queue.pause();
  await forEachLimited(backlog, ENQUEUE_PARALLEL, target.enqueue);
  const before = await redis.xlen(target.stream);
  // Let the enqueue burst settle (Redis, the worker's idle loop) before the clock starts.
  await sleep(500);
  const commands = await commandWindow(redis);
  const cpu = cpuWindow();
  const startedAt = Date.now();
  await target.queue.resume();
  await waitForStreamLength(redis, target.stream, before + backlog.length, drainTimeoutMs(backlog.length), `${target.label} backlog`);
  const share = cpu.end();
  const redisCommands = await commands.end(backlog.length);
  const endedAt = entryMs(await lastEntryId(redis, target.stream));
  const seconds = Math.max(1, endedAt - startedAt) / 1000;
  return { jobs: backlog.length, seconds, perSecond: backlog.length / seconds, cpu: share, redisCommands };
}

/** Where the latency curve is sampled (the chart and the JSON): dense in the tail. */
const CURVE_POINTS = [
  ...Array.from({ length: 19 }, (_, index) => index * 5),
  ...Array.from({ length: 9 }, (_, index) => 91 + index),
  99.5,
  99.8,
  99.9,
  100,
];

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export async function measureLatency(
  redis: Redis,
  target: SubmitTarget,
  perSecond: number,
  seconds: number,
  jobs: ValidSamplePayload[],
): Promise<LatencyResult> {
  const total = Math.min(jobs.length, Math.max(1, Math.round(perSecond * seconds)));
  const enqueuedAt = new Map<string, number>();
  const latencies: number[] = [];
  let allSeen: () => void = () => {};
  const seen = new Promise<void>((resolve) => {
    allSeen = resolve;
  });
  const reader = readStream(redis, target.stream, await lastEntryId(redis, target.stream), (event, sequenceId) => {
    if (event !== 'transfer.submitted') return;
    const at = enqueuedAt.get(sequenceId);
    if (at === undefined) return;
    latencies.push(performance.now() - at);
    enqueuedAt.delete(sequenceId);
    if (latencies.length === total) allSeen();
  });

  const failures: unknown[] = [];
  const pending = new Set<Promise<void>>();
  const cpu = cpuWindow();
  const started = performance.now();
  let sent = 0;
  try {
    // Open loop: the schedule does not wait for earlier jobs, so a slow worker shows up as latency.
    while (sent < total) {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * perSecond) + 1);
      for (; sent < due; sent++) {
        const payload = jobs[sent]!;
        enqueuedAt.set(payload.halfSigned.sequenceId, performance.now());
        const call = target.enqueue(payload).catch((error: unknown) => {
          failures.push(error);
        });
        pending.add(call);
        void call.finally(() => pending.delete(call));
      }
      await sleep(1);
    }
    const offeredSeconds = (performance.now() - started) / 1000;
    const share = cpu.end();
    await Promise.all(pending);
    if (failures.length > 0) throw new Error(`${target.label} latency: ${failures.length} enqueue calls failed: ${String(failures[0])}`);
    if (!(await settlesWithin(seen, 60_000))) {
      throw new Error(`${target.label} latency: ${latencies.length} of ${total} events seen within 60 s`);
    }
    const sorted = [...latencies].sort((a, b) => a - b);
    return {
      offeredPerSecond: total / offeredSeconds,
      seconds: offeredSeconds,
      count: total,
      p50Ms: percentile(sorted, 50),
      p90Ms: percentile(sorted, 90),
      p99Ms: percentile(sorted, 99),
      maxMs: sorted[sorted.length - 1]!,
      meanMs: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
      percentiles: CURVE_POINTS.map((p) => [p, percentile(sorted, p)]),
      cpu: share,
    };
  } finally {
    await reader.stop();
  }
}
