import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { z } from 'zod';
import type { App } from '../app.ts';
import { cancelResultSchema } from '../../packages/producer/src/cancel-result.ts';
import { NotReplicatedError } from '../../packages/producer/src/errors.ts';
import { CANCEL_BY_MAX, CANCEL_TEXT_RULE, isCancelReason } from '../../packages/producer/src/events.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import type { Logger } from '../logger.ts';
import { transferView, type TransferView } from '../ledger/transfer-view.ts';
import type { Actor } from '../operations/audit.ts';
import { ForbiddenError } from '../operations/errors.ts';
import type { Operations } from '../operations/operations.ts';
import { requireRole, type Identity } from './access/identity.ts';
import { boundedCopyWithoutUser } from './bounded-copy.ts';
import { redactMetadata } from './job-view.ts';
import { documentOnly } from './openapi.ts';
import { documented, sequenceIdParams, transferViewSchema } from './schemas.ts';
import { SCRAPE_REDIS_BUDGET_MS, TIMED_OUT, withinBudget } from './within-budget.ts';

export interface TransfersOptions {
  app: App;
  operations: Operations;
  logger: Logger;
  /** DASHBOARD_METADATA_KEYS. */
  metadataKeys: readonly string[];
  /** The dashboard's user, and whether CONSOLE_USERS names anyone (see the cancel route). */
  dashboardUser: string | undefined;
  consoleUsers: boolean;
}

/** 400 unless `sequenceId` is one; true when it answered. */
export function refuseBadSequenceId(sequenceId: string, reply: FastifyReply): boolean {
  if (SEQUENCE_ID.test(sequenceId)) return false;
  void reply.code(400).send({ error: 'INVALID_SEQUENCE_ID', message: 'sequenceId must be 1-128 of A-Z a-z 0-9 _ -' });
  return true;
}

/**
 * The transfer as `GET /transfers/:sequenceId` shows it (undefined when unknown, TIMED_OUT when Redis
 * did not answer within the budget): each event echoes the transfer's metadata, shown as the dashboard
 * shows a job's (job-view.ts).
 */
export async function transferAnswer(
  app: App,
  sequenceId: string,
  metadataKeys: readonly string[],
): Promise<TransferView | undefined | typeof TIMED_OUT> {
  const view = await withinBudget(transferView(app.ledger, sequenceId), SCRAPE_REDIS_BUDGET_MS);
  if (view === TIMED_OUT || !view) return view;
  const events = view.events.map((event) => ({
    ...event,
    metadata: boundedCopyWithoutUser(redactMetadata(event.metadata, metadataKeys)),
  }));
  return { ...view, events } as TransferView;
}

export function redisTimedOut(reply: FastifyReply): FastifyReply {
  return reply.code(503).send({ error: 'REDIS_UNAVAILABLE', message: 'Redis did not answer in time; try again' });
}

/** The v1.3 routes: transfer lookup (viewers) and cancel before send (docs/contract.md section 5). */
export const transfersPlugin: FastifyPluginAsync<TransfersOptions> = async (server, options) => {
  const { app, operations, logger, metadataKeys } = options;
  documentOnly(server);

  const lookup = documented('v1.3: one transfer, its state and events', {
    params: sequenceIdParams,
    response: { 200: transferViewSchema },
    refusals: [400, 401, 404, 503],
  });
  server.get<{ Params: { sequenceId: string } }>(
    '/transfers/:sequenceId',
    { onRequest: requireRole('viewer'), schema: lookup },
    async (request, reply) => {
      const { sequenceId } = request.params;
      if (refuseBadSequenceId(sequenceId, reply)) return reply;
      const view = await transferAnswer(app, sequenceId, metadataKeys);
      if (view === TIMED_OUT) return redisTimedOut(reply);
      if (!view) return reply.code(404).send({ error: 'NOT_FOUND', message: 'unknown transfer' });
      return view;
    },
  );

  // Cancel before send (docs/contract.md section 4) through the operator actions (audited). A JSON body
  // only (application/json: a browser cannot send it cross-site without a CORS preflight, which this
  // server never answers, so a page elsewhere cannot cancel with the browser's remembered credentials).
  // Who may: an operator; and, as the route has always allowed, the dashboard's user while CONSOLE_USERS
  // names nobody (docs/contract.md section 10, "until console users exist"). The role is checked by
  // Operations, so a refusal is audited.
  const cancel = documented('v1.3: cancel before send', {
    params: sequenceIdParams,
    body: z.object({ reason: z.string().meta({ description: CANCEL_TEXT_RULE }) }),
    response: { 200: cancelResultSchema },
    refusals: [400, 401, 403, 503],
  });
  server.post<{ Params: { sequenceId: string }; Body: unknown }>(
    '/transfers/:sequenceId/cancel',
    { onRequest: requireRole('viewer'), schema: cancel },
    async (request, reply) => {
      const { sequenceId } = request.params;
      if (refuseBadSequenceId(sequenceId, reply)) return reply;
      const body = request.body;
      const given = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { reason?: unknown }).reason : undefined;
      const reason = typeof given === 'string' ? given.trim() : given;
      if (!isCancelReason(reason)) {
        return reply.code(400).send({ error: 'INVALID_BODY', message: `a JSON object {"reason"}: the reason, ${CANCEL_TEXT_RULE}` });
      }
      const actor = legacyActor(request.identity!, options, request.ip);
      let result;
      try {
        result = await operations.cancel(actor, sequenceId, reason);
      } catch (error) {
        if (error instanceof ForbiddenError) {
          return reply.code(403).send({ error: 'FORBIDDEN', message: error.message });
        }
        if (!(error instanceof NotReplicatedError)) throw error;
        // Decided on the primary, not yet on enough replicas: a failover could lose it. Cancel again.
        logger.warn(
          { sequenceId, acknowledged: error.acknowledged, required: error.required, user: actor.name },
          'cancel not acknowledged by the replicas',
        );
        return reply.code(503).send({ error: 'NOT_REPLICATED', message: error.message });
      }
      logger.info({ sequenceId, outcome: result.outcome, state: result.state, user: actor.name }, 'cancel asked over HTTP');
      return result;
    },
  );
};

/**
 * The actor of a cancel on the v1.3 route. The event's `by` is `http:<user>`, cut to fit; the local
 * operator (no credentials configured, loopback) has no user, so `by` says `http` as it always did.
 */
function legacyActor(identity: Identity, options: TransfersOptions, remote: string): Actor {
  const name = identity.source === 'local' ? '' : identity.name.slice(0, CANCEL_BY_MAX - 'http:'.length);
  const dashboardOperator =
    !options.consoleUsers &&
    identity.source === 'password' &&
    options.dashboardUser !== undefined &&
    identity.name === options.dashboardUser;
  return { name, role: dashboardOperator ? 'operator' : identity.role, via: 'api', remote };
}
