/**
 * The CLI (`node src/cli/main.ts`) as a child process, the way an operator or a script runs it.
 *
 * `runCli` waits for the child to exit on its own: a command that leaves a connection open never
 * exits, and the time-out turns that into a test failure (after a SIGKILL). `spawnCli` is for
 * long-running commands (`events --follow`). Every child is remembered until it has exited;
 * `killAllClis()` (afterEach/afterAll) SIGKILLs the survivors.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CLI_SCRIPT = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** Variables of the test process never passed on: each test decides them explicitly. */
const STRIPPED = [/^REDIS_/, /^CUSTODY_/, /^QUEUE_PREFIX$/, /^EVENTS_STREAM$/, /^NODE_OPTIONS$/];

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env: Record<string, string>;
  /** Written to stdin, which is then closed (default: stdin closed at once). */
  input?: string;
  /** Kill and fail when the process has not exited by then (default 20 s). */
  timeoutMs?: number;
}

export interface CliProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once `predicate` holds for the output so far; rejects on time-out or exit. */
  waitFor(what: string, predicate: (stdout: string, stderr: string) => boolean, timeoutMs?: number): Promise<void>;
  readonly exited: Promise<CliResult>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

function childEnv(env: Record<string, string>): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !STRIPPED.some((pattern) => pattern.test(key))) result[key] = value;
  }
  return Object.assign(result, env);
}

export function spawnCli(args: string[], options: CliOptions): CliProcess {
  const child = spawn(process.execPath, [CLI_SCRIPT, ...args], {
    cwd: PROJECT_ROOT,
    env: childEnv(options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    child.once('error', () => {});
    throw new Error(`could not spawn ${process.execPath} ${CLI_SCRIPT}`);
  }
  live.add(child);
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  const changed = () => {
    for (const listener of listeners) listener();
  };
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    changed();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    changed();
  });
  // A child that exits before reading stdin makes the write fail with EPIPE: not the test's concern.
  child.stdin!.on('error', () => {});
  child.stdin!.end(options.input ?? '');
  const exited = new Promise<CliResult>((resolve) => {
    child.once('close', (code, signal) => {
      live.delete(child);
      resolve({ code, signal, stdout, stderr });
      changed();
    });
  });
  let done = false;
  void exited.then(() => {
    done = true;
  });
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor(what, predicate, timeoutMs = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (predicate(stdout, stderr)) finish(() => resolve());
          else if (done) finish(() => reject(new Error(`cli exited before ${what}; stdout:\n${stdout}\nstderr:\n${stderr}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`cli: no ${what} within ${timeoutMs} ms; stdout:\n${stdout}\nstderr:\n${stderr}`))), timeoutMs);
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        listeners.add(check);
        check();
      });
    },
  };
}

/** Runs the CLI to completion; rejects (after SIGKILL) when it does not exit on its own in time. */
export async function runCli(args: string[], options: CliOptions): Promise<CliResult> {
  const cli = spawnCli(args, options);
  const timeoutMs = options.timeoutMs ?? 20_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cli.child.kill('SIGKILL');
      reject(new Error(`cli ${args.join(' ')} did not exit within ${timeoutMs} ms; stdout:\n${cli.stdout()}\nstderr:\n${cli.stderr()}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([cli.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** SIGKILLs every CLI child still running and waits for each to exit. */
export async function killAllClis(): Promise<void> {
  const children = [...live];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('close', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}
