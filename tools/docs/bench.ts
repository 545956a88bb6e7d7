/**
 * The tables of bench/README.md, from the committed result files (bench/results/latest.json, scale.json,
 * budget.json) and the goals beside them (bench/report.ts records `npm run bench`'s targets in its
 * result; bench/goals.ts holds the others). Derived figures (per core, per GiB, poll intervals) are
 * computed here from those files and the configuration's defaults, so the page states none of its own.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { SizeResult as BudgetSize } from '../../bench/budget.ts';
import { BUDGET_GOALS, SCALE_GOALS } from '../../bench/goals.ts';
import { cpuMicrosPerJob, medianRound, type BenchResult } from '../../bench/report.ts';
import type { SizeResult as ScaleSize } from '../../bench/scale.ts';
import { totalCommands, type CommandCounts } from '../../bench/redis-stats.ts';
import { loadConfig } from '../../src/config/config.ts';
import { code, table } from './markdown.ts';

const RESULTS = fileURLToPath(new URL('../../bench/results/', import.meta.url));

function readResult<T>(name: string): T {
  return JSON.parse(readFileSync(`${RESULTS}${name}`, 'utf8')) as T;
}

interface ScaleFile {
  finishedAt: string;
  complete: boolean;
  quick: boolean;
  command: string;
  machine: BenchResult['machine'];
  settings: { rps: number; windowSeconds: number; trackPollMin: string; trackPollMax: string };
  results: ScaleSize[];
}

interface BudgetFile {
  finishedAt: string;
  machine: BenchResult['machine'];
  results: BudgetSize[];
}

const n0 = (value: number) => Math.round(value).toLocaleString('en-US');
const n1 = (value: number) => value.toFixed(1);
const thousands = (value: number) => n0(Math.round(value / 1000) * 1000);
const n2 = (value: number) => value.toFixed(2);
const pct = (share: number) => `${(share * 100).toFixed(1)} %`;
const day = (iso: string) => iso.slice(0, 10);
const machineText = (m: BenchResult['machine']) => `${m.cpu}, ${m.cores} cores`;

/** "met", or where it was missed (`labels[i]` for each false `met[i]`). */
function status(met: readonly boolean[], labels: readonly string[]): string {
  const missed = labels.filter((_, index) => !met[index]);
  return missed.length === 0 ? 'met' : `**missed** (${missed.join(', ')})`;
}

// ---------------------------------------------------------------------------------------------------
// npm run bench (latest.json)

function latest(): BenchResult {
  const result = readResult<BenchResult>('latest.json');
  if (result.quick) throw new Error('bench/results/latest.json is a BENCH_QUICK run: its figures mean nothing');
  return result;
}

function latestCaption(result: BenchResult): string {
  const v = result.versions;
  return (
    `From [\`results/latest.json\`](results/latest.json), a full run finished ${day(result.finishedAt)} on ` +
    `${machineText(result.machine)}; Node ${v.node}, Redis ${v.redis}, BullMQ ${v.bullmq}.`
  );
}

export function benchTargets(): string {
  const result = latest();
  const rows = result.targets.map((target) => [
    target.name,
    target.target,
    `${target.unit === 'B' ? n0(target.value) : n2(target.value)} ${target.unit}`,
    target.met ? 'met' : '**missed**',
  ]);
  return `${latestCaption(result)}\n\n${table(['target', 'goal', 'measured', ''], rows)}`;
}

/** CPU µs per job of the side's worker, of Redis and of all the benchmark's processes. */
function cpuParts(micros: Record<string, number> | undefined, side: string): number[] | undefined {
  if (!micros) return undefined;
  const all = Object.entries(micros)
    .filter(([label]) => label === side || !['ours', 'bare', 'bare-same-work'].includes(label))
    .reduce((sum, [, value]) => sum + value, 0);
  return [micros[side] ?? 0, micros['redis-server'] ?? 0, all];
}

/** The half-load point (the highest fraction) in full, the lower rates' p99 in one row. */
function latencyRows(sweep: BenchResult['latencySweep']): string[][] {
  const half = sweep.find((point) => point.fraction === 0.5) ?? sweep.at(-1);
  if (!half) return [];
  const lower = sweep.filter((point) => point !== half);
  const rows = [
    [
      `latency p50 / p99 ms at ${n1(half.fraction)} × ours' maximum (${n0(half.offeredPerSecond)}/s)`,
      `${n1(half.ours.p50Ms)} / ${n1(half.ours.p99Ms)}`,
      `${n1(half.bare.p50Ms)} / ${n1(half.bare.p99Ms)}`,
      `p99 ${n2(half.ours.p99Ms / half.bare.p99Ms)}`,
    ],
  ];
  if (lower.length === 0) return rows;
  const each = (value: (point: (typeof sweep)[number]) => string) => lower.map(value).join(' / ');
  rows.push([
    `latency p99 ms at ${each((point) => n1(point.fraction))} × (${each((point) => n0(point.offeredPerSecond))}/s)`,
    each((point) => n1(point.ours.p99Ms)),
    each((point) => n1(point.bare.p99Ms)),
    each((point) => n2(point.ours.p99Ms / point.bare.p99Ms)),
  ]);
  return rows;
}

export function benchFigures(): string {
  const { submissions: s, tracking: t, latencySweep } = latest();
  const sides = ['ours', 'bare'] as const;
  const cpuCell = (parts: number[] | undefined) => (parts ? parts.map(n0).join(' / ') : 'n/a');
  const submitCpu = sides.map((side) =>
    cpuCell(
      cpuParts(
        cpuMicrosPerJob(s[side].rounds, (round) => round.jobs),
        side,
      ),
    ),
  );
  const pollCpu = sides.map((side) =>
    cpuCell(
      cpuParts(
        cpuMicrosPerJob(t[side].rounds, (round) => round.polls),
        side,
      ),
    ),
  );
  const commandsCell = (counts: CommandCounts | undefined) => `${n1(totalCommands(counts))} (${n1(counts?.evalsha ?? 0)})`;
  const submitCommands = sides.map((side) => commandsCell(medianRound(s[side].rounds, (round) => round.perSecond)?.redisCommands));
  const pollCommands = sides.map((side) => commandsCell(medianRound(t[side].rounds, (round) => round.pollsPerSecond)?.redisCommands));
  const rows: string[][] = [
    ['submissions/s, backlog (median round)', n0(s.ours.perSecond), n0(s.bare.perSecond), n2(s.ratio)],
    ['CPU µs per submission: worker / Redis / all processes', ...submitCpu, ''],
    ['Redis commands per submission (of them script calls)', ...submitCommands, ''],
    ['tracking polls/s (median round)', n0(t.ours.pollsPerSecond), n0(t.bare.pollsPerSecond), n2(t.ratio)],
    ['CPU µs per poll: worker / Redis / all processes', ...pollCpu, ''],
    ['Redis commands per poll (of them script calls)', ...pollCommands, ''],
    ...latencyRows(latencySweep),
  ];
  return table(['figure', 'ours', 'bare', 'ours ÷ bare'], rows);
}

export function benchMemory(): string {
  const { memory } = latest();
  const parts = memory.breakdown.map((part) => `${part.part} ${n0(part.bytesPerTransfer)} B (${part.encoding})`).join(', ');
  return (
    `${n0(memory.bytesPerTransfer)} B of \`used_memory\` per tracked transfer with ${n0(memory.tracked)} tracked ` +
    `(${n0(memory.bytesPerTransferWithoutEvents)} B without the events stream); by \`MEMORY USAGE\`: ${parts}.`
  );
}

/** The defaults a deployment gets (required settings filled with placeholders: only defaults are read). */
function defaults() {
  return loadConfig({
    CUSTODY_SDK_URL: 'http://127.0.0.1:1',
    CUSTODY_BASE_URL: 'http://127.0.0.1:1',
    CUSTODY_CLIENT_ID: 'docs',
    CUSTODY_CLIENT_SECRET: 'docs',
    CUSTODY_ACCESS_TOKEN: 'docs',
  });
}

export function benchCapacity(): string {
  const { submissions: s, tracking: t, latency, memory } = latest();
  const submit = cpuMicrosPerJob(s.ours.rounds, (round) => round.jobs);
  const poll = cpuMicrosPerJob(t.ours.rounds, (round) => round.polls);
  const open = cpuMicrosPerJob([latency.ours], () => latency.ours.count);
  if (!submit || !poll || !open) throw new Error('bench/results/latest.json has no CPU figures (a run off Linux)');
  const perCore = (micros: number | undefined) => (micros ? `${n0(1e6 / micros)} (${n0(micros)} µs each)` : 'n/a');
  const rows = [
    ['worker core (one Node process), backlog', perCore(submit.ours), perCore(poll.ours)],
    [`worker core, open loop at ${n0(latency.ours.offeredPerSecond)}/s`, perCore(open.ours), '–'],
    ['Redis core (one shard), backlog', perCore(submit['redis-server']), perCore(poll['redis-server'])],
    [`Redis core, open loop at ${n0(latency.ours.offeredPerSecond)}/s`, perCore(open['redis-server']), '–'],
  ];
  const gib = 2 ** 30;
  return [
    table(['per core', 'submissions/s', 'polls/s'], rows),
    '',
    `- Memory: ${n0(memory.bytesPerTransfer)} B per tracked transfer, about ${thousands(gib / memory.bytesPerTransfer)} tracked ` +
      `transfers per GiB (${thousands(gib / memory.bytesPerTransferWithoutEvents)} for the ledger and queues alone).`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------
// npm run bench:scale (scale.json)

export function benchScale(): string {
  const file = readResult<ScaleFile>('scale.json');
  if (file.quick) throw new Error('bench/results/scale.json is a SCALE_QUICK run');
  const results = file.results;
  const first = results[0];
  const last = results.at(-1);
  if (!first || !last) throw new Error('bench/results/scale.json holds no size');
  const labels = results.map((r) => `N = ${n0(r.n)}`);
  const g = SCALE_GOALS;
  const withBare = (value: (side: ScaleSize['ours']) => number, show: (x: number) => string) =>
    results.map((r) => `${show(value(r.ours))} (${show(value(r.bare))})`);
  const flat = (value: (side: ScaleSize['ours']) => number) => results.map((r) => value(r.ours) <= g.perCallGrowth * value(first.ours));
  const both = (a: boolean[], b: boolean[]) => a.map((ok, index) => ok && b[index]!);
  const growth = `≤ ${g.perCallGrowth} × N = ${n0(first.n)}'s`;
  const commands = (side: ScaleSize['ours']) => side.redisCommandsPerCall;
  const workerCpu = (side: ScaleSize['ours']) => side.workerCpuMsPerCall;
  const redisCpu = (side: ScaleSize['ours']) => side.redisCpuMsPerCall;
  const floorMs = first.ours.sends ? first.ours.sends.floorS * 1000 : undefined;
  const rows: string[][] = [
    ['upstream calls/s (bare)', '', ...withBare((side) => side.callsPerSecond, n1), ''],
    [
      'budget used (bare)',
      `≥ ${g.budgetUsed * 100} %`,
      ...withBare((side) => side.budgetUsed, pct),
      status(
        results.map((r) => r.ours.budgetUsed >= g.budgetUsed),
        labels,
      ),
    ],
    [
      'provider 429s',
      String(g.provider429s),
      ...results.map((r) => `${r.ours.provider429s} (${r.bare.provider429s})`),
      status(
        results.map((r) => r.ours.provider429s <= g.provider429s),
        labels,
      ),
    ],
    [
      'Redis commands per upstream call (bare)',
      `≤ ${g.redisCommandsPerCall}, ${growth}`,
      ...withBare(commands, n1),
      status(
        both(
          results.map((r) => commands(r.ours) <= g.redisCommandsPerCall),
          flat(commands),
        ),
        labels,
      ),
    ],
    [
      'worker CPU ms per upstream call (bare)',
      `≤ ${g.workerCpuMsPerCall} ms, ${growth}`,
      ...withBare(workerCpu, n2),
      status(
        both(
          results.map((r) => workerCpu(r.ours) <= g.workerCpuMsPerCall),
          flat(workerCpu),
        ),
        labels,
      ),
    ],
    ['Redis CPU ms per upstream call (bare)', growth, ...withBare(redisCpu, n2), status(flat(redisCpu), labels)],
    [
      `new sends p50 / p99 ms while polls saturate (floor ${floorMs ?? 'n/a'} ms)`,
      '',
      ...results.map((r) => (r.ours.sends ? `${n0(r.ours.sends.p50S * 1000)} / ${n0(r.ours.sends.p99S * 1000)}` : 'n/a')),
      '',
    ],
    [
      'Redis bytes per tracked transfer (bare: per plain job)',
      `≤ ${n0(g.bytesPerTransfer)} at N = ${n0(last.n)}`,
      ...results.map((r) => `${n0(r.seeding.bytesPerTransfer)} (${n0(r.bare.bytesPerJob)})`),
      last.seeding.bytesPerTransfer <= g.bytesPerTransfer ? 'met' : '**missed**',
    ],
  ];
  const caption =
    `From [\`results/scale.json\`](results/scale.json): \`${file.command}\`${file.complete ? '' : ' (incomplete: stopped before its last size)'}, ` +
    `finished ${day(file.finishedAt)} on ${machineText(file.machine)}; R = ${file.settings.rps}/s, ` +
    `${code(`TRACK_POLL_MIN=${file.settings.trackPollMin}`)}, ${code(`TRACK_POLL_MAX=${file.settings.trackPollMax}`)}, ` +
    `${file.settings.windowSeconds} s windows. Ours, bare in parentheses.`;
  return `${caption}\n\n${table(['figure', 'goal', ...labels, ''], rows)}`;
}

// ---------------------------------------------------------------------------------------------------
// npm run bench:budget (budget.json)

export function benchBudget(): string {
  const file = readResult<BudgetFile>('budget.json');
  const results = file.results;
  const labels = results.map((r) => `N = ${n0(r.n)}, R = ${r.rps}/s, K = ${r.k}`);
  const g = BUDGET_GOALS;
  const seconds = (value: number, floor: number) => `${n2(value)} s (${n2(floor)}, × ${n2(value / floor)})`;
  const rows: string[][] = [
    [
      'first N submitted (floor N ÷ R)',
      `≤ ${g.firstNSubmitted} × floor`,
      ...results.map((r) => seconds(r.firstNSubmittedS, r.firstNFloorS)),
      status(
        results.map((r) => r.firstNSubmittedS <= g.firstNSubmitted * r.firstNFloorS),
        labels,
      ),
    ],
    [
      'new sends p50 / p99 while polling is saturated (floor K ÷ R)',
      `p99 ≤ ${g.sendP99} × floor`,
      ...results.map((r) => `${n2(r.sendLatencyP50S)} / ${seconds(r.sendLatencyP99S, r.sendFloorS)}`),
      status(
        results.map((r) => r.sendLatencyP99S <= g.sendP99 * r.sendFloorS),
        labels,
      ),
    ],
    [
      'last `transfer.broadcast` after the txids (floor 2(N+K) ÷ R)',
      `≤ ${g.lastBroadcast} × floor`,
      ...results.map((r) => seconds(r.lastBroadcastS, r.lastBroadcastFloorS)),
      status(
        results.map((r) => r.lastBroadcastS <= g.lastBroadcast * r.lastBroadcastFloorS),
        labels,
      ),
    ],
    [
      'upstream calls per transfer, txid visible → broadcast',
      `≤ ${g.callsPerTransfer}`,
      ...results.map((r) => n2(r.callsPerTransferPhase3)),
      status(
        results.map((r) => r.callsPerTransferPhase3 <= g.callsPerTransfer),
        labels,
      ),
    ],
    [
      'provider 429s',
      String(g.provider429s),
      ...results.map((r) => String(r.provider429s)),
      status(
        results.map((r) => r.provider429s <= g.provider429s),
        labels,
      ),
    ],
    [
      'budget used while polls alone spend it',
      `≥ ${g.budgetUsedWhilePolling * 100} %`,
      ...results.map((r) => pct(r.budgetUsedWhilePolling)),
      status(
        results.map((r) => r.budgetUsedWhilePolling >= g.budgetUsedWhilePolling),
        labels,
      ),
    ],
  ];
  const caption = `From [\`results/budget.json\`](results/budget.json), finished ${day(file.finishedAt)} on ${machineText(file.machine)}:`;
  return `${caption}\n\n${table(['figure (floor)', 'goal', ...labels, ''], rows)}`;
}

// ---------------------------------------------------------------------------------------------------
// npm run bench:budget, BitGo with and without its webhook (budget-bitgo.json, budget-bitgo-webhooks.json)

export function benchWakeup(): string {
  const plain = readResult<BudgetFile>('budget-bitgo.json');
  const hooked = readResult<BudgetFile>('budget-bitgo-webhooks.json');
  const g = BUDGET_GOALS;
  const rows = hooked.results.map((w) => {
    const p = plain.results.find((r) => r.n === w.n && r.rps === w.rps && r.k === w.k);
    if (p === undefined) throw new Error(`budget-bitgo.json has no size ${w.n}x${w.rps}x${w.k}: run both variants`);
    const goal = g.wakeupP99OverIntervalS + w.budgetIntervalS;
    return [
      `N = ${n0(w.n)}, R = ${w.rps}/s, ${w.wakeTransfers} txids one at a time`,
      `${n2(p.wakeBroadcastP50S)} / ${n2(p.wakeBroadcastP99S)} s`,
      `${n2(w.wakeBroadcastP50S)} / ${n2(w.wakeBroadcastP99S)} s`,
      `${n2(w.budgetIntervalS * 1000)} ms`,
      `p99 ≤ ${goal.toFixed(3)} s`,
      w.wakeBroadcastP99S <= goal ? 'met' : '**missed**',
    ];
  });
  const caption =
    `From [\`results/budget-bitgo.json\`](results/budget-bitgo.json) (finished ${day(plain.finishedAt)}) and ` +
    `[\`results/budget-bitgo-webhooks.json\`](results/budget-bitgo-webhooks.json) (finished ${day(hooked.finishedAt)}), on ${machineText(hooked.machine)}; ` +
    `txid shown → \`transfer.broadcast\`, p50 / p99:`;
  return `${caption}\n\n${table(['size', 'without webhooks', 'with webhooks', 'one budget interval (1 ÷ R)', 'goal (1 s + 1 ÷ R)', ''], rows)}`;
}

// ---------------------------------------------------------------------------------------------------
// Sizing the request budget: the poll interval N ÷ P, from the configuration's default TRACK_POLL_MAX.

const SIZING = { sendsAndEnrichments: 5, budgets: [10, 40, 100], waiting: [100, 1_000, 10_000, 100_000] } as const;

function duration(seconds: number): string {
  if (seconds < 240) return `${Math.round(seconds)} s`;
  const minutes = seconds / 60;
  if (minutes < 10) return `${minutes.toFixed(1)} min`;
  if (minutes < 120) return `${Math.round(minutes)} min`;
  return `${(minutes / 60).toFixed(1)} h`;
}

export function budgetSizing(): string {
  const pollMaxS = defaults().track.pollMaxMs / 1000;
  const rows = SIZING.waiting.map((n) => [
    n0(n),
    ...SIZING.budgets.map((r) => {
      if (r <= SIZING.sendsAndEnrichments) throw new Error(`SIZING: R = ${r}/s leaves nothing for polls`);
      return duration(Math.max(pollMaxS, n / (r - SIZING.sendsAndEnrichments)));
    }),
  ]);
  const caption =
    `Poll interval each transfer gets, max(\`TRACK_POLL_MAX\`, N ÷ P), with S + B = ${SIZING.sendsAndEnrichments}/s ` +
    `and the default \`TRACK_POLL_MAX\` (${pollMaxS} s):`;
  return `${caption}\n\n${table(['transfers waiting (N)', ...SIZING.budgets.map((r) => `R = ${r}/s`)], rows)}`;
}
