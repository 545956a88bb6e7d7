import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllChildren, spawnNodeScript, type ChildResult } from '../../tools/child-process.ts';

const SCALE = fileURLToPath(new URL('../../bench/scale.ts', import.meta.url));

/** `npm run bench:scale` as a child; SIGKILLed (and the test failed) when it has not ended in `timeoutMs`. */
function runScale(env: Record<string, string>, timeoutMs: number): Promise<ChildResult> {
  return spawnNodeScript(SCALE, { name: 'bench-scale', env, maxOutputChars: 1 << 20 }).exit(timeoutMs);
}

/** Figures every side of every size must have, as finite positive numbers. */
const SIDE_FIGURES = ['callsPerSecond', 'budgetUsed', 'redisCommandsPerCall', 'workerCpuMsPerCall', 'redisCpuMsPerCall'] as const;

describe('npm run bench:scale (SCALE_QUICK=1)', () => {
  let dir: string | undefined;
  afterAll(async () => {
    await killAllChildren();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('exits 0 and writes finite positive figures for every size, ours and bare, and a chart', async () => {
    dir = await mkdtemp(join(tmpdir(), 'bench-scale-test-'));
    const resultFile = join(dir, 'scale-quick.json');
    const outcome = await runScale({ SCALE_QUICK: '1', SCALE_RESULT_FILE: resultFile }, 240_000);
    expect(outcome.code, `stderr:\n${outcome.stderr}\nstdout:\n${outcome.stdout}`).toBe(0);

    const result = JSON.parse(await readFile(resultFile, 'utf8')) as {
      complete: boolean;
      quick: boolean;
      settings: { sizes: number[] };
      results: Array<{
        n: number;
        seeding: { bytesPerTransfer: number };
        ours: Record<string, unknown> & { provider429s: number; sends: { count: number; p50S: number; p99S: number } };
        bare: Record<string, unknown> & { provider429s: number };
      }>;
    };
    expect(result.complete).toBe(true);
    expect(result.quick).toBe(true);
    expect(result.results.map((r) => r.n)).toEqual(result.settings.sizes);
    const positive = (value: unknown, what: string) =>
      expect(typeof value === 'number' && Number.isFinite(value) && value > 0, `${what} = ${String(value)}`).toBe(true);
    for (const size of result.results) {
      positive(size.seeding.bytesPerTransfer, `N=${size.n} seeding.bytesPerTransfer`);
      for (const side of ['ours', 'bare'] as const) {
        for (const figure of SIDE_FIGURES) positive(size[side][figure], `N=${size.n} ${side}.${figure}`);
        expect(Number.isInteger(size[side].provider429s)).toBe(true);
      }
      expect(size.ours.sends.count).toBeGreaterThan(0);
      positive(size.ours.sends.p50S, `N=${size.n} ours.sends.p50S`);
      positive(size.ours.sends.p99S, `N=${size.n} ours.sends.p99S`);
    }

    const svg = await readFile(join(dir, 'scale-quick.svg'), 'utf8');
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).not.toContain('NaN');
    // Two panels, a bar per size and side in each.
    expect([...svg.matchAll(/<rect x="[^"]+" y="[^"]+" width="[^"]+" height="[^"]+" fill="#(1f6feb|8b949e)"><title>/g)]).toHaveLength(
      4 * result.results.length,
    );
    expect(outcome.stdout).toContain('Redis cmds/call');
  }, 300_000);
});
