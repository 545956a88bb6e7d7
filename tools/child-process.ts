/**
 * One of the package's Node scripts (the worker, the CLI, the demo, the simulator, the benchmark's bare
 * worker) as a child process, the way a person or another program runs it: `node <script> [args]` with
 * this process's own Node 24, the package root as cwd, and an environment in which the caller decides
 * every setting (see STRIPPED). Its output is captured (bounded), lines can be waited for, and it is
 * stopped with SIGTERM, then SIGKILL.
 *
 * Every child is remembered until it has exited: `killAllChildren()` (afterEach/afterAll, or the end of a
 * benchmark) SIGKILLs the survivors and waits for them, and this process's 'exit' SIGKILLs any left, so
 * neither a failed test nor a crashed benchmark leaves a worker running against a shared Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The package root: every child's cwd, so `src/worker.ts` resolves as it does for `npm start`. */
export const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));

/**
 * Variables of this process never passed on: the settings of the worker, the CLI, the simulator, the
 * demo and the benchmark. A developer's shell or CI may set any of them; the child gets only what the
 * caller's `env` says.
 */
export const STRIPPED: readonly RegExp[] = [
  /^REDIS_/,
  /^CUSTODY_/,
  /^QUEUE_PREFIX$/,
  /^EVENTS_/,
  /^HTTP_/,
  /^DASHBOARD_/,
  /^LOG_LEVEL$/,
  /^OTEL_/,
  /^SIM_/,
  /^SIMULATOR_/,
  /^DEMO_/,
  /^BENCH_/,
  /^BARE_/,
  /^NO_COLOR$/,
  /^NODE_OPTIONS$/,
];

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ChildResult extends ExitInfo {
  stdout: string;
  stderr: string;
}

export interface NodeScriptOptions {
  /** Arguments after the script. */
  args?: readonly string[];
  /** Set on top of this process's environment minus STRIPPED. */
  env?: Record<string, string>;
  /** Names the child in messages and echoed lines (default: the script's file name). */
  name?: string;
  /** Node options placed before the script, e.g. `['--import', preloadUrl]` or `--cpu-prof` flags. */
  execArgv?: readonly string[];
  /** Written to stdin, which is then closed (default: no stdin). */
  input?: string | undefined;
  /** Most characters of stdout+stderr kept (the oldest are dropped first); default 2 MiB. */
  maxOutputChars?: number;
  /** Also copy every line to this process's stderr, prefixed `[name pid]` (debugging). */
  echo?: boolean;
  /** Default time-out of waitForLog() and waitFor(); default 15 s. */
  waitTimeoutMs?: number;
  /** Default time-out of exit(); default 30 s. */
  exitTimeoutMs?: number;
  /** Default grace of stop() between SIGTERM and SIGKILL; default 10 s. */
  stopGraceMs?: number;
}

export interface NodeScript {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves once the child has exited and its output is closed. Never rejects. */
  readonly exited: Promise<ExitInfo>;
  readonly running: boolean;
  /** Sends a signal (false when the child is already gone). */
  kill(signal?: NodeJS.Signals): boolean;
  stdout(): string;
  stderr(): string;
  /** stdout and stderr interleaved as received. */
  output(): string;
  /** The last `lines` lines of output, for error messages. */
  tail(lines?: number): string;
  /** Resolves with the first line (past or future) containing `substring`; rejects on time-out or exit. */
  waitForLog(substring: string, timeoutMs?: number): Promise<string>;
  /** Resolves once `predicate` holds for the output so far; rejects on time-out or exit. */
  waitFor(what: string, predicate: (stdout: string, stderr: string) => boolean, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit, or rejects after `timeoutMs` (the child is left running). */
  waitForExit(timeoutMs?: number): Promise<ExitInfo>;
  /** Resolves with the exit and the output; after `timeoutMs` SIGKILLs the child and rejects. */
  exit(timeoutMs?: number): Promise<ChildResult>;
  /** SIGTERM, then SIGKILL if still running after `graceMs`; resolves with the exit. */
  stop(graceMs?: number): Promise<ExitInfo>;
}

const live = new Set<NodeScript>();
let exitHookInstalled = false;

/** The environment a child gets: this process's minus STRIPPED, then `env`. */
export function childEnv(env: Record<string, string> = {}): Record<string, string> {
  const result: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !STRIPPED.some((pattern) => pattern.test(key))) result[key] = value;
  }
  return Object.assign(result, env);
}

type Stream = 'stdout' | 'stderr';

/**
 * The output of both streams as received, bounded (the oldest chunks go first), stored once: stdout,
 * stderr and the interleaved text are joined when asked for (a chaos run keeps tens of MB per worker).
 */
class Captured {
  #chunks: Array<{ stream: Stream; text: string }> = [];
  #first = 0;
  #size = 0;
  readonly #max: number;
  readonly #partial: Record<Stream, string> = { stdout: '', stderr: '' };
  readonly #joined = new Map<Stream | 'both', string>();
  constructor(max: number) {
    this.#max = max;
  }
  /** Appends a chunk of one stream; returns the lines it completed. */
  append(stream: Stream, text: string): string[] {
    this.note(stream, text);
    const lines = (this.#partial[stream] + text).split('\n');
    this.#partial[stream] = lines.pop() ?? '';
    return lines;
  }
  /** Keeps text without looking for lines in it (also what this process adds, e.g. a failed kill). */
  note(stream: Stream, text: string): void {
    this.#chunks.push({ stream, text });
    this.#size += text.length;
    while (this.#size > this.#max) {
      const oldest = this.#chunks[this.#first]!;
      const excess = this.#size - this.#max;
      if (oldest.text.length > excess) {
        oldest.text = oldest.text.slice(excess);
        this.#size -= excess;
      } else {
        this.#size -= oldest.text.length;
        this.#first++;
      }
    }
    if (this.#first > 1024 && this.#first * 2 > this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#first);
      this.#first = 0;
    }
    this.#joined.clear();
  }
  /** The unterminated last lines, once the streams have ended. */
  flush(): string[] {
    const rest = [this.#partial.stdout, this.#partial.stderr].filter((line) => line !== '');
    this.#partial.stdout = '';
    this.#partial.stderr = '';
    return rest;
  }
  text(which: Stream | 'both'): string {
    let joined = this.#joined.get(which);
    if (joined === undefined) {
      joined = '';
      for (let i = this.#first; i < this.#chunks.length; i++) {
        const chunk = this.#chunks[i]!;
        if (which === 'both' || chunk.stream === which) joined += chunk.text;
      }
      this.#joined.set(which, joined);
    }
    return joined;
  }
}

/** Spawns `node [execArgv] <script> [args]` (this process's Node) in the package root. */
export function spawnNodeScript(script: string, options: NodeScriptOptions = {}): NodeScript {
  const name = options.name ?? script.split('/').at(-1)!;
  const max = options.maxOutputChars ?? 2 * 1024 * 1024;
  const waitTimeoutMs = options.waitTimeoutMs ?? 15_000;
  const child = spawn(process.execPath, [...(options.execArgv ?? []), script, ...(options.args ?? [])], {
    cwd: PROJECT_ROOT,
    env: childEnv(options.env),
    stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    // No process (ENOENT and the like): the 'error' event that follows says why; nothing to track.
    child.once('error', () => {});
    throw new Error(`${name}: could not spawn ${process.execPath} ${script}`);
  }
  const pid = child.pid;
  if (options.input !== undefined) {
    // A child that exits before reading stdin makes the write fail with EPIPE: not the caller's concern.
    child.stdin!.on('error', () => {});
    child.stdin!.end(options.input);
  }

  const captured = new Captured(max);
  let exitInfo: ExitInfo | undefined;
  /** Called after every line, every chunk and the exit: the waiters check their condition. */
  const listeners = new Set<(line?: string) => void>();
  const notify = (line?: string) => {
    for (const listener of [...listeners]) listener(line);
  };
  const onLine = (line: string) => {
    if (options.echo) process.stderr.write(`[${name} ${pid}] ${line}\n`);
    notify(line);
  };
  for (const stream of ['stdout', 'stderr'] as const) {
    child[stream]!.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of captured.append(stream, chunk)) onLine(line);
      notify();
    });
  }

  const exited = new Promise<ExitInfo>((resolve) => {
    child.once('close', (code, signal) => {
      for (const line of captured.flush()) onLine(line);
      exitInfo = { code, signal };
      live.delete(handle);
      resolve(exitInfo);
      notify();
    });
    // After a successful spawn, 'error' only means a failed kill(); 'close' still follows the exit.
    child.on('error', (error) => {
      captured.note('stderr', `\n[child process error] ${error.message}\n`);
    });
  });

  const tail = (lines = 20) => captured.text('both').trimEnd().split('\n').slice(-lines).join('\n');
  const exitText = (info: ExitInfo) => `exited (code ${info.code}, signal ${info.signal})`;

  /** Waits until `settled()` returns a value; rejects with `failure(why)` on time-out or exit. */
  const waitUntil = <T>(settled: (line?: string) => T | undefined, failure: (why: string) => string, timeoutMs: number): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        listeners.delete(check);
        settle();
      };
      const check = (line?: string) => {
        const value = settled(line);
        if (value !== undefined) finish(() => resolve(value));
        else if (exitInfo) finish(() => reject(new Error(failure(exitText(exitInfo!)))));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(failure(`nothing within ${timeoutMs} ms`)))), timeoutMs);
      listeners.add(check);
      check();
    });

  const handle: NodeScript = {
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
    stdout: () => captured.text('stdout'),
    stderr: () => captured.text('stderr'),
    output: () => captured.text('both'),
    tail,
    waitForLog(substring, timeoutMs = waitTimeoutMs) {
      const past = captured
        .text('both')
        .split('\n')
        .find((line) => line.includes(substring));
      if (past !== undefined) return Promise.resolve(past);
      return waitUntil(
        (line) => (line !== undefined && line.includes(substring) ? line : undefined),
        (why) => `${name} (pid ${pid}) did not log "${substring}": ${why}; last output:\n${tail()}`,
        timeoutMs,
      );
    },
    waitFor(what, predicate, timeoutMs = waitTimeoutMs) {
      return waitUntil(
        // Once per chunk (not per line): a predicate may parse everything printed so far.
        (line) => (line === undefined && predicate(captured.text('stdout'), captured.text('stderr')) ? true : undefined),
        (why) => `${name} (pid ${pid}): no ${what}: ${why}; stdout:\n${captured.text('stdout')}\nstderr:\n${captured.text('stderr')}`,
        timeoutMs,
      ).then(() => undefined);
    },
    waitForExit(timeoutMs = options.exitTimeoutMs ?? 30_000) {
      if (exitInfo) return Promise.resolve(exitInfo);
      return new Promise<ExitInfo>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${name} (pid ${pid}) still running after ${timeoutMs} ms; last output:\n${tail()}`)),
          timeoutMs,
        );
        void exited.then((info) => {
          clearTimeout(timer);
          resolve(info);
        });
      });
    },
    async exit(timeoutMs = options.exitTimeoutMs ?? 30_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          handle.kill('SIGKILL');
          reject(
            new Error(
              `${name} (pid ${pid}) did not exit within ${timeoutMs} ms; stdout:\n${captured.text('stdout')}\nstderr:\n${captured.text('stderr')}`,
            ),
          );
        }, timeoutMs);
      });
      try {
        const info = await Promise.race([exited, timeout]);
        return { ...info, stdout: captured.text('stdout'), stderr: captured.text('stderr') };
      } finally {
        clearTimeout(timer);
      }
    },
    async stop(graceMs = options.stopGraceMs ?? 10_000) {
      if (exitInfo) return exitInfo;
      handle.kill('SIGTERM');
      const timer = setTimeout(() => handle.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };

  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const survivor of live) survivor.kill('SIGKILL');
    });
  }
  live.add(handle);
  return handle;
}

/** Children spawned here that are still running. */
export function liveChildren(): NodeScript[] {
  return [...live];
}

/** SIGKILLs every child still running and waits until each has exited. */
export async function killAllChildren(): Promise<void> {
  const children = [...live];
  for (const child of children) child.kill('SIGKILL');
  await Promise.all(children.map((child) => child.exited));
}
