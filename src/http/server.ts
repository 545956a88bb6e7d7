import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { App } from '../app.ts';
import type { Config } from '../config/config.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { transferView } from '../ledger/transfer-view.ts';
import { refreshScrapeGauges } from '../metrics-scrape.ts';
import { requireBasicAuth } from './auth.ts';
import { registerDashboard } from './dashboard.ts';

export { DASHBOARD_PATH } from './dashboard.ts';

/** /readyz answers 503 when Redis does not answer PING within this. */
const READY_PING_TIMEOUT_MS = 1_000;

export interface HttpDeps {
  app: App;
  config: Pick<Config, 'http'>;
  logger: Logger;
  metrics: Metrics;
}

/**
 * The operator surface (docs/contract.md section 5): health, readiness, Prometheus metrics, transfer lookup
 * and Bull Board. Built here, listened on by the caller.
 */
export async function createHttpServer({ app, config, logger, metrics }: HttpDeps): Promise<FastifyInstance> {
  const server: FastifyInstance = Fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // sequenceIds are up to 128 characters: longer ones must reach the handler to get a 400, not a 404.
    routerOptions: { maxParamLength: 1024 },
  });

  const { dashboardUser, dashboardPassword } = config.http;
  if (dashboardUser && dashboardPassword) requireBasicAuth(server, { user: dashboardUser, password: dashboardPassword });

  server.get('/healthz', async () => ({ status: 'ok' }));

  server.get('/readyz', async (_request, reply) => {
    const redisOk = await Promise.race([
      app.redis.ping().then(() => true, () => false),
      new Promise<boolean>((resolve) => setTimeout(resolve, READY_PING_TIMEOUT_MS, false).unref()),
    ]);
    const workersOk = app.running();
    const ready = redisOk && workersOk;
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', redis: redisOk, workers: workersOk });
  });

  server.get('/metrics', async (_request, reply) => {
    await refreshScrapeGauges(app, metrics).catch((err) => logger.warn({ err }, 'queue counts unavailable for metrics'));
    return reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  server.get<{ Params: { sequenceId: string } }>('/transfers/:sequenceId', async (request, reply) => {
    const { sequenceId } = request.params;
    if (!SEQUENCE_ID.test(sequenceId)) {
      return reply.code(400).send({ error: 'INVALID_SEQUENCE_ID', message: 'sequenceId must be 1-128 of A-Z a-z 0-9 _ -' });
    }
    const view = await transferView(app.ledger, sequenceId);
    if (!view) return reply.code(404).send({ error: 'NOT_FOUND', message: 'unknown transfer' });
    return view;
  });

  await registerDashboard(server, app, config.http.dashboardReadOnly);
  return server;
}
