/**
 * The CLI (`node src/cli/main.ts`) as a child process, the way an operator or a script runs it.
 *
 * `runCli` waits for the child to exit on its own: a command that leaves a connection open never
 * exits, and the time-out turns that into a test failure (after a SIGKILL). `spawnCli` is for
 * long-running commands (`events --follow`).
 */
import { fileURLToPath } from 'node:url';
import { killAllScripts, spawnScript, type ScriptProcess, type ScriptResult } from './script-process.ts';

export const CLI_SCRIPT = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

const STRIPPED = [/^REDIS_/, /^CUSTODY_/, /^QUEUE_PREFIX$/, /^EVENTS_STREAM$/, /^NODE_OPTIONS$/];

export type CliResult = ScriptResult;
export type CliProcess = ScriptProcess;

export interface CliOptions {
  env: Record<string, string>;
  /** Written to stdin, which is then closed (default: stdin closed at once). */
  input?: string;
  /** Kill and fail when the process has not exited by then (default 20 s). */
  timeoutMs?: number;
}

export function spawnCli(args: string[], options: CliOptions): CliProcess {
  return spawnScript(CLI_SCRIPT, args, { env: options.env, input: options.input, stripped: STRIPPED, label: 'cli', waitTimeoutMs: 15_000, exitTimeoutMs: 20_000 });
}

/** Runs the CLI to completion; rejects (after SIGKILL) when it does not exit on its own in time. */
export async function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  return spawnCli(args, options).exit(options.timeoutMs);
}

/** SIGKILLs every CLI child still running and waits for each to exit. */
export const killAllClis = killAllScripts;
