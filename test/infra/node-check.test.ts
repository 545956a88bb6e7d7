/**
 * On a machine without the linux-x64 Node bundle (macOS, arm64) the npm scripts ran the system's Node,
 * which failed with ERR_UNKNOWN_FILE_EXTENSION ".ts" and nothing said why (.npmrc hides npm's
 * warnings). tools/node-check.js, run first by every script that starts something, says what is needed.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

const CHECK = join(PROJECT_ROOT, 'tools/node-check.js');

function run(pretend: string | undefined) {
  const env = { ...process.env, NODE_CHECK_PRETEND_VERSION: pretend ?? '' };
  return spawnSync(process.execPath, [CHECK], { env, encoding: 'utf8' });
}

describe('node-check', () => {
  it('names the Node it needs and how to get it, exit 1, on an older Node', () => {
    const result = run('20.20.2');
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('needs Node 24 or later');
    expect(result.stderr).toContain('this is Node 20.20.2 on');
    expect(result.stderr).toContain('nvm install 24');
  });

  it('is silent and exits 0 on this Node (24)', () => {
    const result = run(undefined);
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
  });

  it('runs first in every npm script that starts the worker, the simulator, the demo or the CLI', async () => {
    const { default: pkg } = (await import('../../package.json', { with: { type: 'json' } })) as {
      default: { scripts: Record<string, string> };
    };
    for (const name of ['start', 'simulator', 'demo', 'cli']) expect(pkg.scripts[name]).toMatch(/^node tools\/node-check\.js && node /);
  });
});
