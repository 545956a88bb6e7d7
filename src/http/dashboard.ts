import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import { Job, type Queue } from 'bullmq';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../app.ts';
import { boundedCopyWithoutUser } from './bounded-copy.ts';
import { requireRole } from './access/identity.ts';
import { redactJobData, UNREADABLE_JOB_DATA } from './job-view.ts';

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

type AdapterOptions = NonNullable<ConstructorParameters<typeof BullMQAdapter>[1]>;
type BoardStatuses = Parameters<BullMQAdapter['getJobs']>[0];

/**
 * Bull Board's BullMQ adapter, except that a job whose stored `data` is not JSON does not break its
 * queue's views. BullMQ throws reading such a job (Job.fromJSON parses the data), and Queue#getJobs
 * reads a page of jobs all or nothing, so one such job made every list of its queue answer 500 (the UI
 * then says "Queue Not found"). Here the job is read again without its data (the queue's
 * `getBackend().getJobData`, then `Job.fromJSON`) and shown with UNREADABLE_JOB_DATA as its data; a
 * page that fails so is read job by job (Queue#getRanges, then this getJob). Only a SyntaxError is
 * handled: any other error (Redis down) still fails the request. A job whose other stored fields
 * (`opts`, `progress`, `parent`) are not JSON is not readable this way either and still fails.
 */
class TolerantBullMQAdapter extends BullMQAdapter {
  readonly #queue: Queue;

  constructor(queue: Queue, options: Partial<AdapterOptions>) {
    super(queue, options);
    this.#queue = queue;
  }

  override async getJob(id: string): Promise<Job | undefined> {
    try {
      return await this.#queue.getJob(id);
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      const stored = await this.#queue.getBackend().getJobData(id);
      if (!stored) return undefined;
      return Job.fromJSON(this.#queue, { ...stored, data: JSON.stringify(UNREADABLE_JOB_DATA) }, id);
    }
  }

  override async getJobs(statuses: BoardStatuses, start = 0, end = -1): Promise<Job[]> {
    try {
      return await super.getJobs(statuses, start, end);
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      // BullMQ 6 has no paused state (a paused queue's jobs are waiting): the adapter never asks for it.
      const types = statuses.filter((status) => status !== 'paused');
      const ids = await this.#queue.getRanges(types, start, end);
      const jobs = await Promise.all(ids.map((id) => this.getJob(id)));
      return jobs.filter((job) => job !== undefined);
    }
  }
}

/** Methods that only read. Every Bull Board route that changes anything uses another (PUT, POST, PATCH). */
const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * Bull Board over every queue of the worker. Read-only (docs/contract.md section 5) unless
 * DASHBOARD_READ_ONLY=false, enforced twice: each queue's adapter is read-only (Bull Board hides the
 * buttons and refuses its per-queue actions), and this scope answers 403 to any request that is not a
 * read before Bull Board sees it, so the global routes (`PUT /api/queues/pause` pauses every queue)
 * and any route a later Bull Board adds are refused too. Job data and return values are shown bounded
 * and without any `user` object; in job data, `travelRule` values and every `metadata` value but the
 * scalars of the keys in `metadataKeys` (DASHBOARD_METADATA_KEYS) are shown as `[redacted]`
 * (job-view.ts). A job whose data is not JSON is shown with a placeholder (TolerantBullMQAdapter).
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
    const board = new TolerantBullMQAdapter(queue, { readOnlyMode: readOnly, allowRetries: !readOnly, displayName: name });
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
    // Viewers read; a change (only with DASHBOARD_READ_ONLY=false, refused above otherwise) needs an operator.
    const viewer = requireRole('viewer');
    const operator = requireRole('operator');
    scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) =>
      READ_METHODS.has(request.method) ? viewer(request, reply) : operator(request, reply),
    );
    // Every page of Bull Board is the same template, served by its entry routes as text/html.
    scope.addHook('onSend', async (_request, reply, payload) => {
      if (typeof payload !== 'string' || !/^text\/html\b/i.test(String(reply.getHeader('content-type') ?? ''))) return payload;
      return withoutExternalLinks(payload);
    });
    await scope.register(adapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  });
}
