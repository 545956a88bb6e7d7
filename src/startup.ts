import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Config } from './config/config.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './metrics.ts';
import { createRedis } from './redis.ts';

/** Between two attempts to reach Redis at start-up (one log line each). */
export const REDIS_CONNECT_RETRY_MS = 2_000;
/** One attempt: connect and PING, at most this long. */
const REDIS_PROBE_TIMEOUT_MS = 3_000;

/**
 * The HTTP server while the worker starts: `/healthz` 200 (the process is alive), `/readyz` 503 and
 * `/metrics` with `custody_worker_ready 0` and the process metrics, so probes and scrapes get an answer
 * while Redis is not reachable yet. Replaced by the full server (same port) once the worker runs.
 */
export function createStartingServer(metrics: Metrics): FastifyInstance {
  const server = Fastify({ logController: new LogController({ disableRequestLogging: true }) });
  server.get('/healthz', async () => ({ status: 'ok' }));
  server.get('/readyz', async (_request, reply) => reply.code(503).send({ status: 'starting', redis: false, workers: false }));
  server.get('/metrics', async (_request, reply) => {
    metrics.ready.set(0);
    return reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  return server;
}

/** Why the HTTP server could not listen, in an operator's words (undefined: not a listen failure we know). */
export function listenFailure(error: unknown, host: string, port: number): string | undefined {
  const code = (error as { code?: string } | null)?.code;
  if (code === 'EADDRINUSE') return `HTTP port ${port} on ${host} is already in use (HTTP_PORT, HTTP_HOST)`;
  if (code === 'EACCES') return `not allowed to listen on port ${port} (HTTP_PORT)`;
  if (code === 'EADDRNOTAVAIL') return `HTTP_HOST ${host} is not an address of this machine`;
  return undefined;
}

/** One connection attempt and PING; the error's message when it failed. */
async function probeRedis(redis: Config['redis']): Promise<string | undefined> {
  const client = createRedis(redis, 'custody-worker-probe', {
    maxRetriesPerRequest: 0,
    connectTimeout: REDIS_PROBE_TIMEOUT_MS,
    retryStrategy: () => null,
  });
  // Reported once per attempt by the caller, never as an unhandled 'error' event. The connection's own
  // error says why (ECONNREFUSED, ENOTFOUND, NOAUTH …); the PING's only says the connection closed.
  let cause: string | undefined;
  client.on('error', (error: Error) => {
    cause ??= error.message;
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer to PING within ${REDIS_PROBE_TIMEOUT_MS} ms`)), REDIS_PROBE_TIMEOUT_MS);
      }),
    ]);
    return undefined;
  } catch (error) {
    return (cause ?? (error as Error).message).slice(0, 200);
  } finally {
    clearTimeout(timer);
    client.disconnect();
  }
}

/**
 * Waits until Redis answers, logging one line per attempt. Resolves true when it did; false once
 * REDIS_CONNECT_TIMEOUT passed without an answer (0: never gives up).
 */
export async function waitForRedis(redis: Config['redis'], logger: Logger): Promise<boolean> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const error = await probeRedis(redis);
    if (error === undefined) {
      if (attempt > 1) logger.info({ attempts: attempt }, 'Redis reachable');
      return true;
    }
    const waitedMs = Date.now() - started;
    if (redis.connectTimeoutMs > 0 && waitedMs + REDIS_CONNECT_RETRY_MS > redis.connectTimeoutMs) {
      logger.fatal(
        { attempts: attempt, waitedMs, error },
        `Redis unreachable for REDIS_CONNECT_TIMEOUT (${redis.connectTimeoutMs} ms): exiting`,
      );
      return false;
    }
    logger.warn({ attempt, waitedMs, error }, 'waiting for Redis');
    await sleep(REDIS_CONNECT_RETRY_MS);
  }
}

/** `task`, given at most `ms`; its failure or slowness is logged, never thrown (used on the way out). */
export async function bounded(what: string, task: () => Promise<unknown>, ms: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(resolve, ms, 'timeout');
  });
  try {
    const outcome = await Promise.race([task().then(() => 'done' as const), timeout]);
    if (outcome === 'timeout') logger.warn({ timeoutMs: ms }, `${what} did not finish in time, going on`);
  } catch (err) {
    logger.warn({ err }, `${what} failed, going on`);
  } finally {
    clearTimeout(timer);
  }
}
