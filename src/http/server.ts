import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { App } from '../app.ts';
import type { Config } from '../config/config.ts';
import { NotReplicatedError } from '../../packages/producer/src/errors.ts';
import { CANCEL_BY_MAX, CANCEL_TEXT_RULE, isCancelReason } from '../../packages/producer/src/events.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { createKeys } from '../ledger/keys.ts';
import { transferView } from '../ledger/transfer-view.ts';
import { AuditLog, type Actor } from '../operations/audit.ts';
import { Operations } from '../operations/operations.ts';
import { refreshScrapeGauges } from '../metrics-scrape.ts';
import { requireBasicAuth } from './auth.ts';
import { boundedCopyWithoutUser } from './bounded-copy.ts';
import { registerDashboard } from './dashboard.ts';
import { redactMetadata } from './job-view.ts';
import { READY_CHECK_TIMEOUT_MS, sendDeadlineMs, sendLeaseMs } from '../timing.ts';

export { DASHBOARD_PATH } from './dashboard.ts';

/**
 * How long /metrics waits for its Redis reads, and /transfers/:id for the ledger: the contract says
 * /metrics answers within 2 s whatever Redis does; 1.5 s leaves half a second for the rest.
 */
const SCRAPE_REDIS_BUDGET_MS = 1_500;

export interface HttpDeps {
  app: App;
  config: Pick<Config, 'http' | 'redis' | 'queue' | 'audit' | 'custody'>;
  logger: Logger;
  metrics: Metrics;
}

/**
 * The operator surface (docs/contract.md section 5): health, readiness, Prometheus metrics, transfer lookup,
 * cancel before send and Bull Board. Built here, listened on by the caller.
 */
export async function createHttpServer({ app, config, logger, metrics }: HttpDeps): Promise<FastifyInstance> {
  const server: FastifyInstance = Fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // sequenceIds are up to 128 characters: longer ones must reach the handler to get a 400, not a 404.
    routerOptions: { maxParamLength: 1024 },
  });

  const { dashboardUser, dashboardPassword, dashboardMetadataKeys: metadataKeys } = config.http;
  if (dashboardUser && dashboardPassword) requireBasicAuth(server, { user: dashboardUser, password: dashboardPassword });

  server.get('/healthz', async () => ({ status: 'ok' }));

  /*
   * Ready: Redis answers PING, takes a write, and every worker runs. The write is a probe (one small key
   * that expires, redis-errors.ts) rather than a judgement on the workers' recent errors: a Redis out of
   * memory (or read-only, or refusing writes after a failed RDB save, or short of replicas) still answers
   * PING and reads, and a worker with nothing due writes nothing, so only a write shows it, at once, and
   * shows as soon as writes are taken again. `reason` names what failed.
   */
  server.get('/readyz', async (_request, reply) => {
    const [redisOk, probe] = await Promise.all([
      Promise.race([
        app.redis.ping().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => setTimeout(resolve, READY_CHECK_TIMEOUT_MS, false).unref()),
      ]),
      app.redisErrors.probeWrites(READY_CHECK_TIMEOUT_MS),
    ]);
    const workersOk = app.running();
    // A refusal first: with MISCONF, Redis refuses PING as well.
    const reason =
      !probe.accepted && probe.refused
        ? `redis refuses writes: ${probe.code}`
        : !redisOk
          ? 'redis does not answer'
          : !probe.accepted
            ? `redis write probe failed: ${probe.code}`
            : !workersOk
              ? 'workers not running'
              : undefined;
    const ready = reason === undefined;
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not ready',
      redis: redisOk,
      writes: probe.accepted,
      workers: workersOk,
      ...(reason ? { reason } : {}),
    });
  });

  // One refresh of the Redis-read gauges at a time: while Redis hangs, scrapes do not pile commands up
  // behind the one in flight, and each scrape waits for it at most SCRAPE_REDIS_BUDGET_MS.
  let refreshing: Promise<void> | undefined;
  server.get('/metrics', async (_request, reply) => {
    refreshing ??= refreshScrapeGauges(app, metrics)
      .catch((err) => logger.warn({ err }, 'queue counts unavailable for metrics'))
      .finally(() => {
        refreshing = undefined;
      });
    if ((await withinBudget(refreshing, SCRAPE_REDIS_BUDGET_MS)) === TIMED_OUT) {
      // Redis did not answer in time: the process metrics still go out, with readiness 0 and the
      // Redis-read gauges as last read (docs/contract.md section 5).
      metrics.ready.set(0);
      logger.warn({ budgetMs: SCRAPE_REDIS_BUDGET_MS }, 'redis did not answer within the scrape budget, metrics served without it');
    }
    return reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });

  server.get<{ Params: { sequenceId: string } }>('/transfers/:sequenceId', async (request, reply) => {
    const { sequenceId } = request.params;
    if (!SEQUENCE_ID.test(sequenceId)) {
      return reply.code(400).send({ error: 'INVALID_SEQUENCE_ID', message: 'sequenceId must be 1-128 of A-Z a-z 0-9 _ -' });
    }
    const view = await withinBudget(transferView(app.ledger, sequenceId), SCRAPE_REDIS_BUDGET_MS);
    if (view === TIMED_OUT) return reply.code(503).send({ error: 'REDIS_UNAVAILABLE', message: 'Redis did not answer in time; try again' });
    if (!view) return reply.code(404).send({ error: 'NOT_FOUND', message: 'unknown transfer' });
    // Each event echoes the transfer's metadata: shown as the dashboard shows a job's (job-view.ts).
    const events = view.events.map((event) => ({
      ...event,
      metadata: boundedCopyWithoutUser(redactMetadata(event.metadata, metadataKeys)),
    }));
    return { ...view, events };
  });

  // The one route that changes anything (Bull Board stays read-only): cancel before send
  // (docs/contract.md section 4), through the operator actions (audited). Behind the dashboard's Basic
  // auth like every route but the probes and /metrics; a JSON body only (application/json: a browser
  // cannot send it cross-site without a CORS preflight, which this server never answers, so a page
  // elsewhere cannot cancel with the browser's remembered credentials).
  const operations = new Operations({
    redis: app.redis,
    ledger: app.ledger,
    audit: new AuditLog(app.redis, createKeys(config.queue.prefix, config.queue.eventsStream).audit, config.audit.retentionMs),
    queuePrefix: config.queue.prefix,
    replicas: { min: config.redis.minReplicas, timeoutMs: config.redis.replicaTimeoutMs },
    // The worker's own port: a resolve's provider check takes its slots in the worker's request budget.
    custody: {
      port: app.custody,
      leaseMs: sendLeaseMs(config.custody.timeoutMs),
      deadlineMs: sendDeadlineMs(config.custody.timeoutMs),
    },
    onAction: (action, outcome) => metrics.consoleActions.inc({ action, outcome }),
  });
  // The dashboard's one user is an operator until console users with roles exist; loopback without
  // credentials has no user (the event's `by` then says `http`, as it always did).
  const user = dashboardUser && dashboardPassword ? dashboardUser.slice(0, CANCEL_BY_MAX - 'http:'.length) : '';
  server.post<{ Params: { sequenceId: string }; Body: unknown }>('/transfers/:sequenceId/cancel', async (request, reply) => {
    const { sequenceId } = request.params;
    if (!SEQUENCE_ID.test(sequenceId)) {
      return reply.code(400).send({ error: 'INVALID_SEQUENCE_ID', message: 'sequenceId must be 1-128 of A-Z a-z 0-9 _ -' });
    }
    const body = request.body;
    const given = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { reason?: unknown }).reason : undefined;
    const reason = typeof given === 'string' ? given.trim() : given;
    if (!isCancelReason(reason)) {
      return reply.code(400).send({ error: 'INVALID_BODY', message: `a JSON object {"reason"}: the reason, ${CANCEL_TEXT_RULE}` });
    }
    const actor: Actor = { name: user, role: 'operator', via: 'api', remote: request.ip };
    let result;
    try {
      result = await operations.cancel(actor, sequenceId, reason);
    } catch (error) {
      if (!(error instanceof NotReplicatedError)) throw error;
      // Decided on the primary, not yet on enough replicas: a failover could lose it. Cancel again.
      logger.warn(
        { sequenceId, acknowledged: error.acknowledged, required: error.required, user },
        'cancel not acknowledged by the replicas',
      );
      return reply.code(503).send({ error: 'NOT_REPLICATED', message: error.message });
    }
    logger.info({ sequenceId, outcome: result.outcome, state: result.state, user }, 'cancel asked over HTTP');
    return result;
  });

  await registerDashboard(server, app, config.http.dashboardReadOnly, config.http.dashboardMetadataKeys);
  return server;
}

const TIMED_OUT = Symbol('timed out');

/** `promise`'s value, or TIMED_OUT once `ms` passed (the promise goes on; its rejection is the caller's). */
function withinBudget<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
