import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { createApp, type App } from './app.ts';
import { EX_CONFIG, EX_SOFTWARE, EX_UNAVAILABLE, loadConfigOrExit } from './config/config.ts';
import { createHttpServer } from './http/server.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { bounded, checkRedisSettings, createStartingServer, listenFailure, waitForRedis } from './startup.ts';
import { startTracing, type Tracing } from './telemetry.ts';

/** How long the OpenTelemetry exporter may take to flush on the way out (an unreachable collector must not hold the exit). */
const TRACING_SHUTDOWN_MS = 2_000;

// Composition root: config → logger → HTTP (starting) → Redis → app (clients, processors, workers) →
// HTTP (full, same port) → signals. Nothing else. Every way start-up can fail is one JSON log line and
// an exit code (docs/operations.md, "Start-up and shutdown"): 78 configuration (also a Redis that keeps nothing on disk), 69
// Redis unreachable or HTTP port taken, 70 anything else.
const config = loadConfigOrExit();
// With tracing on, every line logged inside a span carries its trace_id and span_id.
let logIds: (() => object | undefined) | undefined;
const logger = createLogger({ level: config.log.level, mixin: () => logIds?.() ?? {} });
const metrics = createMetrics();

let tracing: Tracing | undefined;
let app: App | undefined;
let http: FastifyInstance | undefined;
let stopping = false;

async function listen(server: FastifyInstance, port: number): Promise<string> {
  try {
    return await server.listen({ host: config.http.host, port });
  } catch (error) {
    const why = listenFailure(error, config.http.host, port);
    if (why === undefined) throw error;
    logger.fatal({ code: (error as { code?: string }).code, port, host: config.http.host }, why);
    process.exit(EX_UNAVAILABLE);
  }
}

async function start(): Promise<void> {
  // HTTP first: /healthz answers while Redis is being waited for, /readyz says 503.
  const starting = createStartingServer(metrics);
  http = starting;
  const startingAddress = await listen(starting, config.http.port);
  logger.info({ http: startingAddress }, 'http listening, starting');
  if (!(await waitForRedis(config.redis, logger))) process.exit(EX_UNAVAILABLE);
  // A primary without AOF forgets, after a restart, what was sent; one that evicts drops tombstones.
  const settings = await checkRedisSettings(config.redis, logger);
  if (settings.persistence === 'refused' || settings.eviction === 'refused') process.exit(EX_CONFIG);
  if (stopping) return;

  tracing = await startTracing(config, logger);
  if (tracing) logIds = tracing.logIds;
  app = await createApp(config, logger, metrics, tracing);
  // The full server takes over the port the starting one got (HTTP_PORT=0 picks one once).
  const port = (starting.server.address() as AddressInfo).port;
  const full = await createHttpServer({ app, config, logger, metrics });
  await starting.close();
  http = full;
  const address = await listen(full, port);
  logger.info(
    { queues: Object.keys(app.queues), submitConcurrency: config.submit.concurrency, prefix: config.queue.prefix, http: address },
    'worker started',
  );
}

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down, draining in-flight jobs');
  const timer = setTimeout(() => {
    // In-flight jobs that did not finish are recovered by another worker as stalled jobs: safe to leave.
    logger.error({ timeoutMs: config.shutdownTimeoutMs }, 'drain took too long, exiting');
    process.exit(1);
  }, config.shutdownTimeoutMs);
  timer.unref();
  try {
    // Workers first (readiness turns 503 at once), the HTTP server last so probes see the drain.
    await app?.close();
    await http?.close();
    // An unreachable collector neither holds the exit nor changes its code.
    if (tracing) await bounded('flushing traces', () => tracing!.shutdown(), TRACING_SHUTDOWN_MS, logger);
    logger.info('stopped');
    process.exit(0);
  } catch (err) {
    logger.error({ err }, 'error while stopping');
    process.exit(1);
  }
}

process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

try {
  await start();
} catch (err) {
  logger.fatal({ err }, 'start-up failed');
  process.exit(EX_SOFTWARE);
}
