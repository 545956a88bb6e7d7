/**
 * The real worker (`node src/worker.ts`) as a child process, for tests that need what an in-process
 * worker cannot give: SIGKILL in the middle of a send, SIGTERM handling and the exit code.
 *
 * Every child spawned here is remembered until it has exited; `killAllWorkers()` (call it in
 * afterEach/afterAll) SIGKILLs the survivors and waits for them, and a process 'exit' hook SIGKILLs
 * any that are left if the test process ends anyway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The package root (/work/main): the child's cwd, so `src/worker.ts` resolves like `npm start`. */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const WORKER_SCRIPT = fileURLToPath(new URL('../../src/worker.ts', import.meta.url));

/** Variables of the test process never passed on: the test's env decides them explicitly. */
const STRIPPED = [/^REDIS_/, /^CUSTODY_/, /^QUEUE_PREFIX$/, /^EVENTS_STREAM$/, /^NODE_OPTIONS$/];

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnWorkerOptions {
  /** Shown in error messages (default `worker`). */
  name?: string;
  /** Most characters of stdout+stderr kept (the oldest are dropped first); default 2 MiB. */
  maxOutputChars?: number;
  /** Also copy every line to this test process's stderr (debugging). */
  echo?: boolean;
  /** Node options placed before the script, e.g. `['--import', preloadUrl]` (default none). */
  execArgv?: readonly string[];
}

export interface WorkerProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves once the child has exited and its output is closed. Never rejects. */
  readonly exited: Promise<ExitInfo>;
  /** Sends a signal (false when the child is already gone). */
  kill(signal?: NodeJS.Signals): boolean;
  /** stdout and stderr interleaved as received (bounded: the oldest text is dropped first). */
  output(): string;
  /** Resolves with the first line (past or future) containing `substring`; rejects on time-out or exit. */
  waitForLog(substring: string, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit, or rejects after `timeoutMs` (the child is left running). */
  waitForExit(timeoutMs: number): Promise<ExitInfo>;
  /** SIGTERM, then SIGKILL if still running after `graceMs`; resolves with the exit. */
  stop(graceMs?: number): Promise<ExitInfo>;
  readonly running: boolean;
}

const live = new Set<WorkerProcess>();

process.once('exit', () => {
  for (const worker of live) worker.kill('SIGKILL');
});

/** Spawns `node src/worker.ts` (Node 24: this process's own executable) with `env` over a cleaned process.env. */
export function spawnWorker(env: Record<string, string>, opts: SpawnWorkerOptions = {}): WorkerProcess {
  const name = opts.name ?? 'worker';
  const maxChars = opts.maxOutputChars ?? 2 * 1024 * 1024;
  const childEnv: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !STRIPPED.some((pattern) => pattern.test(key))) childEnv[key] = value;
  }
  Object.assign(childEnv, env);

  const child = spawn(process.execPath, [...(opts.execArgv ?? []), WORKER_SCRIPT], {
    cwd: PROJECT_ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    // No process (ENOENT and the like): the 'error' event that follows says why; nothing to track.
    child.once('error', () => {});
    throw new Error(`${name}: could not spawn ${process.execPath} ${WORKER_SCRIPT}`);
  }
  const pid = child.pid;

  let buffer = '';
  const partial = { stdout: '', stderr: '' };
  type Waiter = { substring: string; resolve: (line: string) => void };
  const waiters = new Set<Waiter>();
  let exitInfo: ExitInfo | undefined;
  const exitListeners = new Set<(info: ExitInfo) => void>();

  const onLine = (line: string) => {
    if (opts.echo) process.stderr.write(`[${name} ${pid}] ${line}\n`);
    for (const waiter of waiters) {
      if (line.includes(waiter.substring)) {
        waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  };
  const onData = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    buffer += text;
    if (buffer.length > maxChars) buffer = buffer.slice(buffer.length - maxChars);
    const lines = (partial[stream] + text).split('\n');
    partial[stream] = lines.pop() ?? '';
    for (const line of lines) onLine(line);
  };
  child.stdout!.on('data', onData('stdout'));
  child.stderr!.on('data', onData('stderr'));

  const exited = new Promise<ExitInfo>((resolve) => {
    const finish = (info: ExitInfo) => {
      if (exitInfo) return;
      for (const stream of ['stdout', 'stderr'] as const) {
        if (partial[stream]) onLine(partial[stream]);
        partial[stream] = '';
      }
      exitInfo = info;
      live.delete(worker);
      for (const listener of exitListeners) listener(info);
      exitListeners.clear();
      resolve(info);
    };
    child.once('close', (code, signal) => finish({ code, signal }));
    // After a successful spawn, 'error' only means a failed kill(); 'close' still follows the exit.
    child.on('error', (error) => {
      buffer += `\n[child process error] ${error.message}\n`;
    });
  });

  const tail = () => {
    const lines = buffer.trimEnd().split('\n');
    return lines.slice(-20).join('\n');
  };

  const worker: WorkerProcess = {
    name,
    child,
    pid,
    exited,
    get running() {
      return exitInfo === undefined;
    },
    kill(signal = 'SIGTERM') {
      if (exitInfo) return false;
      try {
        return child.kill(signal);
      } catch {
        return false;
      }
    },
    output: () => buffer,
    waitForLog(substring, timeoutMs = 15_000) {
      const past = buffer.split('\n').find((line) => line.includes(substring));
      if (past !== undefined) return Promise.resolve(past);
      return new Promise<string>((resolve, reject) => {
        const waiter: Waiter = {
          substring,
          resolve: (line) => {
            cleanup();
            resolve(line);
          },
        };
        const onExit = (info: ExitInfo) => {
          cleanup();
          reject(new Error(`${name} (pid ${pid}) exited (code ${info.code}, signal ${info.signal}) before logging "${substring}"; last output:\n${tail()}`));
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`${name} (pid ${pid}) did not log "${substring}" within ${timeoutMs} ms; last output:\n${tail()}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(waiter);
          exitListeners.delete(onExit);
        };
        waiters.add(waiter);
        if (exitInfo) onExit(exitInfo);
        else exitListeners.add(onExit);
      });
    },
    waitForExit(timeoutMs) {
      if (exitInfo) return Promise.resolve(exitInfo);
      return new Promise<ExitInfo>((resolve, reject) => {
        const timer = setTimeout(() => {
          exitListeners.delete(onExit);
          reject(new Error(`${name} (pid ${pid}) still running after ${timeoutMs} ms; last output:\n${tail()}`));
        }, timeoutMs);
        const onExit = (info: ExitInfo) => {
          clearTimeout(timer);
          resolve(info);
        };
        exitListeners.add(onExit);
      });
    },
    async stop(graceMs = 10_000) {
      if (exitInfo) return exitInfo;
      worker.kill('SIGTERM');
      const timer = setTimeout(() => worker.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  live.add(worker);
  return worker;
}

/** Worker children still running (spawned by this test file's process). */
export function liveWorkers(): WorkerProcess[] {
  return [...live];
}

/** SIGKILLs every child still running and waits until each has exited (use in afterEach/afterAll). */
export async function killAllWorkers(): Promise<void> {
  const workers = [...live];
  for (const worker of workers) worker.kill('SIGKILL');
  await Promise.all(workers.map((worker) => worker.exited));
}
