import { randomBytes } from 'node:crypto';
import cookie from '@fastify/cookie';
import csrfProtection from '@fastify/csrf-protection';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { App } from '../app.ts';
import type { Config } from '../config/config.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { createKeys } from '../ledger/keys.ts';
import { TransferQueries } from '../ledger/queries.ts';
import { AuditLog } from '../operations/audit.ts';
import { Operations } from '../operations/operations.ts';
import { accessPlugin } from './access/identity.ts';
import { apiV1Plugin, type ApiV1Options } from './api-v1/index.ts';
import { OPEN_PATHS, pathOf } from './auth.ts';
import { registerDashboard } from './dashboard.ts';
import { consolePlugin } from '../console/plugin.ts';
import { metricsPlugin } from './metrics-route.ts';
import { openapiPlugin } from './openapi.ts';
import { probesPlugin } from './probes.ts';
import { providerWakeupsPlugin } from './provider-wakeups.ts';
import type { Wakeups } from '../custody/port.ts';
import { transfersPlugin } from './transfers.ts';
import { sendDeadlineMs, sendLeaseMs } from '../timing.ts';

export { DASHBOARD_PATH } from './dashboard.ts';

export interface HttpDeps {
  app: App;
  config: Pick<Config, 'http' | 'redis' | 'queue' | 'audit' | 'submit' | 'custody' | 'retention'>;
  logger: Logger;
  metrics: Metrics;
  /** `/api/v1`'s rate limit per user; default API_RATE_LIMIT (tests set a small one). */
  apiRateLimit?: ApiV1Options['rateLimit'];
  /** `POST /api/v1/transfers`' rate limit per key; default SUBMIT_RATE_LIMIT (tests set a small one). */
  submitRateLimit?: ApiV1Options['submit']['rateLimit'];
}

/**
 * Paths answered without an identity besides the probes and /metrics (docs/contract.md section 5):
 * the submit route (its own keys) and the provider's webhook when the port has one (its signature),
 * each refusing on its own.
 */
function selfAuthenticated(wakeups: Wakeups | undefined): ReadonlySet<string> {
  return new Set(['POST /api/v1/transfers', ...(wakeups ? [`POST ${wakeups.path}`] : [])]);
}

/**
 * The operator surface (docs/contract.md section 5), built here and listened on by the caller: who
 * the request is first (accessPlugin, before any route), then one plugin per concern, each checking
 * the role it needs: probes and metrics (open), the v1.3 transfer routes, Bull Board, `/api/v1`,
 * and `/openapi.json` documenting those with a schema (openapi.ts).
 */
export async function createHttpServer({
  app,
  config,
  logger,
  metrics,
  apiRateLimit,
  submitRateLimit,
}: HttpDeps): Promise<FastifyInstance> {
  const server: FastifyInstance = Fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // sequenceIds are up to 128 characters: longer ones must reach the handler to get a 400, not a 404.
    routerOptions: { maxParamLength: 1024 },
  });

  const { dashboardUser, dashboardPassword, dashboardMetadataKeys: metadataKeys } = config.http;
  const wakeups = app.custody.wakeups;
  const open = selfAuthenticated(wakeups);
  const isOpen = (request: FastifyRequest): boolean => {
    const path = pathOf(request.url);
    return OPEN_PATHS.has(path) || open.has(`${request.method} ${path}`);
  };
  await server.register(accessPlugin, { console: config.http.console, dashboardUser, dashboardPassword, isOpen });
  // For every plugin's forms (the console's too): the CSRF secret in a cookie, tokens from
  // reply.generateCsrf({ userInfo }) bound to the user, so a token planted in another user's cookie
  // (cookie tossing) fails.
  await server.register(cookie);
  await server.register(csrfProtection, {
    cookieOpts: { path: '/', httpOnly: true, sameSite: 'strict', signed: false },
    getUserInfo: (request) => request.identity?.name ?? '',
    csrfOpts: { hmacKey: randomBytes(32).toString('base64') },
  });

  const keys = createKeys(config.queue.prefix, config.queue.eventsStream);
  const operations = new Operations({
    redis: app.redis,
    ledger: app.ledger,
    audit: new AuditLog(app.redis, keys.audit, config.audit.retentionMs),
    queuePrefix: config.queue.prefix,
    trackers: app.trackers,
    replicas: { min: config.redis.minReplicas, timeoutMs: config.redis.replicaTimeoutMs },
    // The worker's own port: a resolve's provider check takes its slots in the worker's request budget.
    custody: {
      port: app.custody,
      leaseMs: sendLeaseMs(config.custody.timeoutMs),
      deadlineMs: sendDeadlineMs(config.custody.timeoutMs),
    },
    onAction: (action, outcome) => metrics.consoleActions.inc({ action, outcome }),
  });
  const queries = new TransferQueries(app.redis, keys, { unresolvedAfterMs: config.submit.unresolvedAfterMs });

  // Before the routes: it documents those added after it.
  await server.register(openapiPlugin);
  await server.register(probesPlugin, { app });
  // Only when the provider can be woken (port.ts, Wakeups): the domain never learns its webhook's shape.
  if (wakeups) await server.register(providerWakeupsPlugin, { app, wakeups, keys, metrics, logger });
  await server.register(metricsPlugin, { app, metrics, logger });
  await server.register(transfersPlugin, {
    app,
    operations,
    logger,
    metadataKeys,
    dashboardUser: dashboardUser && dashboardPassword ? dashboardUser : undefined,
    consoleUsers: config.http.console.users.length > 0,
  });
  await registerDashboard(server, app, config.http.dashboardReadOnly, metadataKeys);
  await server.register(consolePlugin, { app, config, operations, logger });
  await server.register(apiV1Plugin, {
    app,
    keys,
    queries,
    operations,
    logger,
    metadataKeys,
    ...(apiRateLimit ? { rateLimit: apiRateLimit } : {}),
    submit: {
      apiKeys: config.submit.apiKeys,
      hashTtlMs: config.retention.transfersMs,
      producer: {
        prefix: config.queue.prefix,
        eventsStream: config.queue.eventsStream,
        minReplicas: config.redis.minReplicas,
        replicaTimeoutMs: config.redis.replicaTimeoutMs,
      },
      ...(submitRateLimit ? { rateLimit: submitRateLimit } : {}),
    },
  });
  return server;
}
