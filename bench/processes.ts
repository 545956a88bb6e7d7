/**
 * The benchmark's child processes: the custody simulator, our worker (`src/worker.ts`) and the bare
 * BullMQ worker (`bench/bare-worker.ts`). Each runs in its own process so that none shares an event
 * loop with the load generator or with another; every child is SIGKILLed if the benchmark dies.
 */
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { spawnNodeScript, type NodeScript } from '../tools/child-process.ts';
import { getFreePort } from '../tools/redis/redis-server.ts';
import { labelProcess } from './cpu.ts';
import { DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, workerBitgoEnv, workerCustodyEnv } from '../src/simulator/index.ts';
import { DEFAULT_BITGO_ACCESS_TOKEN } from '../src/simulator/bitgo/index.ts';
import type { BenchProvider } from './provider.ts';

const SIMULATOR_SCRIPT = fileURLToPath(new URL('../src/simulator/main.ts', import.meta.url));
const WORKER_SCRIPT = fileURLToPath(new URL('../src/worker.ts', import.meta.url));
const BARE_SCRIPT = fileURLToPath(new URL('./bare-worker.ts', import.meta.url));

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export type NodeChild = NodeScript;

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

/** A benchmark process: its output kept short (the run lasts minutes), named in the CPU accounting. */
function spawnChild(options: ChildOptions): NodeChild {
  const execArgv: string[] = [];
  if (options.cpuProfDir) {
    mkdirSync(options.cpuProfDir, { recursive: true });
    execArgv.push('--cpu-prof', '--cpu-prof-dir', options.cpuProfDir, '--cpu-prof-name', `${options.name}.${Date.now()}.cpuprofile`);
  }
  const child = spawnNodeScript(options.script, {
    name: options.name,
    env: options.env,
    execArgv,
    echo: options.echo ?? false,
    maxOutputChars: 256 * 1024,
    waitTimeoutMs: 20_000,
    stopGraceMs: 15_000,
  });
  labelProcess(child.pid, options.role ?? options.name);
  return child;
}

/** The wallet-service simulator as a child: its origin and the client credentials it accepts. */
export interface WalletServiceSimulatorChild {
  provider: 'wallet-service';
  url: string;
  clientId: string;
  clientSecret: string;
  process: NodeChild;
}

/** The BitGo simulator as a child: its origin and the bearer token it accepts. */
export interface BitgoSimulatorChild {
  provider: 'bitgo';
  url: string;
  accessToken: string;
  process: NodeChild;
}

export type SimulatorChild = WalletServiceSimulatorChild | BitgoSimulatorChild;

/** `node src/simulator/main.ts` (the wallet-service simulator) on a free port; `env` holds its SIM_* settings. */
export async function startSimulatorProcess(
  env: Record<string, string>,
  options: { cpuProfDir?: string | undefined; echo?: boolean } = {},
): Promise<WalletServiceSimulatorChild> {
  const child = spawnChild({
    name: 'simulator',
    role: 'simulator',
    script: SIMULATOR_SCRIPT,
    env: { SIMULATOR_PORT: '0', ...env },
    ...options,
  });
  const line = await child.waitForLog('custody simulator listening');
  const { url } = JSON.parse(line) as { url: string };
  return { provider: 'wallet-service', url, clientId: DEFAULT_CLIENT_ID, clientSecret: DEFAULT_CLIENT_SECRET, process: child };
}

/**
 * The simulator of `provider` on a free port: the wallet-service one (startSimulatorProcess), or
 * `node src/simulator/main.ts` with SIMULATOR_PROVIDER=bitgo and its default access token. `env` holds
 * its SIM_* settings (SIM_TXID_AFTER applies to both).
 */
export async function startProviderSimulator(
  provider: BenchProvider,
  env: Record<string, string>,
  options: { cpuProfDir?: string | undefined; echo?: boolean } = {},
): Promise<SimulatorChild> {
  if (provider === 'wallet-service') return startSimulatorProcess(env, options);
  const child = spawnChild({
    name: 'simulator',
    role: 'simulator',
    script: SIMULATOR_SCRIPT,
    // No approval wait unless `env` asks for one (SIM_APPROVAL_AFTER): a send answers 200, signed.
    env: {
      SIMULATOR_PORT: '0',
      SIMULATOR_PROVIDER: 'bitgo',
      SIM_BITGO_ACCESS_TOKEN: DEFAULT_BITGO_ACCESS_TOKEN,
      SIM_APPROVAL_AFTER: '0ms',
      ...env,
    },
    ...options,
  });
  const line = await child.waitForLog('custody simulator listening');
  const { url, provider: played } = JSON.parse(line) as { url: string; provider?: string };
  if (played !== 'bitgo') {
    await child.stop(1_000);
    throw new Error(`the simulator plays ${played ?? 'wallet-service'}, not bitgo`);
  }
  return { provider: 'bitgo', url, accessToken: DEFAULT_BITGO_ACCESS_TOKEN, process: child };
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
  /** The HTTP port (default: a free one). */
  httpPort?: number;
}

/** `node src/worker.ts` (the real composition root), ready once `/readyz` answers 200. */
export async function startOurWorker(options: WorkerChildOptions): Promise<NodeChild> {
  const port = options.httpPort ?? (await getFreePort());
  const child = spawnChild({
    name: options.name,
    role: 'ours',
    script: options.script ?? WORKER_SCRIPT,
    cpuProfDir: options.cpuProfDir,
    echo: options.echo ?? false,
    env: {
      REDIS_URL: options.redisUrl,
      QUEUE_PREFIX: options.prefix,
      ...(options.sim.provider === 'bitgo' ? workerBitgoEnv(options.sim) : workerCustodyEnv(options.sim)),
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(port),
      LOG_LEVEL: 'warn',
      RECONCILE_EVERY: '1h',
      // The bench's own Redis keeps nothing on disk (as its figures always assumed) and a simulator
      // moves no money: the start-up persistence check must let the worker run on it.
      REDIS_ALLOW_VOLATILE: '1',
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
    if (!child.running) throw new Error(`${options.name} exited before it was ready:\n${child.tail()}`);
    await sleep(100);
  }
}

export interface BareWorkerOptions {
  name: string;
  /** Label in the CPU accounting (default `bare`). */
  role?: string;
  mode: 'submit' | 'submit-same-work' | 'track';
  redisUrl: string;
  prefix: string;
  stream: string;
  sim: SimulatorChild;
  concurrency: number;
  connections: number;
  trackDelayMs?: number;
  /** A BullMQ limiter of one job per 1000/limitRps ms (default: none). */
  limitRps?: number;
  cpuProfDir?: string | undefined;
  echo?: boolean;
}

/** `node bench/bare-worker.ts`: the baseline, see that file. */
export async function startBareWorker(options: BareWorkerOptions): Promise<NodeChild> {
  const child = spawnChild({
    name: options.name,
    role: options.role ?? 'bare',
    script: BARE_SCRIPT,
    cpuProfDir: options.cpuProfDir,
    echo: options.echo ?? false,
    env: {
      BARE_MODE: options.mode,
      BARE_REDIS_URL: options.redisUrl,
      BARE_PREFIX: options.prefix,
      BARE_STREAM: options.stream,
      BARE_SIM_URL: options.sim.url,
      ...(options.sim.provider === 'bitgo'
        ? { BARE_PROVIDER: 'bitgo', BARE_ACCESS_TOKEN: options.sim.accessToken }
        : { BARE_PROVIDER: 'wallet-service', BARE_CLIENT_ID: options.sim.clientId, BARE_CLIENT_SECRET: options.sim.clientSecret }),
      BARE_CONCURRENCY: String(options.concurrency),
      BARE_CONNECTIONS: String(options.connections),
      BARE_TRACK_DELAY_MS: String(options.trackDelayMs ?? 10),
      BARE_LIMIT_RPS: String(options.limitRps ?? 0),
    },
  });
  await child.waitForLog('bare worker ready');
  return child;
}
