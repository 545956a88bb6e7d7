/**
 * One of the package's scripts (`node src/…/main.ts`) as a child process, the way a person or another
 * program runs it, with its output captured. Every child is remembered until it has exited;
 * `killAllScripts()` (afterEach/afterAll) SIGKILLs the survivors, and so does this process's exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ScriptResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ScriptOptions {
  /** Set on top of this process's environment, minus `stripped`. */
  env: Record<string, string>;
  /** Variables of the test process never passed on: each test decides them explicitly. */
  stripped: readonly RegExp[];
  /** Written to stdin, which is then closed (default: stdin closed at once). */
  input?: string | undefined;
  /** Names the script in failure messages. */
  label: string;
  /** Default time-out of waitFor(). */
  waitTimeoutMs: number;
  /** Default time-out of exit(). */
  exitTimeoutMs: number;
}

export interface ScriptProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once `predicate` holds for the output so far; rejects on time-out or exit. */
  waitFor(what: string, predicate: (stdout: string, stderr: string) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited (no time limit). */
  readonly exited: Promise<ScriptResult>;
  /** Resolves when the process has exited; kills it (SIGKILL) and rejects after `timeoutMs`. */
  exit(timeoutMs?: number): Promise<ScriptResult>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export function spawnScript(script: string, args: string[], options: ScriptOptions): ScriptProcess {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !options.stripped.some((pattern) => pattern.test(key))) env[key] = value;
  }
  const child = spawn(process.execPath, [script, ...args], {
    cwd: PROJECT_ROOT,
    env: Object.assign(env, options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    child.once('error', () => {});
    throw new Error(`could not spawn ${process.execPath} ${script}`);
  }
  live.add(child);
  let stdout = '';
  let stderr = '';
  let done = false;
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
  const exited = new Promise<ScriptResult>((resolve) => {
    child.once('close', (code, signal) => {
      live.delete(child);
      done = true;
      resolve({ code, signal, stdout, stderr });
      changed();
    });
  });
  const describe = () => `stdout:\n${stdout}\nstderr:\n${stderr}`;
  const name = `${options.label} ${args.join(' ')}`.trim();

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor(what, predicate, timeoutMs = options.waitTimeoutMs) {
      return new Promise<void>((resolve, reject) => {
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        const check = () => {
          if (predicate(stdout, stderr)) finish(resolve);
          else if (done) finish(() => reject(new Error(`${name} exited before ${what}; ${describe()}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`${name}: no ${what} within ${timeoutMs} ms; ${describe()}`))), timeoutMs);
        listeners.add(check);
        check();
      });
    },
    async exit(timeoutMs = options.exitTimeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`${name} did not exit within ${timeoutMs} ms; ${describe()}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** SIGKILLs every script child still running and waits for each to exit. */
export async function killAllScripts(): Promise<void> {
  await Promise.all(
    [...live].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('close', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}
