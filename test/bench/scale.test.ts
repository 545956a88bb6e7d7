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

/** What a quick run must write: every figure of every size, ours and bare, the provider measured, and a chart. */
async function checkQuickRun(dir: string, env: Record<string, string>, provider: string, pollEndpoint: string): Promise<void> {
  const resultFile = join(dir, 'scale-quick.json');
  const outcome = await runScale({ SCALE_QUICK: '1', SCALE_RESULT_FILE: resultFile, ...env }, 240_000);
  expect(outcome.code, `stderr:\n${outcome.stderr}\nstdout:\n${outcome.stdout}`).toBe(0);

  const result = JSON.parse(await readFile(resultFile, 'utf8')) as {
    complete: boolean;
    quick: boolean;
    provider: string;
    settings: { sizes: number[] };
    results: Array<{
      n: number;
      seeding: { bytesPerTransfer: number };
      ours: Record<string, unknown> & {
        provider429s: number;
        callsByEndpoint: Record<string, number>;
        sends: { count: number; p50S: number; p99S: number };
      };
      bare: Record<string, unknown> & { provider429s: number; callsByEndpoint: Record<string, number> };
    }>;
  };
  expect(result.complete).toBe(true);
  expect(result.quick).toBe(true);
  expect(result.provider).toBe(provider);
  expect(result.results.map((r) => r.n)).toEqual(result.settings.sizes);
  const positive = (value: unknown, what: string) =>
    expect(typeof value === 'number' && Number.isFinite(value) && value > 0, `${what} = ${String(value)}`).toBe(true);
  for (const size of result.results) {
    positive(size.seeding.bytesPerTransfer, `N=${size.n} seeding.bytesPerTransfer`);
    for (const side of ['ours', 'bare'] as const) {
      for (const figure of SIDE_FIGURES) positive(size[side][figure], `N=${size.n} ${side}.${figure}`);
      expect(Number.isInteger(size[side].provider429s)).toBe(true);
      // Both sides polled the provider's own get-transfer route.
      positive(size[side].callsByEndpoint[pollEndpoint], `N=${size.n} ${side}.callsByEndpoint.${pollEndpoint}`);
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
  expect(outcome.stdout).toContain(`provider: ${provider};`);
}

describe('npm run bench:scale (SCALE_QUICK=1)', () => {
  const dirs: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-scale-test-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(async () => {
    await killAllChildren();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('exits 0 and writes finite positive figures for every size, ours and bare, and a chart', async () => {
    await checkQuickRun(await tempDir(), {}, 'wallet-service', 'getTransfer');
  }, 300_000);

  it('SCALE_PROVIDER other than wallet-service or bitgo: exits non-zero naming the variable, before starting anything', async () => {
    const outcome = await runScale({ SCALE_PROVIDER: 'fireblocks' }, 30_000);
    expect(outcome.code).not.toBe(0);
    expect(outcome.stderr).toContain('SCALE_PROVIDER: must be wallet-service or bitgo');
  });

  it('SCALE_PROVIDER=bitgo: the same figures against the BitGo simulator (one size, to stay short)', async () => {
    await checkQuickRun(await tempDir(), { SCALE_PROVIDER: 'bitgo', SCALE_SIZES: '300' }, 'bitgo', 'transferBySequenceId');
  }, 300_000);
});
