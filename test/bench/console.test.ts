/**
 * `npm run bench:console` stays runnable: a small size, every route measured, no timing asserted (the
 * goal is the benchmark's, judged by a person on a quiet machine; the goal here is set out of reach of
 * any machine so that only a crash or a missing route fails).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { killAllChildren, spawnNodeScript } from '../../tools/child-process.ts';

const CONSOLE = fileURLToPath(new URL('../../bench/console.ts', import.meta.url));
const ROUTES = [
  'GET /api/v1/summary',
  'GET /api/v1/transfers?state=broadcast&limit=50',
  'GET /api/v1/transfers?attention=unresolved&limit=50',
  'GET /api/v1/transfers?q=<sequenceId prefix>&limit=50',
  'GET /api/v1/transfers?q=<txid prefix>&limit=50',
  'GET /api/v1/transfers/:sequenceId',
  'GET /console/transfers/:sequenceId',
  'GET /console (overview)',
];

describe('npm run bench:console', () => {
  afterAll(() => killAllChildren());

  it('seeds, serves and measures every route at a small size', { timeout: 240_000 }, async () => {
    const env = { CONSOLE_SIZES: '300', CONSOLE_REQUESTS: '10', CONSOLE_P99_GOAL_MS: '3600000' };
    const outcome = await spawnNodeScript(CONSOLE, { name: 'bench-console', env, maxOutputChars: 1 << 20 }).exit(200_000);
    expect(outcome.code, `stderr:\n${outcome.stderr}\nstdout:\n${outcome.stdout}`).toBe(0);
    for (const route of ROUTES) {
      const line = outcome.stdout.split('\n').find((l) => l.trimStart().startsWith('300') && l.includes(` ${route} `));
      expect(line, `no figures for ${route}:\n${outcome.stdout}`).toMatch(/p50 +[0-9.]+ +p99 +[0-9.]+/);
    }
    expect(outcome.stdout).toContain('goal met');
  });
});
