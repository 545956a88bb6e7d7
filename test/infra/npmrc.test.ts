/**
 * .npmrc sets loglevel=error only against EBADENGINE (npm checks dependencies' `engines` against the
 * Node running npm, not the bundled Node 24 the scripts run on). That setting hides every warning, so
 * this test looks at what it hides: `npm ci --dry-run` at loglevel=warn on a copy of the manifests
 * (offline, no scripts, nothing installed) prints no warning but EBADENGINE; with the project's .npmrc
 * it prints none (what .ci/run requires). npm runs on the system's Node, as on a developer's machine.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

const MANIFESTS = ['package.json', 'package-lock.json', '.npmrc', 'packages/producer/package.json'];
/** npm from the system, on the system's Node (the Node that checks engines), never our node_modules/.bin. */
const SYSTEM_ENV = { PATH: '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', LANG: 'C' };

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'npmrc-check-'));
  for (const file of MANIFESTS) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    copyFileSync(join(PROJECT_ROOT, file), join(dir, file));
  }
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The `npm warn` lines of a dry-run `npm ci` (the lockfile's tree is checked, nothing fetched or written). */
function npmCiWarnings(extra: string[]): string[] {
  const result = spawnSync('npm', ['ci', '--dry-run', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', ...extra], {
    cwd: dir,
    env: SYSTEM_ENV,
    encoding: 'utf8',
    timeout: 120_000,
  });
  expect(result.status, result.stderr).toBe(0);
  return `${result.stdout}\n${result.stderr}`.split('\n').filter((line) => /^npm warn/i.test(line));
}

describe('.npmrc', () => {
  it('hides only EBADENGINE: at loglevel=warn, npm ci prints no other warning', () => {
    const warnings = npmCiWarnings(['--loglevel=warn']);
    const codes = new Set(warnings.map((line) => /^npm warn (\S+)/i.exec(line)![1]));
    expect(
      [...codes].filter((code) => code !== 'EBADENGINE'),
      warnings.join('\n'),
    ).toEqual([]);
    // The check sees warnings at all: on a Node older than 22 several dependencies' engines refuse it.
    const npmNode = spawnSync('node', ['-p', 'process.versions.node'], { env: SYSTEM_ENV, encoding: 'utf8' }).stdout.trim();
    if (Number(npmNode.split('.')[0]) < 22) expect(codes, `npm on Node ${npmNode}`).toContain('EBADENGINE');
  });

  it('with its settings, npm ci prints no warning at all (.ci/run)', () => {
    expect(npmCiWarnings([])).toEqual([]);
  });

  it('sets loglevel=error and nothing else, and says why no narrower setting does', () => {
    const text = readFileSync(join(PROJECT_ROOT, '.npmrc'), 'utf8');
    const settings = text.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
    expect(settings).toEqual(['loglevel=error']);
    for (const ruledOut of ['engine-strict', 'node-version', 'force', 'devEngines', 'test/infra/npmrc.test.ts']) {
      expect(text, ruledOut).toContain(ruledOut);
    }
  });
});
