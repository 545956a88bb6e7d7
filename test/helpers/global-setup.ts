/**
 * Vitest global setup: pick ONE Redis for the whole run and provide its URL as `redisUrl`.
 *
 * Order:
 *   1. REDIS_URL from the environment (explicit opt-in, used as is, never flushed);
 *   2. testcontainers `redis:7` (needs a container runtime; gives up after 5 s);
 *   3. a private `redis-server` on a free loopback port (startRedisServer).
 *
 * Set TEST_REDIS_NO_CONTAINERS=1 to skip step 2. The testcontainers attempt runs in a
 * child process (testcontainers-redis.ts) so a hanging Docker client can't stall vitest.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import './provided-context.ts';
import { startRedisServer } from './redis-server.ts';

const CONTAINER_TIMEOUT_MS = 5_000;

type Source = 'env' | 'testcontainers' | 'redis-server';

type ChildMsg = { type: 'ready'; url: string } | { type: 'error'; message: string };

/**
 * Try testcontainers in a child process (see testcontainers-redis.ts) with a hard
 * time limit; a hanging Docker client there can't keep this process alive.
 */
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

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let url: string;
  let source: Source;
  let stop: () => Promise<void> = async () => {};
  let note = '';

  const envUrl = process.env.REDIS_URL;
  if (envUrl) {
    url = envUrl;
    source = 'env';
  } else {
    const tc = process.env.TEST_REDIS_NO_CONTAINERS ? { error: 'skipped (TEST_REDIS_NO_CONTAINERS)' } : await tryTestcontainers();
    if ('url' in tc) {
      url = tc.url;
      source = 'testcontainers';
      stop = tc.stop;
    } else {
      const server = await startRedisServer();
      url = server.url;
      source = 'redis-server';
      stop = () => server.stop();
      note = ` (pid ${server.pid}, dir ${server.dir}; testcontainers: ${tc.error})`;
    }
  }

  project.provide('redisUrl', url);
  project.provide('redisSource', source);
  console.log(`[global-setup] Redis for tests: ${redactUrl(url)} via ${source}${note}`);

  return async () => {
    await stop();
  };
}

function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
