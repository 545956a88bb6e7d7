/**
 * The CLI under the machine's own Node (20 here, /usr/bin/node): `node src/cli/main.ts` cannot explain
 * itself there (Node 20 refuses the `.ts` entry before reading a line of it), so docs/cli.md's
 * introduction says what the error means and which ways run the bundled Node 24; those ways work when the
 * system Node is the one on PATH, and the check the npm scripts run first names the Node it needs.
 * Skipped where /usr/bin/node is missing or is 24 or later.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const SYSTEM_NODE = '/usr/bin/node';
const systemMajor = existsSync(SYSTEM_NODE)
  ? Number(spawnSync(SYSTEM_NODE, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.split('.')[0])
  : Number.NaN;
/** The shell of a machine whose Node is the system's: /usr/bin first, none of our node_modules/.bin. */
const systemEnv = { PATH: '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', LANG: 'C' };

/** Runs `command`, which starts `processes` Node processes one after another (npm, node-check, the CLI). */
function run(command: string, args: string[], processes = 1) {
  return spawnSync(command, args, { cwd: PROJECT_ROOT, env: systemEnv, encoding: 'utf8', timeout: processes * PROCESS_MS });
}

/** The longest test runs npm twice, each starting npm, node-check and the CLI. */
const TEST_TIMEOUT_MS = processesTimeout(6);

/** The hand-written introduction of docs/cli.md (before its generated usage). */
function cliSection(): string {
  const page = readFileSync(join(PROJECT_ROOT, 'docs/cli.md'), 'utf8');
  return page.slice(0, page.indexOf('<!-- generated:'));
}

describe.skipIf(!(systemMajor < 24))(`the CLI under the system Node (${SYSTEM_NODE}, ${systemMajor})`, { timeout: TEST_TIMEOUT_MS }, () => {
  it('`node src/cli/main.ts` fails with ERR_UNKNOWN_FILE_EXTENSION, and docs/cli.md says what that means', () => {
    const direct = run(SYSTEM_NODE, ['src/cli/main.ts', 'help']);
    expect(direct.status).toBe(1);
    expect(direct.stderr).toContain('ERR_UNKNOWN_FILE_EXTENSION');
    const section = cliSection();
    expect(section).toContain('ERR_UNKNOWN_FILE_EXTENSION');
    expect(section).toContain('node src/cli/main.ts');
    expect(section).toContain('node_modules/.bin/node src/cli/main.ts');
  });

  it('the ways docs/cli.md gives (npm run cli, npx custody-worker) run the bundled Node 24', () => {
    // --offline and --no: never ask the registry, whatever happens.
    for (const args of [
      ['run', '--silent', '--offline', 'cli', '--', 'help'],
      ['exec', '--no', '--offline', '--', 'custody-worker', 'help'],
    ]) {
      const result = run('npm', args, 3);
      expect({ args, status: result.status, stderr: result.stderr }).toEqual({ args, status: 0, stderr: '' });
      expect(result.stdout).toContain('Usage: custody-worker <command>');
    }
  });

  it('tools/node-check.js, run first by the npm scripts, names the Node it needs on the real system Node', () => {
    const result = run(SYSTEM_NODE, ['tools/node-check.js']);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(`this is Node ${systemMajor}.`);
    expect(result.stderr).toContain('needs Node 24 or later');
  });
});
