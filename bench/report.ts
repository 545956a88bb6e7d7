/** The benchmark's result: one object, printed as tables and written as JSON. */
import { readFileSync } from 'node:fs';
import { cpus, totalmem, release, platform } from 'node:os';
import type { MemoryResult } from './memory.ts';
import type { CpuShare } from './cpu.ts';
import { describeCommands, totalCommands } from './redis-stats.ts';
import type { LatencyResult, SweepPoint, ThroughputRound } from './submissions.ts';
import type { TrackingRound } from './tracking.ts';

/** Rounds of one side, and their median, which is the figure. */
export interface SubmitSide {
  perSecond: number;
  rounds: ThroughputRound[];
}

/** The submission rounds: ours, the bare worker, and (BENCH_SAME_WORK) the bare worker doing the same work. */
export interface SubmissionsResult {
  ours: SubmitSide;
  bare: SubmitSide;
  /** ours ÷ bare, submissions/s. */
  ratio: number;
  /** bench/bare-worker.ts submit-same-work: absent when BENCH_SAME_WORK=0 (and in results from before it). */
  sameWork?: SubmitSide;
  /** ours ÷ sameWork, submissions/s. */
  sameWorkRatio?: number;
}

export interface TrackSide {
  transfers: number;
  pollsPerSecond: number;
  rounds: TrackingRound[];
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export interface Target {
  name: string;
  target: string;
  value: number;
  unit: string;
  met: boolean;
}

export interface BenchResult {
  version: 1;
  finishedAt: string;
  quick: boolean;
  machine: { cpu: string; cores: number; memoryGiB: number; os: string };
  versions: { node: string; redis: string; bullmq: string; ioredis: string; undici: string };
  redis: { source: string };
  setup: Record<string, string | number>;
  submissions: SubmissionsResult;
  latency: { ours: LatencyResult; bare: LatencyResult };
  /** Latency of both sides at several offered rates (fractions of ours' maximum), the half-load point included. */
  latencySweep: SweepPoint[];
  tracking: { ours: TrackSide; bare: TrackSide; ratio: number };
  memory: MemoryResult;
  targets: Target[];
  notes: string[];
}

/** BENCH_SUBMISSIONS_ONLY: the setup and the submission rounds, nothing else. */
export interface SubmissionsOnlyResult {
  version: 1;
  kind: 'submissions';
  finishedAt: string;
  quick: boolean;
  machine: BenchResult['machine'];
  versions: BenchResult['versions'];
  redis: BenchResult['redis'];
  setup: Record<string, string | number>;
  submissions: SubmissionsResult;
  notes: string[];
}

export function packageVersion(name: string): string {
  try {
    const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
    return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export function machine(): BenchResult['machine'] {
  const list = cpus();
  return {
    cpu: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    os: `${platform()} ${release()}`,
  };
}

export function targets(result: Omit<BenchResult, 'targets' | 'notes' | 'version' | 'finishedAt'>): Target[] {
  return [
    {
      name: 'submissions/s, ours ÷ bare',
      target: '≥ 0.70',
      value: result.submissions.ratio,
      unit: '×',
      met: result.submissions.ratio >= 0.7,
    },
    {
      // Issue 31's goal (it was 0.80 before): a poll reads the ledger and the answer, the bare worker neither.
      name: 'tracking polls/s, ours ÷ bare',
      target: '≥ 0.90',
      value: result.tracking.ratio,
      unit: '×',
      met: result.tracking.ratio >= 0.9,
    },
    {
      name: 'Redis memory per tracked transfer',
      target: '≤ 2048 B',
      value: result.memory.bytesPerTransfer,
      unit: 'B',
      met: result.memory.bytesPerTransfer <= 2048,
    },
    {
      // Both sides run at the same offered rate (half of ours' maximum); an absolute bound would judge
      // the machine (bare itself misses 20 ms here), the ratio judges the worker.
      name: 'p99 enqueue → submitted at half load, ours ÷ bare',
      target: '≤ 1.30',
      value: result.latency.ours.p99Ms / result.latency.bare.p99Ms,
      unit: '×',
      met: result.latency.ours.p99Ms / result.latency.bare.p99Ms <= 1.3,
    },
  ];
}

/** First column left-aligned, the others right-aligned (or all left with `leftAligned`). */
function table(rows: string[][], leftAligned = false): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)));
  return rows
    .map((row, index) => {
      const line = row
        .map((cell, column) => (column === 0 || leftAligned ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!)))
        .join('  ')
        .trimEnd();
      return index === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}

/** The most CPU other processes used in any of the windows, in cores ("n/a" off Linux). */
function otherCpu(shares: Array<CpuShare | undefined>): string {
  const known = shares.filter((share): share is CpuShare => share !== undefined);
  if (known.length === 0) return 'n/a';
  return `≤ ${Math.max(...known.map((share) => share.otherCores)).toFixed(2)} cores`;
}

/** The round whose rate is the median (the lower middle one of an even number). */
export function medianRound<R>(rounds: R[], rate: (round: R) => number): R | undefined {
  const sorted = [...rounds].sort((a, b) => rate(a) - rate(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/**
 * Per job (or poll), the CPU time each process of the benchmark spent, in µs by process label, from
 * the round with the median rate; undefined when no CPU was recorded (off Linux).
 */
export function cpuMicrosPerJob<R extends { cpu: CpuShare | undefined; seconds: number }>(
  rounds: R[],
  count: (round: R) => number,
): Record<string, number> | undefined {
  const round = medianRound(rounds, (r) => count(r) / r.seconds);
  const share = round?.cpu;
  if (!round || !share) return undefined;
  return Object.fromEntries(Object.entries(share.processes).map(([label, cores]) => [label, (cores * share.seconds * 1e6) / count(round)]));
}

/** Where the CPU goes: cpuMicrosPerJob of each side, as a table. The worker under test is the side's own process. */
function cpuPerJob<R extends { cpu: CpuShare | undefined; seconds: number }>(
  unit: string,
  sides: Array<[string, R[]]>,
  count: (round: R) => number,
): string {
  const rows: string[][] = [[`CPU per ${unit} (µs, median round)`, 'worker', 'redis', 'simulator', 'load generator', 'all']];
  for (const [label, rounds] of sides) {
    const micros = cpuMicrosPerJob(rounds, count);
    if (!micros) return `CPU per ${unit}: n/a`;
    const parts = [micros[label], micros['redis-server'], micros.simulator, micros['load generator']].map((value) => value ?? 0);
    rows.push([label, ...parts.map((value) => n0(value)), n0(parts.reduce((sum, value) => sum + value, 0))]);
  }
  return table(rows);
}

const n0 = (value: number) => Math.round(value).toLocaleString('en-US');
const n2 = (value: number) => value.toFixed(2);
const ms = (value: number) => value.toFixed(2);

/** The sides of the submission rounds: label in the tables, process label in the CPU accounting, figures. */
function submitSides(s: SubmissionsResult): Array<[string, string, SubmitSide]> {
  return [
    ['ours', 'ours', s.ours],
    ['bare BullMQ (1 POST + 1 XADD)', 'bare', s.bare],
    ...(s.sameWork
      ? [['bare, same work (lease, POST, mark + XADD, tracking job)', 'bare-same-work', s.sameWork] as [string, string, SubmitSide]]
      : []),
  ];
}

/** The submission rounds as tables: rates, CPU per submission, Redis commands, and ours ÷ each other side. */
export function formatSubmissions(s: SubmissionsResult): string[] {
  const out: string[] = [];
  const sides = submitSides(s);
  out.push('submissions end to end: backlog enqueued into the paused queue, then resume → its last transfer.submitted; rounds alternate');
  out.push(
    table([
      ['', 'jobs/round', 'rounds (per second)', 'median/s', 'other CPU'],
      ...sides.map(([label, , side]) => [
        label,
        n0(side.rounds[0]?.jobs ?? 0),
        side.rounds.map((round) => n0(round.perSecond)).join(' / '),
        n0(side.perSecond),
        otherCpu(side.rounds.map((round) => round.cpu)),
      ]),
      ['ratio ours ÷ bare', '', '', n2(s.ratio), ''],
      ...(s.sameWorkRatio === undefined ? [] : [['ratio ours ÷ bare, same work', '', '', n2(s.sameWorkRatio), '']]),
    ]),
  );
  out.push(
    cpuPerJob(
      'submission',
      sides.map(([, role, side]) => [role, side.rounds]),
      (round) => round.jobs,
    ),
  );
  const commands = (side: SubmitSide) => medianRound(side.rounds, (r) => r.perSecond)?.redisCommands;
  out.push('Redis commands per submission (median round; inside scripts included):');
  for (const [, role, side] of sides) out.push(`  ${role} ${describeCommands(commands(side))}`);
  // ours ÷ each other side, per submission: the cost ratios are steadier than the rates on a busy machine
  const ours = cpuMicrosPerJob(s.ours.rounds, (round) => round.jobs);
  const ratio = (mine: number | undefined, theirs: number | undefined) =>
    mine !== undefined && theirs !== undefined && theirs > 0 ? n2(mine / theirs) : 'n/a';
  const rows: string[][] = [['ours ÷', 'submissions/s', 'worker CPU per submission', 'Redis CPU', 'Redis commands']];
  for (const [label, role, side] of sides.slice(1)) {
    const other = cpuMicrosPerJob(side.rounds, (round) => round.jobs);
    rows.push([
      label,
      n2(s.ours.perSecond / side.perSecond),
      ratio(ours?.ours, other?.[role]),
      ratio(ours?.['redis-server'], other?.['redis-server']),
      ratio(totalCommands(commands(s.ours)), totalCommands(commands(side))),
    ]);
  }
  out.push(table(rows));
  return out;
}

/** BENCH_SUBMISSIONS_ONLY's result as text. */
export function formatSubmissionsOnly(result: SubmissionsOnlyResult): string {
  const { machine: m, versions: v } = result;
  const out = [
    `custody-transfer-worker benchmark, submissions only${result.quick ? ' (BENCH_QUICK: tiny sizes, figures not meaningful)' : ''}, ${result.finishedAt}`,
    `machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}`,
    `node ${v.node}, redis ${v.redis} (${result.redis.source}), bullmq ${v.bullmq}, ioredis ${v.ioredis}, undici ${v.undici}`,
    '',
    table([['setting', 'value'], ...Object.entries(result.setup).map(([key, value]) => [key, String(value)])], true),
    '',
    ...formatSubmissions(result.submissions),
  ];
  if (result.notes.length > 0) out.push('', 'notes', ...result.notes.map((note) => `- ${note}`));
  return out.join('\n');
}

export function format(result: BenchResult): string {
  const out: string[] = [];
  const { machine: m, versions: v, submissions: s, latency: l, tracking: t, memory: mem } = result;
  out.push(
    `custody-transfer-worker benchmark${result.quick ? ' (BENCH_QUICK: tiny sizes, figures not meaningful)' : ''}, ${result.finishedAt}`,
  );
  out.push(`machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}`);
  out.push(`node ${v.node}, redis ${v.redis} (${result.redis.source}), bullmq ${v.bullmq}, ioredis ${v.ioredis}, undici ${v.undici}`);
  out.push('');
  out.push('setup');
  out.push(table([['setting', 'value'], ...Object.entries(result.setup).map(([key, value]) => [key, String(value)])], true));
  out.push('');
  out.push(...formatSubmissions(s));
  out.push('');
  out.push(`latency enqueue → transfer.submitted seen on the stream, paced at half of ours' maximum (${n0(l.ours.offeredPerSecond)}/s)`);
  out.push(
    table([
      ['', 'jobs', 'offered/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'mean ms', 'worker CPU', 'other CPU'],
      ...(
        [
          ['ours', l.ours, 'ours'],
          ['bare (same rate)', l.bare, 'bare'],
        ] as const
      ).map(([label, r, side]) => [
        label,
        n0(r.count),
        n0(r.offeredPerSecond),
        ms(r.p50Ms),
        ms(r.p90Ms),
        ms(r.p99Ms),
        ms(r.maxMs),
        ms(r.meanMs),
        r.cpu ? `${(r.cpu.processes[side] ?? 0).toFixed(2)} cores` : 'n/a',
        otherCpu([r.cpu]),
      ]),
    ]),
  );
  if (result.latencySweep.length > 1) {
    out.push("latency at other offered rates (fractions of ours' maximum; both sides at the same rate, ours first)");
    out.push(
      table([
        ['offered/s', 'fraction', 'ours p50', 'ours p99', 'bare p50', 'bare p99', 'p99 ours ÷ bare', 'ours CPU', 'other CPU'],
        ...result.latencySweep.map((point) => [
          n0(point.offeredPerSecond),
          n2(point.fraction),
          ms(point.ours.p50Ms),
          ms(point.ours.p99Ms),
          ms(point.bare.p50Ms),
          ms(point.bare.p99Ms),
          n2(point.ours.p99Ms / point.bare.p99Ms),
          point.ours.cpu ? `${(point.ours.cpu.processes.ours ?? 0).toFixed(2)} cores` : 'n/a',
          otherCpu([point.ours.cpu, point.bare.cpu]),
        ]),
      ]),
    );
  }
  out.push('');
  out.push('tracking polls: get-transfer requests counted at the simulator (txid never appears); rounds alternate');
  out.push(
    table([
      ['', 'transfers', 'rounds (per second)', 'median/s', 'errors', 'other CPU'],
      ...(
        [
          ['ours', t.ours],
          ['bare BullMQ (1 POST + re-delay)', t.bare],
        ] as const
      ).map(([label, side]) => [
        label,
        n0(side.transfers),
        side.rounds.map((round) => n0(round.pollsPerSecond)).join(' / '),
        n0(side.pollsPerSecond),
        n0(side.rounds.reduce((sum, round) => sum + round.errors, 0)),
        otherCpu(side.rounds.map((round) => round.cpu)),
      ]),
      ['ratio ours ÷ bare', '', '', n2(t.ratio), '', ''],
    ]),
  );
  out.push(
    cpuPerJob(
      'poll',
      [
        ['ours', t.ours.rounds],
        ['bare', t.bare.rounds],
      ],
      (round) => round.polls,
    ),
  );
  out.push(
    `Redis commands per poll (median round; inside scripts included): ours ${describeCommands(medianRound(t.ours.rounds, (r) => r.pollsPerSecond)?.redisCommands)}`,
  );
  out.push(`  bare ${describeCommands(medianRound(t.bare.rounds, (r) => r.pollsPerSecond)?.redisCommands)}`);
  out.push('');
  out.push(
    `Redis memory: ${n0(mem.tracked)} transfers tracked (loaded in ${n2(mem.loadSeconds)} s), used_memory ${n0(mem.usedMemoryBefore)} → ${n0(mem.usedMemoryAfter)} B: ` +
      `${n0(mem.bytesPerTransfer)} B per tracked transfer (${n0(mem.bytesPerTransferWithoutEvents)} B without the events stream), ` +
      `${n2(mem.keysPerTransfer)} keys per transfer`,
  );
  out.push(
    table([
      ['part (MEMORY USAGE, per transfer)', 'bytes', 'encoding'],
      ...mem.breakdown.map((p) => [p.part, n0(p.bytesPerTransfer), p.encoding]),
    ]),
  );
  out.push(
    'largest hash fields of one transfer: ' +
      mem.largestFields.map((f) => `${f.key.split(':').slice(-2, -1)[0]}.${f.field} ${f.bytes} B`).join(', '),
  );
  out.push('');
  out.push('targets (measured, not asserted)');
  out.push(
    table([
      ['', 'target', 'measured', 'status'],
      ...result.targets.map((target) => [
        target.name,
        target.target,
        `${target.unit === 'B' ? n0(target.value) : n2(target.value)} ${target.unit}`,
        target.met ? 'met' : 'MISSED',
      ]),
    ]),
  );
  if (result.notes.length > 0) {
    out.push('');
    out.push('notes');
    for (const note of result.notes) out.push(`- ${note}`);
  }
  return out.join('\n');
}
