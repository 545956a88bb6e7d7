import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../app.ts';
import { boundedCopyWithoutUser } from './bounded-copy.ts';
import { redactJobData } from './job-view.ts';

export const DASHBOARD_PATH = '/dashboard';

/**
 * A `<link>` to a stylesheet on another host: Bull Board's page template (@bull-board/ui dist/index.ejs)
 * hard-codes one to Google Fonts (IBM Plex), and no option of @bull-board/api or @bull-board/fastify
 * removes it (`uiConfig` only sets the theme's font names; `uiBasePath` would mean a copy of the whole UI).
 * Absolute (`http(s)://`) and protocol-relative (`//host`) hrefs; links within the server stay.
 */
const EXTERNAL_LINK = /[ \t]*<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?\/\/[^>]*>[ \t]*\n?/gi;

/**
 * The page without its links to other hosts: the dashboard is an internal console that must load offline
 * and call out to no third party. Without the web fonts the CSS falls back to the system's (`system-ui`, `ui-monospace`).
 */
function withoutExternalLinks(html: string): string {
  return html.replace(EXTERNAL_LINK, '');
}

/** Methods that only read. Every Bull Board route that changes anything uses another (PUT, POST, PATCH). */
const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * Bull Board over every queue of the worker. Read-only (docs/contract.md section 5) unless
 * DASHBOARD_READ_ONLY=false, enforced twice: each queue's adapter is read-only (Bull Board hides the
 * buttons and refuses its per-queue actions), and this scope answers 403 to any request that is not a
 * read before Bull Board sees it, so the global routes (`PUT /api/queues/pause` pauses every queue)
 * and any route a later Bull Board adds are refused too. Job data and return values are shown bounded
 * and without any `user` object; in job data, `travelRule` values and every `metadata` value whose key
 * is not in `metadataKeys` (DASHBOARD_METADATA_KEYS) are shown as `[redacted]` (job-view.ts).
 */
export async function registerDashboard(
  server: FastifyInstance,
  app: App,
  readOnly: boolean,
  metadataKeys: readonly string[],
): Promise<void> {
  const adapter = new FastifyAdapter();
  adapter.setBasePath(DASHBOARD_PATH);
  const queues = Object.entries(app.queues).map(([name, queue]) => {
    const board = new BullMQAdapter(queue, { readOnlyMode: readOnly, allowRetries: !readOnly, displayName: name });
    board.setFormatter('data', (data) => boundedCopyWithoutUser(redactJobData(data, metadataKeys)));
    board.setFormatter('returnValue', (value) => boundedCopyWithoutUser(value));
    return board;
  });
  createBullBoard({ queues, serverAdapter: adapter, options: { uiConfig: { boardTitle: 'custody worker' } } });

  await server.register(async (scope) => {
    if (readOnly) {
      scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
        if (READ_METHODS.has(request.method)) return;
        return reply
          .code(403)
          .send({ error: 'READ_ONLY', message: 'the dashboard is read-only (DASHBOARD_READ_ONLY=false allows changes)' });
      });
    }
    // Every page of Bull Board is the same template, served by its entry routes as text/html.
    scope.addHook('onSend', async (_request, reply, payload) => {
      if (typeof payload !== 'string' || !/^text\/html\b/i.test(String(reply.getHeader('content-type') ?? ''))) return payload;
      return withoutExternalLinks(payload);
    });
    await scope.register(adapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  });
}
