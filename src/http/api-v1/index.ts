import rateLimit from '@fastify/rate-limit';
import type { FastifyPluginAsync } from 'fastify';
import type { App } from '../../app.ts';
import type { Keys } from '../../ledger/keys.ts';
import type { TransferQueries } from '../../ledger/queries.ts';
import type { Logger } from '../../logger.ts';
import { AuditReader } from '../../operations/audit.ts';
import type { Operations } from '../../operations/operations.ts';
import { actionsPlugin } from './actions.ts';
import { IdempotencyStore } from './idempotency.ts';
import { readsPlugin } from './reads.ts';
import { SUBMIT_RATE_LIMIT, submitPlugin, type SubmitOptions } from './submit.ts';

/** Requests per user and window to `/api/v1` (a person clicks, a script pages: both far below). */
export const API_RATE_LIMIT = { max: 300, timeWindowMs: 60_000 } as const;

export interface ApiV1Options {
  app: App;
  keys: Keys;
  queries: TransferQueries;
  operations: Operations;
  logger: Logger;
  metadataKeys: readonly string[];
  rateLimit?: { max: number; timeWindowMs: number };
  /** `POST /api/v1/transfers`: off (404) without keys; its own rate limit per key (default SUBMIT_RATE_LIMIT). */
  submit: Omit<SubmitOptions, 'app' | 'keys' | 'audit' | 'metadataKeys' | 'rateLimit'> & { rateLimit?: SubmitOptions['rateLimit'] };
}

/**
 * `/api/v1` (docs/contract.md section 5): reads for viewers, actions for operators, rate-limited per
 * user (per address before anyone is identified; accessPlugin answers those 401 first anyway). The
 * limit is counted in this process: with several workers behind one address, each counts its own.
 */
export const apiV1Plugin: FastifyPluginAsync<ApiV1Options> = async (server, options) => {
  const { app, keys, queries, operations, logger, metadataKeys } = options;
  const limit = options.rateLimit ?? API_RATE_LIMIT;
  await server.register(rateLimit, {
    max: limit.max,
    timeWindow: limit.timeWindowMs,
    keyGenerator: (request) => (request.identity ? `user:${request.identity.name}` : `peer:${request.ip}`),
  });
  const audit = new AuditReader(app.redis, keys.audit);
  await server.register(readsPlugin, { app, queries, audit, metadataKeys });
  if (options.submit.apiKeys.length > 0) {
    await server.register(submitPlugin, {
      ...options.submit,
      rateLimit: options.submit.rateLimit ?? SUBMIT_RATE_LIMIT,
      app,
      keys,
      audit,
      metadataKeys,
    });
  }
  await server.register(actionsPlugin, { operations, idempotency: new IdempotencyStore(app.redis, keys), logger });
};
