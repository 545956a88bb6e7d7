import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { App } from '../app.ts';
import type { Config } from '../config/config.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { QueueName } from '../queues/names.ts';
import { transferView } from '../ledger/transfer-view.ts';
import { refreshScrapeGauges } from '../metrics-scrape.ts';

export const DASHBOARD_PATH = '/dashboard';
/** /readyz answers 503 when Redis does not answer PING within this. */
const READY_PING_TIMEOUT_MS = 1_000;

export interface HttpDeps {
  app: App;
  config: Pick<Config, 'http'>;
  logger: Logger;
  metrics: Metrics;
}

/**
 * The operator surface (CONTRACT section 5): health, readiness, Prometheus metrics, transfer lookup
 * and Bull Board. Built here, listened on by the caller.
 */
export async function createHttpServer({ app, config, logger, metrics }: HttpDeps): Promise<FastifyInstance> {
  const server: FastifyInstance = Fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // sequenceIds are up to 128 characters: longer ones must reach the handler to get a 400, not a 404.
    routerOptions: { maxParamLength: 1024 },
  });

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

  await registerDashboard(server, app, config.http);
  return server;
}

/**
 * Bull Board over every queue. Basic auth whenever credentials are configured (the config refuses a
 * non-loopback HTTP_HOST without them). The submit queue is read-only unless DASHBOARD_READ_ONLY=false;
 * job data and return values are shown without any `user` object.
 */
async function registerDashboard(server: FastifyInstance, app: App, http: Config['http']): Promise<void> {
  const adapter = new FastifyAdapter();
  adapter.setBasePath(DASHBOARD_PATH);
  const queues = Object.entries(app.queues).map(([name, queue]) => {
    const board = new BullMQAdapter(queue, {
      readOnlyMode: name === QueueName.SUBMIT ? http.dashboardReadOnly : false,
      allowRetries: true,
      displayName: name,
    });
    board.setFormatter('data', withoutUser);
    board.setFormatter('returnValue', withoutUser);
    return board;
  });
  createBullBoard({ queues, serverAdapter: adapter, options: { uiConfig: { boardTitle: 'custody worker' } } });

  await server.register(async (scope) => {
    if (http.dashboardUser && http.dashboardPassword) {
      const expected = Buffer.from(`Basic ${Buffer.from(`${http.dashboardUser}:${http.dashboardPassword}`).toString('base64')}`);
      scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
        const given = Buffer.from(request.headers.authorization ?? '');
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
          return reply.code(401).header('www-authenticate', 'Basic realm="custody-worker dashboard"').send({ error: 'UNAUTHORIZED' });
        }
      });
    }
    await scope.register(adapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  });
}

/** Deep copy without any `user` key (the person inside a submitted record's `raw`). */
function withoutUser(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutUser);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'user').map(([key, inner]) => [key, withoutUser(inner)]));
  }
  return value;
}
