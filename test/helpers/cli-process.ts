/**
 * The CLI (`node src/cli/main.ts`) as a child process, the way an operator or a script runs it.
 *
 * `runCli` waits for the child to exit on its own: a command that leaves a connection open never
 * exits, and the time-out turns that into a test failure (after a SIGKILL). `spawnCli` is for
 * long-running commands (`events --follow`). Spawning and clean-up: tools/child-process.ts.
 */
import { fileURLToPath } from 'node:url';
import { killAllChildren, spawnNodeScript, type ChildResult, type NodeScript } from '../../tools/child-process.ts';
import { PROCESS_MS } from './timeouts.ts';

export const CLI_SCRIPT = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

export type CliResult = ChildResult;
export type CliProcess = NodeScript;

export interface CliOptions {
  env: Record<string, string>;
  /** Written to stdin, which is then closed (default: no stdin). */
  input?: string;
  /** Kill and fail when the process has not exited by then (default PROCESS_MS, test/helpers/timeouts.ts). */
  timeoutMs?: number;
}

export function spawnCli(args: string[], options: CliOptions): CliProcess {
  return spawnNodeScript(CLI_SCRIPT, {
    name: `cli ${args.join(' ')}`.trim(),
    args,
    env: options.env,
    input: options.input,
    waitTimeoutMs: PROCESS_MS,
    exitTimeoutMs: options.timeoutMs ?? PROCESS_MS,
  });
}

/** Runs the CLI to completion; rejects (after SIGKILL) when it does not exit on its own in time. */
export async function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  return spawnCli(args, options).exit();
}

/** SIGKILLs every CLI child still running and waits for each to exit. */
export const killAllClis = killAllChildren;
