/**
 * CONTRIBUTING.md's table of where a change goes, measured: changes (a), (c) and (d) are re-made in a
 * copy of the repository, and the files the compiler (and, for (a), the tests) then ask for, or for (d)
 * the lines changed outside the new provider's folder, are counted against the row's count. A
 * refactoring that spreads one of these changes over more files fails here.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';

const NODE_BIN = join(PROJECT_ROOT, 'node_modules/.bin');

/** A copy of every file git knows (tracked or new, not ignored), with the repository's node_modules linked in. */
function copyRepository(): string {
  const dir = mkdtempSync(join(tmpdir(), 'change-count-'));
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((file) => file !== '' && !file.startsWith('node_modules'));
  for (const file of files) {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    try {
      cpSync(join(PROJECT_ROOT, file), join(dir, file));
    } catch {
      // listed but deleted in the working tree
    }
  }
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=change-counts', '-c', 'user.email=change-counts@localhost', ...args], {
    cwd: dir,
    encoding: 'utf8',
  });
}

function edit(dir: string, file: string, from: string, to: string): void {
  const path = join(dir, file);
  const text = readFileSync(path, 'utf8');
  if (!text.includes(from)) throw new Error(`${file} no longer holds the text this re-make changes: update the test with the change`);
  writeFileSync(path, text.replace(from, to));
}

/** The files `tsc --noEmit` reports errors in. */
function compilerErrors(dir: string): string[] {
  const result = spawnSync(join(NODE_BIN, 'tsc'), ['--noEmit', '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8', timeout: 180_000 });
  return [...new Set([...result.stdout.matchAll(/^([^\s(][^(]*)\(\d+,\d+\): error/gm)].map((match) => match[1]!))].sort();
}

/** The count in CONTRIBUTING.md's row whose change starts with `label`, e.g. "(a)"; of "a folder + 2", the 2. */
function tableCount(label: string): number {
  const row = readFileSync(join(PROJECT_ROOT, 'CONTRIBUTING.md'), 'utf8')
    .split('\n')
    .find((line) => line.startsWith(`| ${label} `));
  if (!row) throw new Error(`CONTRIBUTING.md has no row ${label}`);
  const count = Number(
    row
      .split('|')
      .at(-2)!
      .trim()
      .replace(/^a folder \+ /, ''),
  );
  if (!Number.isInteger(count)) throw new Error(`CONTRIBUTING.md row ${label}: the last column is not a count`);
  return count;
}

/** A third provider that serves nothing: every call throws a CustodyError. Its own variable: STUB_BASE_URL. */
const STUB_CLIENT = `import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from '../errors.ts';
import type { AcceptedSend, CustodyPort, ListedTransfers, TransferFinding, WalletRef, WalletTransaction } from '../port.ts';

const unsupported = (endpoint: CustodyEndpoint) =>
  new CustodyError(CustodyErrorCode.INVALID_REQUEST, 'the stub provider serves nothing', { endpoint });

export class StubClient implements CustodyPort {
  readonly baseUrl: string;
  constructor(baseUrl: string) {
    this.baseUrl = baseUrl;
  }
  async sendTransaction(): Promise<AcceptedSend> {
    throw unsupported('send');
  }
  async findTransfer(): Promise<TransferFinding> {
    throw unsupported('lookup');
  }
  async getTransfersBySequenceId(): Promise<ListedTransfers> {
    throw unsupported('lookup');
  }
  async getTransfersByTxId(): Promise<ListedTransfers> {
    throw unsupported('lookup');
  }
  async getWalletTransaction(): Promise<WalletTransaction> {
    throw unsupported('detail');
  }
  walletProblem(_wallet: WalletRef): string | undefined {
    return undefined;
  }
  async close(): Promise<void> {}
}
`;

const STUB_PROVIDER = `import { z } from 'zod';
import { httpUrl } from '../../config/validators.ts';
import { defineCustodyProvider } from '../provider-kind.ts';
import { StubClient } from './client.ts';

export const stubProvider = defineCustodyProvider({
  name: 'stub',
  env: z.object({ STUB_BASE_URL: httpUrl('an http(s) URL') }),
  docs: { STUB_BASE_URL: { default: 'required with \`stub\`', meaning: "the stub's origin" } },
  settings: (env) => ({ baseUrl: env.STUB_BASE_URL }),
  secrets: () => [],
  create: (settings) => new StubClient(settings.baseUrl),
});
`;

/** Run in the copy: the stub chosen, configured, built and called, and its variable required. */
const STUB_SCRIPT = `
import { CONFIG_VARIABLES, loadConfig } from './src/config/config.ts';
import { createCustodyPort, custodySecrets } from './src/custody/provider.ts';
const config = loadConfig({ CUSTODY_PROVIDER: 'stub', STUB_BASE_URL: 'http://x' });
const port = createCustodyPort(config.custody);
let error;
try {
  await port.getTransfersByTxId({ walletId: 1, coin: 'eth' }, 'tx-1');
} catch (caught) {
  error = caught;
}
await port.close();
let missing;
try {
  loadConfig({ CUSTODY_PROVIDER: 'stub' });
} catch (caught) {
  missing = caught.problems;
}
console.log(JSON.stringify({
  provider: config.custody.provider,
  settings: config.custody.settings,
  secrets: custodySecrets(config.custody),
  error: { name: error?.name, code: error?.code, endpoint: error?.endpoint },
  missing,
  documented: CONFIG_VARIABLES.includes('STUB_BASE_URL'),
}));
`;

describe("CONTRIBUTING's change counts", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('(a) a new poll schedule takes src/timing.ts and the test that holds it, and nothing else', () => {
    dir = copyRepository();
    // The change: polls twice as far apart.
    edit(
      dir,
      'src/timing.ts',
      'const nominal = Math.min(profile.maxMs, Math.max(0, ageMs) + profile.baseMs);',
      'const nominal = Math.min(profile.maxMs, 2 * (Math.max(0, ageMs) + profile.baseMs));',
    );
    const forced = compilerErrors(dir);
    // The unit tests that notice (the schedule's own test has to change with it), by file.
    const report = join(dir, 'unit-report.json');
    spawnSync(join(NODE_BIN, 'vitest'), ['run', 'test/unit', '--reporter=json', `--outputFile=${report}`], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 180_000,
    });
    const results = (JSON.parse(readFileSync(report, 'utf8')) as { testResults: Array<{ name: string; status: string }> }).testResults;
    const failing = results.filter((file) => file.status !== 'passed').map((file) => file.name.slice(dir!.length + 1));
    console.info(
      `[change-counts] a new poll schedule: the compiler lists ${forced.length} files, ${failing.length} test files fail: ${failing.join(', ')}`,
    );
    expect(forced).toEqual([]);
    expect(failing).toEqual(['test/unit/track-poll.test.ts']);
    expect(1 + forced.length + failing.length).toBeLessThanOrEqual(tableCount('(a)'));
  }, 300_000);

  it('(c) a new event type takes catalog.ts, events.ts, the files the compiler lists, and the step that publishes it', () => {
    dir = copyRepository();
    edit(
      dir,
      'packages/producer/src/catalog.ts',
      "  'reconcile.completed',\n] as const;",
      "  'reconcile.completed',\n  'transfer.paused',\n] as const;",
    );
    edit(
      dir,
      'packages/producer/src/events.ts',
      'export const EVENT_DATA_SCHEMAS = {\n',
      "export const EVENT_DATA_SCHEMAS = {\n  'transfer.paused': z.looseObject({ reason: z.string() }).meta({ title: 'transfer.paused', description: 'Paused.' }),\n",
    );
    const forced = compilerErrors(dir);
    console.info(`[change-counts] a new event type: the compiler lists ${forced.length} files: ${forced.join(', ')}`);
    // Each file the compiler lists must be one the row names, so the row stays a true list.
    const row = readFileSync(join(PROJECT_ROOT, 'CONTRIBUTING.md'), 'utf8')
      .split('\n')
      .find((line) => line.startsWith('| (c) '))!;
    expect(forced.filter((file) => !row.includes(`\`${file}\``))).toEqual([]);
    // catalog.ts + events.ts + what the compiler lists + the step that publishes it.
    expect(2 + forced.length + 1).toBeLessThanOrEqual(tableCount('(c)'));
  }, 300_000);
  it('(d) a third, stub provider takes its folder and 2 lines elsewhere (its import and its registry entry)', () => {
    dir = copyRepository();
    git(dir, 'init', '-q');
    git(dir, 'add', '-A', '--', '.', ':!node_modules');
    git(dir, 'commit', '-q', '--no-verify', '-m', 'before the stub provider');
    // The change: the folder, then the 2 lines the registry takes.
    mkdirSync(join(dir, 'src/custody/stub'));
    writeFileSync(join(dir, 'src/custody/stub/client.ts'), STUB_CLIENT);
    writeFileSync(join(dir, 'src/custody/stub/provider.ts'), STUB_PROVIDER);
    edit(
      dir,
      'src/custody/providers.ts',
      "import { bitgoProvider } from './bitgo/provider.ts';\n",
      "import { bitgoProvider } from './bitgo/provider.ts';\nimport { stubProvider } from './stub/provider.ts';\n",
    );
    edit(dir, 'src/custody/providers.ts', '  bitgoProvider,\n', '  bitgoProvider,\n  stubProvider,\n');

    expect(compilerErrors(dir)).toEqual([]);
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', STUB_SCRIPT], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({
      provider: 'stub',
      settings: { baseUrl: 'http://x' },
      secrets: [],
      error: { name: 'CustodyError', code: 'CUSTODY_INVALID_REQUEST', endpoint: 'lookup' },
      missing: ['STUB_BASE_URL: required'],
      documented: true,
    });

    // Lines added or removed outside the new folder (a changed line counts twice), every file.
    git(dir, 'add', '-A', '--', '.', ':!node_modules');
    const outside = git(dir, 'diff', '--cached', '--numstat', '--', '.', ':!src/custody/stub')
      .trim()
      .split('\n')
      .filter((line) => line !== '');
    const changed = outside.reduce((sum, line) => sum + Number(line.split('\t')[0]) + Number(line.split('\t')[1]), 0);
    console.info(`[change-counts] a third provider: a folder + ${changed} lines elsewhere: ${outside.join('; ')}`);
    expect(existsSync(join(dir, 'src/custody/stub/provider.ts'))).toBe(true);
    expect(changed).toBeLessThanOrEqual(tableCount('(d)'));
  }, 300_000);
});
