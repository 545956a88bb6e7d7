/**
 * A Redis for the tests, the demo and the benchmark, never a shared one:
 *   1. `REDIS_URL` when given (used as is: callers keep to their own key prefix and never flush);
 *   2. testcontainers `redis:7` when a container runtime answers (gives up after a few seconds);
 *   3. a private `redis-server` from PATH on a free loopback port, with its own temp dir.
 *
 * The testcontainers attempt runs in a child process (testcontainers-redis.ts): a Docker client can
 * hang on a dead endpoint and keep sockets open that would stop the caller from exiting.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startRedisServer, type StartRedisServerOptions } from './redis-server.ts';

const CONTAINER_TIMEOUT_MS = 5_000;

export type RedisSource = 'env' | 'testcontainers' | 'redis-server';

export interface PrivateRedis {
  url: string;
  source: RedisSource;
  /** How it was obtained, for a log line (no password). */
  note: string;
  stop(): Promise<void>;
}

export interface PrivateRedisOptions {
  /** An explicit Redis to use instead of starting one (usually `process.env.REDIS_URL`). */
  url?: string | undefined;
  /** Skip the testcontainers attempt. */
  noContainers?: boolean;
  /** Options for the private redis-server (step 3). */
  server?: StartRedisServerOptions;
}

type ChildMsg = { type: 'ready'; url: string } | { type: 'error'; message: string };

/** Try testcontainers in a child process with a hard time limit. */
async function tryTestcontainers(): Promise<{ url: string; stop: () => Promise<void> } | { error: string }> {
  const script = fileURLToPath(new URL('./testcontainers-redis.ts', import.meta.url));
  const child = fork(script, [], {
    execArgv: [],
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    env: { ...process.env, TESTCONTAINERS_RYUK_DISABLED: process.env.TESTCONTAINERS_RYUK_DISABLED ?? 'true' },
  });
  let timer: NodeJS.Timeout | undefined;
  const outcome = await new Promise<ChildMsg | { type: 'timeout' } | { type: 'exit'; detail: string }>((resolve) => {
    timer = setTimeout(() => resolve({ type: 'timeout' }), CONTAINER_TIMEOUT_MS);
    child.once('message', (msg: ChildMsg) => resolve(msg));
    child.once('error', (err) => resolve({ type: 'exit', detail: err.message }));
    child.once('exit', (code, signal) => resolve({ type: 'exit', detail: `exited (code ${code}, signal ${signal})` }));
  });
  clearTimeout(timer);

  if (outcome.type === 'ready') {
    return {
      url: outcome.url,
      stop: async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        child.send({ type: 'stop' });
        const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(killer);
      },
    };
  }
  // Give up on the child: it cleans up after itself (and exits within 60 s at worst).
  if (child.connected) child.disconnect();
  child.unref();
  if (outcome.type === 'timeout') return { error: `no container within ${CONTAINER_TIMEOUT_MS} ms` };
  if (outcome.type === 'error') return { error: outcome.message };
  return { error: `testcontainers helper ${outcome.detail}` };
}

export async function acquireRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  if (options.url) return { url: options.url, source: 'env', note: 'REDIS_URL', stop: async () => {} };
  const tc = options.noContainers ? { error: 'skipped' } : await tryTestcontainers();
  if ('url' in tc) return { url: tc.url, source: 'testcontainers', note: 'testcontainers redis:7.0', stop: tc.stop };
  const server = await startRedisServer(options.server);
  return {
    url: server.url,
    source: 'redis-server',
    note: `private redis-server pid ${server.pid}, dir ${server.dir} (testcontainers: ${tc.error})`,
    stop: () => server.stop(),
  };
}

/** The URL with its password masked, for printing. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
