import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { NotReplicatedError } from '../../../packages/producer/src/errors.ts';
import { isCancelReason } from '../../../packages/producer/src/events.ts';
import type { Logger } from '../../logger.ts';
import type { Actor } from '../../operations/audit.ts';
import {
  AuditNotWrittenError,
  ForbiddenError,
  NoEpochError,
  RecheckRefusedError,
  ReplicasBehindError,
  ResolveRefusedError,
  TrackerNotAddedError,
} from '../../operations/errors.ts';
import { isOperatorReason, MAX_REASON_LENGTH, type Operations } from '../../operations/operations.ts';
import { requireRole } from '../access/identity.ts';
import { documentOnly } from '../openapi.ts';
import { documented, errorBody, sequenceIdParams } from '../schemas.ts';
import { refuseBadSequenceId } from '../transfers.ts';
import { browserCheck } from './browser-check.ts';
import { fingerprint, IDEMPOTENCY_KEY, type IdempotencyStore, type StoredAnswer } from './idempotency.ts';
import { actionCancelSchema, epochAcceptedSchema, recheckedSchema, resolvedSchema } from './responses.ts';

export interface ActionsOptions {
  operations: Operations;
  idempotency: IdempotencyStore;
  logger: Logger;
}

const reason = z.string().trim().refine(isOperatorReason, `one line of 1-${MAX_REASON_LENGTH} characters`);
// A cancel's reason is published in transfer.cancelled: at most 256 characters (docs/contract.md section 4).
const cancelBody = z.strictObject({
  reason: reason.refine(isCancelReason, 'at most 256 characters: it is published in transfer.cancelled'),
});
const resolveBody = z.discriminatedUnion('outcome', [
  z.strictObject({
    reason,
    outcome: z.literal('submitted'),
    txid: z.string().regex(/^[0-9A-Za-z:_-]{1,256}$/),
    force: z.boolean().optional(),
  }),
  z.strictObject({ reason, outcome: z.literal('not-sent'), force: z.boolean().optional() }),
]);
const epochBody = z.strictObject({ reason });
const recheckBody = z.strictObject({ reason });

const headers = z.object({
  'idempotency-key': z.string().optional().meta({ description: 'A repeat with the same key answers as the first did, for 24 h' }),
  'x-csrf-token': z.string().optional().meta({ description: "A browser's request without an Origin naming this server" }),
});
/** Every action's refusals but its own 409s: see docs/contract.md section 5. */
const REFUSALS = [400, 401, 403, 404, 409, 422, 429, 503] as const;

function action(summary: string, body: z.ZodType, ok: z.ZodType, params = true) {
  return documented(summary, { ...(params ? { params: sequenceIdParams } : {}), headers, body, response: { 200: ok }, refusals: REFUSALS });
}

/**
 * The `/api/v1` actions (docs/contract.md section 5): the body checked (400 when it is not a JSON
 * object, 422 with `issues` when a field is wrong), a browser's request checked for its origin or CSRF
 * token (browser-check.ts), `Idempotency-Key` honoured, then the action through src/operations, which
 * checks the role (a viewer: 403) and audits every outcome. Any identified user reaches the action, so
 * that a viewer's attempt is audited too.
 */
export const actionsPlugin: FastifyPluginAsync<ActionsOptions> = async (server, { operations, idempotency, logger }) => {
  server.addHook('onRequest', requireRole('viewer'));
  documentOnly(server);

  async function act(
    request: FastifyRequest,
    reply: FastifyReply,
    schema: z.ZodType,
    run: (body: never, actor: Actor) => Promise<StoredAnswer>,
  ) {
    const body = request.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return reply.code(400).send({ error: 'INVALID_BODY', message: 'a JSON object is expected (content-type: application/json)' });
    }
    const via = await browserCheck(server, request, reply);
    if (via === 'refused') return reply;
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      return reply
        .code(422)
        .send({ error: 'INVALID_BODY', issues: parsed.error.issues.map(({ path, message }) => ({ path: path.join('.'), message })) });
    }
    const identity = request.identity!;
    const actor: Actor = { name: identity.source === 'local' ? '' : identity.name, role: identity.role, via, remote: request.ip };
    const key = request.headers['idempotency-key'];
    if (key === undefined) return send(reply, await answerOf(() => run(parsed.data as never, actor)));
    if (typeof key !== 'string' || !IDEMPOTENCY_KEY.test(key)) {
      return reply.code(400).send({ error: 'INVALID_IDEMPOTENCY_KEY', message: 'Idempotency-Key: 1-255 printable ASCII characters' });
    }
    const print = fingerprint(request.method, request.url, parsed.data);
    const claim = await idempotency.claim(identity.name, key, print);
    switch (claim.kind) {
      case 'repeat':
        return send(reply.header('idempotent-replayed', 'true'), claim.answer);
      case 'in-progress':
        return reply.code(409).send({ error: 'IDEMPOTENCY_IN_PROGRESS', message: 'a request with this Idempotency-Key is still running' });
      case 'reused':
        return reply.code(422).send({ error: 'IDEMPOTENCY_KEY_REUSED', message: 'this Idempotency-Key was used for another request' });
      case 'first':
        break;
    }
    let answer: StoredAnswer;
    try {
      answer = await answerOf(() => run(parsed.data as never, actor));
    } catch (error) {
      await idempotency.release(identity.name, key).catch((err: unknown) => logger.warn({ err }, 'idempotency key not released'));
      throw error;
    }
    await idempotency.answer(identity.name, key, print, answer);
    return send(reply, answer);
  }

  const cancel = action('Cancel before send (too-late and already-ended answer 409)', cancelBody, actionCancelSchema);
  cancel.response[409] = z.union([actionCancelSchema, errorBody]);
  server.post<{ Params: { sequenceId: string } }>('/api/v1/transfers/:sequenceId/cancel', { schema: cancel }, async (request, reply) => {
    const { sequenceId } = request.params;
    if (refuseBadSequenceId(sequenceId, reply)) return reply;
    return act(request, reply, cancelBody, async (body: z.infer<typeof cancelBody>, actor) => {
      const result = await operations.cancel(actor, sequenceId, body.reason);
      // too-late (sent already) and already-ended: the state does not allow a cancel; nothing changed.
      return { status: result.outcome === 'cancelled' ? 200 : 409, body: { sequenceId, ...result } };
    });
  });

  const resolve = action('Resolve a transfer whose send outcome is unknown, checked with the provider', resolveBody, resolvedSchema);
  server.post<{ Params: { sequenceId: string } }>('/api/v1/transfers/:sequenceId/resolve', { schema: resolve }, async (request, reply) => {
    const { sequenceId } = request.params;
    if (refuseBadSequenceId(sequenceId, reply)) return reply;
    return act(request, reply, resolveBody, async (body: z.infer<typeof resolveBody>, actor) => {
      const { reason: text, ...resolution } = body;
      try {
        return { status: 200, body: await operations.resolve(actor, sequenceId, resolution, text) };
      } catch (error) {
        // Resolved (and audited), its tracking job to be added by reconciliation: resolving again is wrong.
        if (!(error instanceof TrackerNotAddedError)) throw error;
        return {
          status: 200,
          body: { sequenceId, resolvedAs: 'submitted', version: error.version, tracking: 'pending', message: error.message },
        };
      }
    });
  });

  const recheck = action("Poll a submitted transfer's tracking now", recheckBody, recheckedSchema);
  server.post<{ Params: { sequenceId: string } }>('/api/v1/transfers/:sequenceId/recheck', { schema: recheck }, async (request, reply) => {
    const { sequenceId } = request.params;
    if (refuseBadSequenceId(sequenceId, reply)) return reply;
    return act(request, reply, recheckBody, async (body: z.infer<typeof recheckBody>, actor) => ({
      status: 200,
      body: await operations.recheck(actor, sequenceId, body.reason),
    }));
  });

  const acceptEpoch = action("Accept the ledger's epoch after a loss", epochBody, epochAcceptedSchema, false);
  server.post('/api/v1/ledger/accept-epoch', { schema: acceptEpoch }, async (request, reply) =>
    act(request, reply, epochBody, async (body: z.infer<typeof epochBody>, actor) => ({
      status: 200,
      body: await operations.acceptEpoch(actor, body.reason),
    })),
  );
};

/** An action's answer, its refusals included (each already audited by src/operations). */
async function answerOf(run: () => Promise<StoredAnswer>): Promise<StoredAnswer> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ForbiddenError) return { status: 403, body: { error: error.code, message: error.message } };
    if (error instanceof ResolveRefusedError || error instanceof RecheckRefusedError) {
      // The provider could not be asked: try again later; any other refusal is the state's or the provider's answer.
      const status = error.code === 'NOT_FOUND' ? 404 : error.code === 'PROVIDER_UNREACHABLE' ? 503 : 409;
      return { status, body: { error: error.code, message: error.message, ...error.details } };
    }
    if (error instanceof NoEpochError) return { status: 409, body: { error: error.code, message: error.message } };
    if (error instanceof ReplicasBehindError || error instanceof NotReplicatedError) {
      return { status: 503, body: { error: 'NOT_REPLICATED', message: error.message } };
    }
    if (error instanceof AuditNotWrittenError)
      return { status: 503, body: { error: error.code, outcome: error.outcome, message: error.message } };
    throw error;
  }
}

function send(reply: FastifyReply, answer: StoredAnswer): FastifyReply {
  const details = answer.body as { retryAfterSeconds?: unknown };
  if ((answer.status === 409 || answer.status === 503) && typeof details.retryAfterSeconds === 'number')
    reply.header('retry-after', String(details.retryAfterSeconds));
  return reply.code(answer.status).send(answer.body);
}
