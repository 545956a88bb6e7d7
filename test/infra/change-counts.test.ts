/**
 * CONTRIBUTING.md's table of where a change goes, measured: changes (a) and (c) are re-made in a copy
 * of the repository, and the files the compiler (and, for (a), the tests) then ask for are counted
 * against the row's count. A refactoring that spreads one of these changes over more files fails here.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
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

/** The count in CONTRIBUTING.md's row whose change starts with `label`, e.g. "(a)". */
function tableCount(label: string): number {
  const row = readFileSync(join(PROJECT_ROOT, 'CONTRIBUTING.md'), 'utf8')
    .split('\n')
    .find((line) => line.startsWith(`| ${label} `));
  if (!row) throw new Error(`CONTRIBUTING.md has no row ${label}`);
  const count = Number(row.split('|').at(-2)!.trim());
  if (!Number.isInteger(count)) throw new Error(`CONTRIBUTING.md row ${label}: the last column is not a count`);
  return count;
}

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
});
