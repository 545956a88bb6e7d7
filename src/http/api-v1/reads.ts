import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { App } from '../../app.ts';
import { ATTENTION_REASONS, InvalidCursorError, type TransferQueries } from '../../ledger/queries.ts';
import { TransferState } from '../../ledger/states.ts';
import { AuditReader } from '../../operations/audit.ts';
import { READY_CHECK_TIMEOUT_MS } from '../../timing.ts';
import { requireRole } from '../access/identity.ts';
import { documentOnly } from '../openapi.ts';
import { documented, sequenceIdParams } from '../schemas.ts';
import { redisTimedOut, refuseBadSequenceId, transferAnswer } from '../transfers.ts';
import { SCRAPE_REDIS_BUDGET_MS, TIMED_OUT, withinBudget } from '../within-budget.ts';
import { attemptCounts, listedItem, timeline } from './present.ts';
import { auditPageSchema, detailSchema, listPageSchema, summarySchema } from './responses.ts';

/** The most items a page of `/api/v1` holds (docs/contract.md section 5), and how many without `limit`. */
export const API_MAX_PAGE = 200;
const DEFAULT_PAGE = 50;

export interface ReadsOptions {
  app: App;
  queries: TransferQueries;
  audit: AuditReader;
  metadataKeys: readonly string[];
}

/** A time bound: ISO 8601 or milliseconds since the epoch. */
const instant = z.union([
  z
    .string()
    .regex(/^\d{1,15}$/)
    .transform(Number),
  z.iso.datetime({ offset: true }).transform((text) => Date.parse(text)),
]);
const limit = z.coerce.number().int().min(1).max(API_MAX_PAGE).default(DEFAULT_PAGE);

const listQuery = z.strictObject({
  state: z.enum(Object.values(TransferState) as [TransferState, ...TransferState[]]).optional(),
  attention: z.enum(ATTENTION_REASONS).optional(),
  wallet: z.string().min(1).max(128).optional(),
  coin: z.string().min(1).max(64).optional(),
  since: instant.optional(),
  until: instant.optional(),
  q: z.string().max(256).optional(),
  limit,
  cursor: z.string().min(1).max(4096).optional(),
});

const auditQuery = z.strictObject({
  limit,
  cursor: z.string().refine(AuditReader.isCursor, 'not a cursor this listing gave').optional(),
});

function invalidQuery(issues: z.core.$ZodIssue[]) {
  return { error: 'INVALID_QUERY', issues: issues.map(({ path, message }) => ({ path: path.join('.'), message })) };
}

/** The `/api/v1` reads (viewers): transfers, one transfer with its timeline, the summary, the audit stream. */
export const readsPlugin: FastifyPluginAsync<ReadsOptions> = async (server, { app, queries, audit, metadataKeys }) => {
  server.addHook('onRequest', requireRole('viewer'));
  documentOnly(server);

  const list = documented('Transfers, most recently changed first, by page', {
    querystring: listQuery,
    response: { 200: listPageSchema },
    refusals: [400, 401, 403, 429],
  });
  server.get('/api/v1/transfers', { schema: list }, async (request, reply) => {
    const parsed = listQuery.safeParse(request.query);
    if (!parsed.success) return reply.code(400).send(invalidQuery(parsed.error.issues));
    const { wallet, ...query } = parsed.data;
    try {
      const page = await queries.listTransfers({ ...query, ...(wallet === undefined ? {} : { walletId: wallet }) });
      return { items: page.items.map((record) => listedItem(record, metadataKeys)), next: page.next };
    } catch (error) {
      if (error instanceof InvalidCursorError) return reply.code(400).send({ error: error.code, message: error.message });
      throw error;
    }
  });

  const detail = documented('One transfer with its counts and timeline', {
    params: sequenceIdParams,
    response: { 200: detailSchema },
    refusals: [400, 401, 403, 404, 429, 503],
  });
  server.get<{ Params: { sequenceId: string } }>('/api/v1/transfers/:sequenceId', { schema: detail }, async (request, reply) => {
    const { sequenceId } = request.params;
    if (refuseBadSequenceId(sequenceId, reply)) return reply;
    const detail = await transferDetail(app, audit, sequenceId, metadataKeys);
    if (detail === TIMED_OUT) return redisTimedOut(reply);
    if (!detail) return reply.code(404).send({ error: 'NOT_FOUND', message: 'unknown transfer' });
    return detail;
  });

  const summary = documented('Counts per state and attention reason, and the banners', {
    response: { 200: summarySchema },
    refusals: [401, 403, 429, 503],
  });
  server.get('/api/v1/summary', { schema: summary }, async (_request, reply) => {
    const summary = await withinBudget(readSummary(app, queries), SCRAPE_REDIS_BUDGET_MS);
    if (summary === TIMED_OUT) return redisTimedOut(reply);
    return summary;
  });

  const auditPage = documented('Operator actions, newest first, by page', {
    querystring: auditQuery,
    response: { 200: auditPageSchema },
    refusals: [400, 401, 403, 429],
  });
  server.get('/api/v1/audit', { schema: auditPage }, async (request, reply) => {
    const parsed = auditQuery.safeParse(request.query);
    if (!parsed.success) return reply.code(400).send(invalidQuery(parsed.error.issues));
    const page = await audit.page(parsed.data.limit, parsed.data.cursor);
    return { items: page.items, next: page.next };
  });
};

/**
 * One transfer as `GET /api/v1/transfers/:sequenceId` answers it (also the submit route's answer to a
 * repeat): undefined when unknown, TIMED_OUT when Redis did not answer within the budget.
 */
export async function transferDetail(app: App, audit: AuditReader, sequenceId: string, metadataKeys: readonly string[]) {
  const view = await transferAnswer(app, sequenceId, metadataKeys);
  if (view === TIMED_OUT) return TIMED_OUT;
  if (!view) return undefined;
  // Written together (one round trip): the record and its attempts list.
  const [record, attempts] = await Promise.all([app.ledger.get(sequenceId), app.ledger.attempts(sequenceId)]);
  if (!record) return undefined;
  const { entries, complete } = await audit.forTransfer(sequenceId, record.createdAt);
  return {
    ...view,
    counts: attemptCounts(record),
    haltedAs: record.haltedAs ?? null,
    timeline: timeline(record, view.events, entries, attempts),
    // false: the audit stream held more entries since the transfer began than one read scans.
    timelineComplete: complete,
  };
}

/**
 * Counts and the banners an operator must see first, each one read: the ledger's recovery window
 * (the epoch), the provider's pause (a 429's Retry-After, shared in Redis), Redis refusing writes (the
 * readiness write probe). The request budget's use is not here: it lives in the budget's schedule and
 * is shown by the metrics (custody_budget_used_total), not cheaply readable as one figure.
 */
async function readSummary(app: App, queries: TransferQueries) {
  const [counts, epoch, pausedUntil, writes] = await Promise.all([
    queries.counts(),
    app.ledger.epoch.peek(),
    app.budget.pausedUntil(),
    app.redisErrors.probeWrites(READY_CHECK_TIMEOUT_MS),
  ]);
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    states: counts.states,
    attention: counts.attention,
    banners: {
      ledgerRecovery:
        epoch.id === undefined
          ? { active: true, until: null, message: 'the ledger has no epoch: nothing is sent until `ledger init`' }
          : { active: epoch.recoveryUntil > epoch.now, until: epoch.recoveryUntil > epoch.now ? iso(epoch.recoveryUntil) : null },
      providerPause: { active: pausedUntil > epoch.now, until: pausedUntil > epoch.now ? iso(pausedUntil) : null },
      redisWrites: writes.accepted ? { refused: false } : { refused: true, code: writes.code },
    },
  };
}
