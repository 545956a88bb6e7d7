/**
 * The benchmark's child processes: the custody simulator, our worker (`src/worker.ts`) and the bare
 * BullMQ worker (`bench/bare-worker.ts`). Each runs in its own process so that none shares an event
 * loop with the load generator or with another; every child is SIGKILLed if the benchmark dies.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { getFreePort } from '../src/dev/redis-server.ts';
import { labelProcess } from './cpu.ts';
import { DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, workerCustodyEnv } from '../src/simulator/index.ts';

export const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));
const SIMULATOR_SCRIPT = fileURLToPath(new URL('../src/simulator/main.ts', import.meta.url));
const WORKER_SCRIPT = fileURLToPath(new URL('../src/worker.ts', import.meta.url));
const BARE_SCRIPT = fileURLToPath(new URL('./bare-worker.ts', import.meta.url));

/** Variables of the benchmark's own environment never passed on: each child's env says them explicitly. */
const STRIPPED = [/^REDIS_/, /^CUSTODY_/, /^QUEUE_PREFIX$/, /^EVENTS_/, /^NODE_OPTIONS$/, /^SIM_/, /^SIMULATOR_/, /^BENCH_/, /^BARE_/, /^OTEL_/];

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface ChildOptions {
  name: string;
  /** Label in the CPU accounting (default: the name). */
  role?: string;
  script: string;
  env: Record<string, string>;
  /** Write a V8 CPU profile into this directory when the child exits. */
  cpuProfDir?: string | undefined;
  echo?: boolean;
}

export interface NodeChild {
  readonly name: string;
  readonly pid: number;
  /** Resolves with the first line (past or future) containing `text`; rejects on time-out or exit. */
  waitForLine(text: string, timeoutMs?: number): Promise<string>;
  /** The last lines of output, for error messages. */
  tail(): string;
  /** Whether the child has exited. */
  readonly exited: boolean;
  /** SIGTERM, SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

export function spawnNode(options: ChildOptions): NodeChild {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !STRIPPED.some((pattern) => pattern.test(key))) env[key] = value;
  }
  Object.assign(env, options.env);
  const execArgv: string[] = [];
  if (options.cpuProfDir) {
    mkdirSync(options.cpuProfDir, { recursive: true });
    execArgv.push('--cpu-prof', '--cpu-prof-dir', options.cpuProfDir, '--cpu-prof-name', `${options.name}.${Date.now()}.cpuprofile`);
  }
  const child = spawn(process.execPath, [...execArgv, options.script], { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`${options.name}: could not spawn ${options.script}`);
  live.add(child);
  const pid = child.pid;
  labelProcess(pid, options.role ?? options.name);

  let output = '';
  const lines: string[] = [];
  const waiters = new Set<{ text: string; resolve: (line: string) => void }>();
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.once('close', (code) => {
      live.delete(child);
      exitCode = code;
      resolve(code);
    });
  });
  const onData = (chunk: Buffer) => {
    output += chunk.toString('utf8');
    const parts = output.split('\n');
    output = parts.pop() ?? '';
    for (const line of parts) {
      if (options.echo) process.stderr.write(`[${options.name}] ${line}\n`);
      lines.push(line);
      if (lines.length > 200) lines.shift();
      for (const waiter of waiters) {
        if (line.includes(waiter.text)) {
          waiters.delete(waiter);
          waiter.resolve(line);
        }
      }
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const tail = () => [...lines.slice(-20), output].join('\n').trim();

  return {
    name: options.name,
    pid,
    tail,
    get exited() {
      return exitCode !== undefined;
    },
    waitForLine(text, timeoutMs = 20_000) {
      const past = lines.find((line) => line.includes(text));
      if (past !== undefined) return Promise.resolve(past);
      return new Promise<string>((resolve, reject) => {
        const waiter = { text, resolve: (line: string) => finish(() => resolve(line)) };
        const timer = setTimeout(() => finish(() => reject(new Error(`${options.name} did not print "${text}" within ${timeoutMs} ms:\n${tail()}`))), timeoutMs);
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(waiter);
          settle();
        };
        waiters.add(waiter);
        void exited.then((code) => finish(() => reject(new Error(`${options.name} exited (code ${code}) before printing "${text}":\n${tail()}`))));
      });
    },
    async stop(graceMs = 15_000) {
      if (exitCode !== undefined) return exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export interface SimulatorChild {
  url: string;
  clientId: string;
  clientSecret: string;
  process: NodeChild;
}

/** `node src/simulator/main.ts` on a free port; `env` holds its SIM_* settings. */
export async function startSimulatorProcess(env: Record<string, string>, options: { cpuProfDir?: string | undefined; echo?: boolean } = {}): Promise<SimulatorChild> {
  const child = spawnNode({ name: 'simulator', role: 'simulator', script: SIMULATOR_SCRIPT, env: { SIMULATOR_PORT: '0', ...env }, ...options });
  const line = await child.waitForLine('custody simulator listening');
  const { url } = JSON.parse(line) as { url: string };
  return { url, clientId: DEFAULT_CLIENT_ID, clientSecret: DEFAULT_CLIENT_SECRET, process: child };
}

export interface WorkerChildOptions {
  name: string;
  /** Another worker entry than src/worker.ts (a changed copy to compare). */
  script?: string | undefined;
  redisUrl: string;
  prefix: string;
  sim: SimulatorChild;
  env: Record<string, string>;
  cpuProfDir?: string | undefined;
  echo?: boolean;
}

/** `node src/worker.ts` (the real composition root), ready once `/readyz` answers 200. */
export async function startOurWorker(options: WorkerChildOptions): Promise<NodeChild> {
  const port = await getFreePort();
  const child = spawnNode({
    name: options.name,
    role: 'ours',
    script: options.script ?? WORKER_SCRIPT,
    cpuProfDir: options.cpuProfDir,
    echo: options.echo ?? false,
    env: {
      REDIS_URL: options.redisUrl,
      QUEUE_PREFIX: options.prefix,
      ...workerCustodyEnv(options.sim),
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(port),
      LOG_LEVEL: 'warn',
      RECONCILE_EVERY: '1h',
      ...options.env,
    },
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) return child;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await child.stop(1_000);
      throw new Error(`${options.name} not ready within 30 s:\n${child.tail()}`);
    }
    if (child.exited) throw new Error(`${options.name} exited before it was ready:\n${child.tail()}`);
    await sleep(100);
  }
}

export interface BareWorkerOptions {
  name: string;
  mode: 'submit' | 'track';
  redisUrl: string;
  prefix: string;
  stream: string;
  sim: SimulatorChild;
  concurrency: number;
  connections: number;
  trackDelayMs?: number;
  cpuProfDir?: string | undefined;
  echo?: boolean;
}

/** `node bench/bare-worker.ts`: the baseline, see that file. */
export async function startBareWorker(options: BareWorkerOptions): Promise<NodeChild> {
  const child = spawnNode({
    name: options.name,
    role: 'bare',
    script: BARE_SCRIPT,
    cpuProfDir: options.cpuProfDir,
    echo: options.echo ?? false,
    env: {
      BARE_MODE: options.mode,
      BARE_REDIS_URL: options.redisUrl,
      BARE_PREFIX: options.prefix,
      BARE_STREAM: options.stream,
      BARE_SIM_URL: options.sim.url,
      BARE_CLIENT_ID: options.sim.clientId,
      BARE_CLIENT_SECRET: options.sim.clientSecret,
      BARE_CONCURRENCY: String(options.concurrency),
      BARE_CONNECTIONS: String(options.connections),
      BARE_TRACK_DELAY_MS: String(options.trackDelayMs ?? 10),
    },
  });
  await child.waitForLine('bare worker ready');
  return child;
}
