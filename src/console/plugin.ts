/**
 * The operator console (docs/contract.md section 10) at /console: server-rendered pages over the
 * ledger's named queries (TransferQueries) and public reads, and POST forms that act only through
 * src/operations (audited, allowed or refused). Nothing is loaded from another origin; the pages read
 * without script; a strict Content-Security-Policy (helmet, this plugin's routes only) allows scripts
 * and styles from this origin only, and the one script and stylesheet are served here.
 *
 * Registered by the HTTP server with one line; every header, parser and decorator it needs (helmet,
 * cookies, CSRF, forms, views) is registered inside its own encapsulated context, so no other route
 * changes. Who the user is comes from the access plugin (src/http/access/), registered here too when
 * the server has not.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyFormbody from '@fastify/formbody';
import fastifyHelmet from '@fastify/helmet';
import fastifyView from '@fastify/view';
import { Eta } from 'eta';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NotReplicatedError } from '../../packages/producer/src/errors.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import type { App } from '../app.ts';
import type { Config } from '../config/config.ts';
import { accessPlugin, requireRole } from '../http/access/identity.ts';
import { createKeys } from '../ledger/keys.ts';
import { InvalidCursorError, TransferQueries, type AttentionReason } from '../ledger/queries.ts';
import { TransferState } from '../ledger/ledger.ts';
import type { Logger } from '../logger.ts';
import { ACTION_OUTCOMES, type Action, type ActionOutcome, type Actor } from '../operations/audit.ts';
import { OperationError } from '../operations/errors.ts';
import { isOperatorReason, MAX_REASON_LENGTH, type Operations } from '../operations/operations.ts';
import { LiveUpdates } from './live.ts';
import { ATTENTION_REASONS, banners, detail, LIST_PAGE_SIZE, listedRow, STATES, summary, type PageDeps } from './pages.ts';

export const CONSOLE_PATH = '/console';

export interface ConsoleOptions {
  app: App;
  config: Pick<Config, 'http' | 'queue' | 'submit'>;
  /** The server's operator actions (one Operations per server: the audit stream and its counter). */
  operations: Operations;
  logger: Logger;
}

const VIEWS = fileURLToPath(new URL('./views/', import.meta.url));
const ASSETS = {
  'console.css': { type: 'text/css; charset=utf-8', body: readFileSync(new URL('./assets/console.css', import.meta.url)) },
  'console.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(new URL('./assets/console.js', import.meta.url)) },
} as const;

/** What the outcome line after an action says, for the outcomes that are not the action's own words. */
const FORM_PROBLEMS = {
  unconfirmed: 'Nothing was done: the confirmation did not repeat the sequenceId exactly.',
  'invalid-reason': `Nothing was done: the reason must be one line of 1-${MAX_REASON_LENGTH} characters.`,
  'invalid-txid': 'Nothing was done: a txid is 1-128 letters and digits (0x allowed).',
} as const;

/** A txid as an operator may type it (hex or base58-like chains): bounded, no separators. */
const TXID = /^(0x)?[A-Za-z0-9]{1,128}$/;

type ActionBody = { reason?: unknown; confirm?: unknown; outcome?: unknown; txid?: unknown };

export async function consolePlugin(server: FastifyInstance, options: ConsoleOptions): Promise<void> {
  const { app, config, operations, logger } = options;
  const keys = createKeys(config.queue.prefix, config.queue.eventsStream);
  const deps: PageDeps = {
    app,
    queries: new TransferQueries(app.redis, keys, { unresolvedAfterMs: config.submit.unresolvedAfterMs }),
    auditKey: keys.audit,
    metadataKeys: config.http.dashboardMetadataKeys,
  };
  const live = new LiveUpdates(deps, keys.events, logger);

  // The server may already have these (a shell registering them for every route): not twice.
  if (!server.hasRequestDecorator('identity')) {
    await server.register(accessPlugin, {
      console: config.http.console,
      dashboardUser: config.http.dashboardUser,
      dashboardPassword: config.http.dashboardPassword,
    });
  }
  if (!server.hasDecorator('parseCookie')) await server.register(fastifyCookie);
  if (!server.hasContentTypeParser('application/x-www-form-urlencoded')) await server.register(fastifyFormbody);
  if (!server.hasReplyDecorator('generateCsrf')) {
    await server.register(fastifyCsrf, {
      cookieKey: 'console_csrf',
      cookieOpts: { path: CONSOLE_PATH, sameSite: 'strict', httpOnly: true },
      // The token is bound to the user, so one planted in another user's cookie (cookie tossing) fails.
      getUserInfo: (request: FastifyRequest) => request.identity?.name ?? '',
      csrfOpts: { hmacKey: randomBytes(32).toString('base64') },
    });
  }
  await server.register(fastifyHelmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'none'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'"],
        imgSrc: ["'self'"],
        connectSrc: ["'self'"],
        formAction: ["'self'"],
        frameAncestors: ["'none'"],
        baseUri: ["'none'"],
      },
    },
    crossOriginEmbedderPolicy: true,
    referrerPolicy: { policy: 'same-origin' },
  });
  await server.register(fastifyView, { engine: { eta: new Eta({ views: VIEWS, autoEscape: true }) }, root: VIEWS });
  server.addHook('preClose', async () => live.closeAll());

  const viewer = { onRequest: requireRole('viewer') };

  /** Renders `page` with what every page shows: the user, the banners and a CSRF token bound to the user. */
  async function render(request: FastifyRequest, reply: FastifyReply, page: string, data: Record<string, unknown>) {
    const identity = request.identity!;
    const csrf = reply.generateCsrf({ userInfo: identity.name });
    return reply.header('cache-control', 'no-store').view(`${page}.eta`, {
      ...data,
      user: identity,
      operator: identity.role === 'operator',
      csrf,
      banners: await banners(app),
      base: CONSOLE_PATH,
    });
  }

  server.get('/console/assets/:file', viewer, async (request, reply) => {
    const asset = ASSETS[(request.params as { file: string }).file as keyof typeof ASSETS];
    if (!asset) return reply.code(404).send({ error: 'NOT_FOUND' });
    return reply.header('content-type', asset.type).header('cache-control', 'no-cache').send(asset.body);
  });

  server.get('/console', viewer, async (request, reply) => {
    const { counts, attention } = await summary(deps);
    return render(request, reply, 'home', { counts, attention, states: STATES, reasons: ATTENTION_REASONS });
  });

  server.get<{ Querystring: Record<string, string | undefined> }>('/console/transfers', viewer, async (request, reply) => {
    const { state, attention, q, cursor } = request.query;
    const filters = {
      state: STATES.includes(state as TransferState) ? (state as TransferState) : undefined,
      attention: ATTENTION_REASONS.includes(attention as AttentionReason) ? (attention as AttentionReason) : undefined,
      q: q?.trim().slice(0, 256) || undefined,
    };
    let page;
    try {
      page = await deps.queries.listTransfers({ ...filters, limit: LIST_PAGE_SIZE, ...(cursor ? { cursor } : {}) });
    } catch (error) {
      if (!(error instanceof InvalidCursorError)) throw error;
      reply.code(400);
      page = { items: [], next: null, problem: error.message };
    }
    const next = page.next ? `${CONSOLE_PATH}/transfers?${new URLSearchParams({ ...definedOnly(filters), cursor: page.next })}` : null;
    return render(request, reply, 'list', {
      filters,
      rows: page.items.map(listedRow),
      next,
      problem: 'problem' in page ? page.problem : undefined,
      states: STATES,
      reasons: ATTENTION_REASONS,
    });
  });

  server.get<{ Params: { sequenceId: string }; Querystring: { action?: string; outcome?: string } }>(
    '/console/transfers/:sequenceId',
    viewer,
    async (request, reply) => {
      const { sequenceId } = request.params;
      const found = SEQUENCE_ID.test(sequenceId) ? await detail(deps, sequenceId) : undefined;
      if (!found) return render(request, reply.code(404), 'missing', { sequenceId });
      return render(request, reply, 'detail', { ...found, sequenceId, outcome: outcomeLine(request.query) });
    },
  );

  server.get('/console/events', viewer, (request, reply) => live.serve(request, reply));

  const acting = { onRequest: requireRole('viewer'), preHandler: server.csrfProtection };

  server.post<{ Params: { sequenceId: string }; Body: ActionBody }>(
    '/console/transfers/:sequenceId/cancel',
    acting,
    async (request, reply) =>
      act(request, reply, 'cancel', (actor, reason) => operations.cancel(actor, request.params.sequenceId, reason).then((r) => r.outcome)),
  );

  server.post<{ Params: { sequenceId: string }; Body: ActionBody }>(
    '/console/transfers/:sequenceId/resolve',
    acting,
    async (request, reply) => {
      const body = request.body ?? {};
      const txid = typeof body.txid === 'string' ? body.txid.trim() : '';
      if (txid !== '' && !TXID.test(txid)) return back(reply, request.params.sequenceId, 'resolve', 'invalid-txid');
      const resolution =
        body.outcome === 'not-sent' ? { outcome: 'not-sent' as const } : { outcome: 'submitted' as const, ...(txid ? { txid } : {}) };
      return act(request, reply, 'resolve', (actor, reason) =>
        operations.resolve(actor, request.params.sequenceId, resolution, reason).then(() => 'resolved' as const),
      );
    },
  );

  /**
   * One action from a form: the typed confirmation and the reason checked, then the operations module
   * (which refuses a viewer, audited as forbidden: 403 here), then back to the transfer's page with the
   * outcome. Only fixed outcome names travel in the redirect, never text from the request.
   */
  async function act(
    request: FastifyRequest<{ Params: { sequenceId: string }; Body: ActionBody }>,
    reply: FastifyReply,
    action: Action,
    run: (actor: Actor, reason: string) => Promise<ActionOutcome>,
  ) {
    const { sequenceId } = request.params;
    if (!SEQUENCE_ID.test(sequenceId)) return reply.code(400).send({ error: 'INVALID_SEQUENCE_ID' });
    const identity = request.identity!;
    const body = request.body ?? {};
    const reason = typeof body.reason === 'string' ? body.reason.trim() : '';
    const actor: Actor = { name: identity.name, role: identity.role, via: 'console', remote: request.ip };
    if (identity.role === 'operator') {
      if (body.confirm !== sequenceId) return back(reply, sequenceId, action, 'unconfirmed');
      if (!isOperatorReason(reason)) return back(reply, sequenceId, action, 'invalid-reason');
    }
    let outcome: ActionOutcome;
    try {
      // A viewer's request goes through too (with any text as its reason): the refusal is audited.
      outcome = await run(actor, isOperatorReason(reason) ? reason : '(no valid reason given)');
    } catch (error) {
      if (error instanceof OperationError) outcome = error.outcome;
      else if (error instanceof NotReplicatedError) outcome = 'not-replicated';
      else throw error;
    }
    request.log.info({ sequenceId, action, outcome, user: identity.name }, 'console action');
    if (outcome === 'forbidden')
      return reply.code(403).type('text/plain; charset=utf-8').send(`Forbidden: a ${identity.role} may not ${action}.`);
    return back(reply, sequenceId, action, outcome);
  }
}

/** See other: the transfer's page, with the action's outcome named in the query. */
function back(reply: FastifyReply, sequenceId: string, action: Action, outcome: string) {
  return reply.redirect(`${CONSOLE_PATH}/transfers/${encodeURIComponent(sequenceId)}?${new URLSearchParams({ action, outcome })}`, 303);
}

/** The line shown after an action, from the redirect's fixed names only (anything else: nothing). */
function outcomeLine(query: { action?: string; outcome?: string }): { action: Action; outcome: string; text: string } | undefined {
  const action = query.action as Action | undefined;
  const outcome = query.outcome ?? '';
  if (!action || !(action in ACTION_OUTCOMES)) return undefined;
  if (outcome in FORM_PROBLEMS) return { action, outcome, text: FORM_PROBLEMS[outcome as keyof typeof FORM_PROBLEMS] };
  if (!(ACTION_OUTCOMES[action] as readonly string[]).includes(outcome)) return undefined;
  return { action, outcome, text: `${action}: ${outcome}` };
}

function definedOnly(values: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter((entry): entry is [string, string] => entry[1] !== undefined));
}
