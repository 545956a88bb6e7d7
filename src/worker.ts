import { createApp } from './app.ts';
import { loadConfigOrExit } from './config/config.ts';
import { createHttpServer } from './http/server.ts';
import { createLogger } from './logger.ts';
import { createMetrics } from './metrics.ts';
import { startTracing } from './telemetry.ts';

// Composition root: config → logger → app (clients, processors, workers) → HTTP → signals. Nothing else.
const config = loadConfigOrExit();
const logger = createLogger({ level: config.log.level });
const metrics = createMetrics();
const tracing = await startTracing(config, logger);

const app = await createApp(config, logger, metrics, tracing);
const http = await createHttpServer({ app, config, logger, metrics });
const address = await http.listen({ host: config.http.host, port: config.http.port });
logger.info(
  { queues: Object.keys(app.queues), submitConcurrency: config.submit.concurrency, prefix: config.queue.prefix, http: address },
  'worker started',
);

let stopping = false;
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
    await app.close();
    await http.close();
    await tracing?.shutdown();
    logger.info('stopped');
    process.exit(0);
  } catch (err) {
    logger.error({ err }, 'error while stopping');
    process.exit(1);
  }
}

process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
