/**
 * Commit subjects of at most SUBJECT_MAX characters (CONTRIBUTING.md, "Habits"): the detail goes in the
 * body. Two ways in:
 *
 *   node tools/commit-subjects.ts                      every commit after BASELINE up to HEAD (.ci/run)
 *   node tools/commit-subjects.ts --message-file FILE  one message, as git hands it to a commit-msg hook
 *                                                      (tools/git-hooks/commit-msg)
 *
 * Exit 1 naming each subject that is too long, else 0. The rule was written before it was checked:
 * commits up to BASELINE are history and are not checked. A clone that does not hold BASELINE (a shallow
 * one) has only HEAD's subject checked; outside a git repository there is nothing to check.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const SUBJECT_MAX = 72;

/** main's HEAD when the rule started being checked; every commit after it is held to the rule. */
export const BASELINE = '578afec7722028722773938ff7b208008fe713df';

export interface LongSubject {
  /** The commit's id, or 'message' for a message not yet committed. */
  readonly commit: string;
  readonly subject: string;
  /** In characters (code points), as a person counts them. */
  readonly length: number;
}

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function gitSucceeds(cwd: string, args: string[]): boolean {
  try {
    git(cwd, args);
    return true;
  } catch {
    return false;
  }
}

function judge(commit: string, subject: string): LongSubject | undefined {
  const length = [...subject].length;
  return length > SUBJECT_MAX ? { commit, subject, length } : undefined;
}

/**
 * The subject git will record for a message as a commit-msg hook receives it: comment lines and
 * everything below the scissors line dropped, then the first paragraph, its lines joined by spaces
 * (what `git log --format=%s` shows).
 */
export function messageSubject(message: string): string {
  const paragraph: string[] = [];
  for (const line of message.split('\n')) {
    if (/^# -+ >8 -+$/.test(line)) break;
    if (line.startsWith('#')) continue;
    if (line.trim() === '') {
      if (paragraph.length > 0) break;
      continue;
    }
    paragraph.push(line.trim());
  }
  return paragraph.join(' ');
}

/** The too-long subject of one message, if it is. */
export function checkMessage(message: string): LongSubject | undefined {
  return judge('message', messageSubject(message));
}

/**
 * The commits of the repository at `cwd` whose subjects are too long: those after `baseline` up to HEAD,
 * or HEAD alone when `baseline` is not in this clone. `checked` says which was done.
 */
export function checkHistory(
  cwd: string,
  baseline: string = BASELINE,
): { checked: 'after-baseline' | 'head-only' | 'no-repository'; long: LongSubject[] } {
  if (!gitSucceeds(cwd, ['rev-parse', '--verify', '--quiet', 'HEAD'])) return { checked: 'no-repository', long: [] };
  const hasBaseline = gitSucceeds(cwd, ['cat-file', '-e', `${baseline}^{commit}`]);
  const range = hasBaseline ? [`${baseline}..HEAD`] : ['-1', 'HEAD'];
  // NUL-separated: a subject never holds one, and a commit id never holds a space.
  const out = git(cwd, ['log', '--format=%H %s%x00', ...range]);
  const long: LongSubject[] = [];
  for (const entry of out.split('\0')) {
    const line = entry.replace(/^\n/, '');
    if (line === '') continue;
    const space = line.indexOf(' ');
    const found = judge(line.slice(0, space), line.slice(space + 1));
    if (found) long.push(found);
  }
  return { checked: hasBaseline ? 'after-baseline' : 'head-only', long };
}

function report(long: readonly LongSubject[]): void {
  for (const item of long) {
    const id = item.commit === 'message' ? 'this commit' : item.commit.slice(0, 10);
    process.stderr.write(`${id}: subject of ${item.length} characters (at most ${SUBJECT_MAX}): ${item.subject}\n`);
  }
  process.stderr.write('Put the detail in the body, after a blank line (CONTRIBUTING.md, "Habits").\n');
}

function main(argv: readonly string[]): number {
  if (argv[0] === '--message-file' && argv[1] !== undefined) {
    const found = checkMessage(readFileSync(argv[1], 'utf8'));
    if (found) report([found]);
    return found ? 1 : 0;
  }
  if (argv.length > 0) {
    process.stderr.write('usage: node tools/commit-subjects.ts [--message-file FILE]\n');
    return 2;
  }
  const { checked, long } = checkHistory(process.cwd());
  if (long.length > 0) {
    report(long);
    return 1;
  }
  const what = {
    'after-baseline': `every commit after ${BASELINE.slice(0, 10)}`,
    'head-only': `HEAD only (${BASELINE.slice(0, 10)} is not in this clone)`,
    'no-repository': 'nothing (not a git repository)',
  }[checked];
  process.stdout.write(`commit subjects: ${what} within ${SUBJECT_MAX} characters\n`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = main(process.argv.slice(2));
