import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllChildren, spawnNodeScript, type ChildResult } from '../../tools/child-process.ts';

const RUN = fileURLToPath(new URL('../../bench/run.ts', import.meta.url));

/** `npm run bench` as a child; SIGKILLed (and the test failed) when it has not ended in `timeoutMs`. */
function runBench(env: Record<string, string>, timeoutMs: number): Promise<ChildResult> {
  return spawnNodeScript(RUN, { name: 'bench', env, maxOutputChars: 1 << 20 }).exit(timeoutMs);
}

/** Every figure the benchmark must produce (docs/contract.md section 7), by its path in the JSON result. */
const FIGURES = [
  'submissions.ours.perSecond',
  'submissions.bare.perSecond',
  'submissions.ratio',
  'submissions.sameWork.perSecond',
  'submissions.sameWorkRatio',
  'latency.ours.p50Ms',
  'latency.ours.p99Ms',
  'latency.bare.p50Ms',
  'latency.bare.p99Ms',
  'tracking.ours.pollsPerSecond',
  'tracking.bare.pollsPerSecond',
  'tracking.ratio',
  'memory.bytesPerTransfer',
] as const;

function at(result: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((value, key) => (value as Record<string, unknown> | undefined)?.[key], result);
}

describe('npm run bench (BENCH_QUICK=1)', () => {
  let dir: string | undefined;
  afterAll(async () => {
    await killAllChildren();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('exits 0, prints every figure and the targets, and writes them all to the JSON result as finite positive numbers', async () => {
    dir = await mkdtemp(join(tmpdir(), 'bench-test-'));
    const resultFile = join(dir, 'latest.json');
    const outcome = await runBench({ BENCH_QUICK: '1', BENCH_RESULT_FILE: resultFile }, 100_000);
    expect(outcome.code, `stderr:\n${outcome.stderr}\nstdout:\n${outcome.stdout}`).toBe(0);

    const result = JSON.parse(await readFile(resultFile, 'utf8')) as Record<string, unknown>;
    for (const path of FIGURES) {
      const value = at(result, path);
      expect(typeof value, path).toBe('number');
      expect(Number.isFinite(value) && (value as number) > 0, `${path} = ${String(value)}`).toBe(true);
    }
    const targets = result.targets as Array<{ name: string; value: number; met: boolean }>;
    expect(targets).toHaveLength(4);
    expect(targets.map((target) => target.name)).toContain('p99 enqueue → submitted at half load, ours ÷ bare');

    // The picture beside the JSON: a bar per round and side in both throughput panels, a latency curve per side.
    const svg = await readFile(join(dir, 'latest.svg'), 'utf8');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    const rounds = (side: string) => (at(result, side) as unknown[]).length;
    const bars = [...svg.matchAll(/<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" fill="#(1f6feb|8b949e)"><title>/g)];
    expect(bars).toHaveLength(
      rounds('submissions.ours.rounds') +
        rounds('submissions.bare.rounds') +
        rounds('tracking.ours.rounds') +
        rounds('tracking.bare.rounds'),
    );
    const curves = [...svg.matchAll(/<polyline points="([^"]+)"/g)].map((match) => match[1]!.split(' '));
    expect(curves).toHaveLength(2);
    // The sweep: its points (BENCH_QUICK measures one fraction, plus the half-load point) in the JSON,
    // the table and the fourth panel (p99 and p50 per side).
    const sweep = result.latencySweep as Array<{
      fraction: number;
      offeredPerSecond: number;
      ours: { p99Ms: number };
      bare: { p99Ms: number };
    }>;
    expect(sweep.map((point) => point.fraction)).toEqual([0.25, 0.5]);
    for (const point of sweep) {
      for (const value of [point.offeredPerSecond, point.ours.p99Ms, point.bare.p99Ms])
        expect(Number.isFinite(value) && value > 0).toBe(true);
    }
    expect(sweep[1]!.ours.p99Ms).toBe(at(result, 'latency.ours.p99Ms'));
    const sweepLines = [...svg.matchAll(/<polyline data-sweep="(p99Ms|p50Ms)" points="([^"]+)"/g)];
    expect(sweepLines).toHaveLength(4);
    for (const line of sweepLines) expect(line[2]!.split(' ')).toHaveLength(sweep.length);
    expect(outcome.stdout).toContain('latency at other offered rates');
    for (const curve of curves) {
      expect(curve.length).toBe((at(result, 'latency.ours.percentiles') as unknown[]).length);
      for (const point of curve) expect(point).toMatch(/^\d+(\.\d)?,\d+(\.\d)?$/);
    }
    expect(svg).not.toContain('NaN');
    for (const target of targets) {
      expect(Number.isFinite(target.value) && target.value > 0, target.name).toBe(true);
      expect(typeof target.met).toBe('boolean');
    }

    const out = outcome.stdout;
    for (const heading of ['machine:', 'submissions end to end', 'latency enqueue', 'tracking polls', 'Redis memory', 'targets']) {
      expect(out).toContain(heading);
    }
    for (const target of targets) expect(out).toContain(target.name);
    const printed = (value: unknown) => Math.round(value as number).toLocaleString('en-US');
    expect(out).toContain(printed(at(result, 'submissions.ours.perSecond')));
    expect(out).toContain(printed(at(result, 'submissions.bare.perSecond')));
    expect(out).toContain(printed(at(result, 'tracking.ours.pollsPerSecond')));
    expect(out).toContain(printed(at(result, 'tracking.bare.pollsPerSecond')));
    expect(out).toContain(`${printed(at(result, 'memory.bytesPerTransfer'))} B per tracked transfer`);
    expect(out).toContain((at(result, 'latency.ours.p99Ms') as number).toFixed(2));
    expect(out).toContain(`${process.version}`);
  }, 120_000);
});
