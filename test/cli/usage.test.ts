/**
 * The top-level help (src/cli/usage.ts) says which of the worker's variables each command reads, and
 * agrees with each command's own help: for `resolve`, `cancel` and `ledger`, every variable their "Needs ..."
 * paragraph names is in the top-level Configuration paragraph, under that command.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { killAllClis, runCli } from '../helpers/cli-process.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

afterAll(killAllClis);

async function helpText(args: string[]): Promise<string> {
  const result = await runCli(args, { env: {} });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result.stdout;
}

/** The variables (NAMES_LIKE_THIS) of the paragraph starting with `start`. */
function variablesOf(text: string, start: string): string[] {
  const at = text.indexOf(start);
  expect(at, `"${start}" in:\n${text}`).toBeGreaterThanOrEqual(0);
  const paragraph = text.slice(at).split(/\n\s*\n/)[0]!;
  return [...new Set(paragraph.match(/\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\bRETENTION\b/g) ?? [])];
}

describe('the top-level help', { timeout: processesTimeout(1) }, () => {
  it('names, for resolve, cancel and ledger, every variable their own help says they read (TOMBSTONE_RETENTION too)', async () => {
    const [top, resolve, cancel, ledger] = await Promise.all([
      helpText(['help']),
      helpText(['resolve', '--help']),
      helpText(['cancel', '--help']),
      helpText(['ledger', '--help']),
    ]);
    const configuration = top
      .slice(top.indexOf('Configuration:'))
      .split(/\n\s*\n/)[0]!
      .replace(/\s+/g, ' ');
    // "...; resolve also reads A, B and C, ledger those and D, E and F; ..."
    const resolveReads = /resolve also reads ([^;]*?), ledger those/.exec(configuration)?.[1] ?? '';
    const ledgerReads = `${resolveReads} ${/ledger those and ([^;]*);/.exec(configuration)?.[1] ?? ''}`;
    const queueReads = /need only ([^;]*);/.exec(configuration)?.[1] ?? '';
    const missing = (needed: string[], named: string) => needed.filter((name) => !new RegExp(`\\b${name}\\b`).test(named));
    expect({
      resolve: missing(variablesOf(resolve, 'Needs '), `${queueReads} ${resolveReads}`),
      cancel: missing(variablesOf(cancel, 'Needs '), `${queueReads} ${resolveReads}`),
      ledger: missing(variablesOf(ledger, 'Needs '), `${queueReads} ${ledgerReads}`),
    }).toEqual({ resolve: [], cancel: [], ledger: [] });
    expect(resolveReads).toMatch(/\(cancel too\)/);
    expect(resolveReads).toMatch(/\bTOMBSTONE_RETENTION\b/);
  });
});
