/**
 * Commit subjects of at most 72 characters (CONTRIBUTING.md, "Habits"), checked by .ci/run for every
 * commit after a fixed baseline (tools/commit-subjects.ts) and offered as a commit-msg hook
 * (tools/git-hooks/commit-msg). Each case builds a throwaway repository.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { checkHistory, messageSubject, SUBJECT_MAX } from '../../tools/commit-subjects.ts';

const SCRIPT = join(PROJECT_ROOT, 'tools/commit-subjects.ts');
const HOOKS = join(PROJECT_ROOT, 'tools/git-hooks');

/** A subject of exactly `length` characters, one of them outside ASCII (counted as one). */
function subject(length: number): string {
  return `Fix × ${'a'.repeat(length - 6)}`;
}

// The repository's own git variables (a hook, a worktree) must not lead git into it.
const gitEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('GIT_')));

const repos: string[] = [];
afterEach(() => {
  for (const dir of repos.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]) {
  return spawnSync('git', args, { cwd, env: gitEnv, encoding: 'utf8' });
}

function repository(): string {
  const dir = mkdtempSync(join(tmpdir(), 'commit-subjects-'));
  repos.push(dir);
  git(dir, 'init', '-q');
  git(dir, 'config', 'user.name', 'Test');
  git(dir, 'config', 'user.email', 'test@example.invalid');
  git(dir, 'config', 'commit.gpgsign', 'false');
  return dir;
}

function commit(dir: string, message: string): string {
  const result = git(dir, 'commit', '-q', '--allow-empty', '-m', message);
  expect(result.status, result.stderr).toBe(0);
  return git(dir, 'rev-parse', 'HEAD').stdout.trim();
}

/** The script as .ci/run runs it, in `dir`: its fixed baseline is not there, so HEAD alone is checked. */
function runScript(dir: string) {
  return spawnSync(process.execPath, [SCRIPT], { cwd: dir, env: gitEnv, encoding: 'utf8' });
}

describe('commit subjects', () => {
  it('the limit is the one CONTRIBUTING.md states', () => {
    expect(SUBJECT_MAX).toBe(72);
    expect(readFileSync(join(PROJECT_ROOT, 'CONTRIBUTING.md'), 'utf8')).toContain('at most 72 characters');
  });

  it('passes a 72-character subject and fails a 73-character one, naming it', () => {
    const dir = repository();
    commit(dir, `${subject(72)}\n\nThe body may be as long as it needs: ${'x'.repeat(200)}`);
    const passed = runScript(dir);
    expect({ status: passed.status, stderr: passed.stderr }).toEqual({ status: 0, stderr: '' });
    expect(passed.stdout).toContain('HEAD only');

    commit(dir, subject(73));
    const failed = runScript(dir);
    expect(failed.status).toBe(1);
    expect(failed.stderr).toContain(`subject of 73 characters (at most 72): ${subject(73)}`);
  });

  it('checks every commit after the baseline, and none before it', () => {
    const dir = repository();
    commit(dir, subject(90));
    const baseline = commit(dir, subject(20));
    commit(dir, subject(72));
    expect(checkHistory(dir, baseline)).toEqual({ checked: 'after-baseline', long: [] });

    const tooLong = commit(dir, subject(73));
    commit(dir, subject(10));
    expect(checkHistory(dir, baseline)).toEqual({
      checked: 'after-baseline',
      long: [{ commit: tooLong, subject: subject(73), length: 73 }],
    });
  });

  it('checks HEAD alone when the baseline is not in the clone (a shallow clone), and nothing outside a repository', () => {
    const dir = repository();
    commit(dir, subject(73));
    commit(dir, subject(72));
    expect(checkHistory(dir, 'f'.repeat(40))).toEqual({ checked: 'head-only', long: [] });
    const plain = mkdtempSync(join(tmpdir(), 'commit-subjects-'));
    repos.push(plain);
    expect(checkHistory(plain, 'f'.repeat(40))).toEqual({ checked: 'no-repository', long: [] });
  });

  it('reads a hook message as git records it: no comments, nothing below the scissors, first paragraph joined', () => {
    const message = [
      '',
      '# Please enter the commit message',
      'First line',
      'second line',
      '',
      'Body',
      '# ------------------------ >8 ------------------------',
      'diff',
    ];
    expect(messageSubject(message.join('\n'))).toBe('First line second line');
  });

  it('the commit-msg hook refuses a 73-character subject and lets 72 through', () => {
    const dir = repository();
    git(dir, 'config', 'core.hooksPath', HOOKS);
    const refused = git(dir, 'commit', '-q', '--allow-empty', '-m', subject(73));
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('subject of 73 characters');
    expect(git(dir, 'rev-parse', '--verify', '--quiet', 'HEAD').status).not.toBe(0);

    commit(dir, subject(72));
    expect(git(dir, 'log', '--format=%s').stdout.trim()).toBe(subject(72));
  });
});
