/**
 * `npm run demo` (`node src/demo/main.ts`) as a child process, the way a person runs it. Every child is
 * remembered until it has exited; `killAllDemos()` SIGKILLs the survivors (afterEach).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const DEMO_SCRIPT = fileURLToPath(new URL('../../src/demo/main.ts', import.meta.url));

/** Variables of the test process never passed on: each test sets what the demo sees. */
const STRIPPED = [/^REDIS_/, /^DEMO_/, /^HTTP_/, /^DASHBOARD_/, /^LOG_LEVEL$/, /^QUEUE_PREFIX$/, /^NODE_OPTIONS$/, /^NO_COLOR$/];

export interface DemoResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface DemoProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once `predicate` holds for the output so far; rejects on time-out or exit. */
  waitFor(what: string, predicate: (stdout: string, stderr: string) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited; kills it (SIGKILL) and rejects after `timeoutMs`. */
  exit(timeoutMs?: number): Promise<DemoResult>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export function spawnDemo(args: string[], env: Record<string, string>): DemoProcess {
  const childEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !STRIPPED.some((pattern) => pattern.test(key))) childEnv[key] = value;
  }
  const child = spawn(process.execPath, [DEMO_SCRIPT, ...args], {
    cwd: PROJECT_ROOT,
    env: Object.assign(childEnv, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${process.execPath} ${DEMO_SCRIPT}`);
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
  const exited = new Promise<DemoResult>((resolve) => {
    child.once('close', (code, signal) => {
      live.delete(child);
      done = true;
      resolve({ code, signal, stdout, stderr });
      changed();
    });
  });
  const describe = () => `stdout:\n${stdout}\nstderr:\n${stderr}`;

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    waitFor(what, predicate, timeoutMs = 30_000) {
      return new Promise<void>((resolve, reject) => {
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          listeners.delete(check);
          settle();
        };
        const check = () => {
          if (predicate(stdout, stderr)) finish(resolve);
          else if (done) finish(() => reject(new Error(`demo exited before ${what}; ${describe()}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`demo: no ${what} within ${timeoutMs} ms; ${describe()}`))), timeoutMs);
        listeners.add(check);
        check();
      });
    },
    async exit(timeoutMs = 45_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill('SIGKILL');
          reject(new Error(`demo did not exit within ${timeoutMs} ms; ${describe()}`));
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

export async function killAllDemos(): Promise<void> {
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
