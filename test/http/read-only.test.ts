import { createRequire } from 'node:module';
import type { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

/**
 * Walks every route of Bull Board's own route table (read at run time from @bull-board/api, so a route
 * a later Bull Board adds is walked too) that is not a GET, on every queue of the worker, with real
 * job ids, job states and the real scheduler id, and expects a refusal and an unchanged Redis.
 */
interface BoardRoute {
  method: string;
  route: string;
}
const require = createRequire(import.meta.url);
const { appRoutes } = require('@bull-board/api/dist/routes.js') as { appRoutes: { api: BoardRoute[] } };
const MUTATING = appRoutes.api.filter((route) => route.method.toUpperCase() !== 'GET');

const JOB_STATES = ['completed', 'failed', 'delayed', 'waiting', 'active', 'prioritized', 'waiting-children'] as const;
/** Bodies that would be valid if the route ran (so a refusal is the guard's, not a validation error). */
const BODIES: Record<string, unknown> = {
  add: { name: 'intruder', data: { sequenceId: 'intruder' }, options: {} },
  'update-data': { data: { sequenceId: 'rewritten' } },
  concurrency: { concurrency: 1 },
  'rate-limit': { max: 1, duration: 1000 },
  delay: { delay: 60_000 },
  priority: { priority: 5 },
};

interface Snapshot {
  paused: boolean;
  counts: Record<string, number>;
  schedulers: string[];
  jobs: Record<string, { state: string; data: string; priority: number; delay: number } | null>;
  concurrency: number | null;
}

async function snapshot(queue: Queue, jobIds: string[]): Promise<Snapshot> {
  const jobs: Snapshot['jobs'] = {};
  for (const id of jobIds) {
    const job = await queue.getJob(id);
    jobs[id] = job ? { state: await job.getState(), data: JSON.stringify(job.data), priority: job.priority, delay: job.delay } : null;
  }
  return {
    paused: await queue.isPaused(),
    counts: await queue.getJobCounts(...JOB_STATES),
    schedulers: (await queue.getJobSchedulers()).map((scheduler) => scheduler.key).sort(),
    jobs,
    concurrency: await queue.getGlobalConcurrency(),
  };
}

/** The full paths of a Fastify route tree as printRoutes draws it (each level indented by four columns). */
function routePaths(tree: string): string[] {
  const stack: string[] = [];
  const paths: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length / 4;
    stack.length = depth;
    stack.push(match[2]!);
    if (match[3] !== undefined) paths.push(stack.join(''));
  }
  return paths;
}

function expand(route: string, queue: string, jobId: string): string[] {
  const base = route.replace(':queueName', queue).replace(':jobId', encodeURIComponent(jobId)).replace(':schedulerId', QueueName.RECONCILE);
  return base.includes(':queueStatus') ? JOB_STATES.map((state) => base.replace(':queueStatus', state)) : [base];
}

describe('dashboard read-only (the default)', () => {
  let h: Harness;
  let server: FastifyInstance;
  let base: string;
  const jobIds: Record<string, string[]> = {};
  const queues = () => h.app!.queues as Record<string, Queue>;

  beforeAll(async () => {
    h = await startHarness({ name: 'read-only' });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
    // Real jobs in every queue: a broadcast transfer (completed submit and track jobs) and the
    // reconcile scheduler's delayed job.
    const payload = samplePayload();
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);
    for (const [name, queue] of Object.entries(queues())) {
      const jobs = await queue.getJobs([...JOB_STATES]);
      jobIds[name] = jobs.map((job) => job.id!).filter(Boolean);
      expect(jobIds[name]!.length, `a job in ${name}`).toBeGreaterThan(0);
    }
    expect((await queues()[QueueName.RECONCILE]!.getJobSchedulers()).map((s) => s.key)).toContain(QueueName.RECONCILE);
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('Bull Board has mutating routes to walk (the table was read)', () => {
    expect(MUTATING.length).toBeGreaterThanOrEqual(20);
    expect(MUTATING.map((route) => route.route)).toContain('/api/queues/pause');
  });

  it('refuses every mutating route on every queue and leaves every queue, job and scheduler as it was', async () => {
    const before: Record<string, Snapshot> = {};
    for (const [name, queue] of Object.entries(queues())) before[name] = await snapshot(queue, jobIds[name]!);

    const answers: string[] = [];
    for (const route of MUTATING) {
      const body = BODIES[route.route.split('/').at(-1)!] ?? {};
      for (const queue of Object.keys(queues())) {
        for (const path of expand(route.route, queue, jobIds[queue]![0]!)) {
          const response = await fetch(`${base}/dashboard${path}`, {
            method: route.method.toUpperCase(),
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          if (response.status !== 403) answers.push(`${route.method.toUpperCase()} ${path}: ${response.status} ${await response.text()}`);
          else expect(await response.json()).toMatchObject({ error: 'READ_ONLY' });
        }
      }
    }
    expect(answers).toEqual([]);

    for (const [name, queue] of Object.entries(queues())) expect(await snapshot(queue, jobIds[name]!), name).toEqual(before[name]);
  });

  it("the server's own routes change nothing but through the operator actions (src/operations/, audited)", () => {
    // Every route that is not a GET (or HEAD), outside Bull Board's: read from Fastify's route tree.
    const all = ['POST', 'PUT', 'PATCH', 'DELETE'].flatMap((method) =>
      routePaths(server.printRoutes({ method, commonPrefix: false })).map((path) => `${method} ${path}`),
    );
    // The tree was read: Bull Board's own (refused above) are in it, nested under /dashboard.
    expect(all.filter((route) => route.includes(' /dashboard/api/queues/')).length).toBeGreaterThanOrEqual(10);
    expect(all.filter((route) => !route.includes(' /dashboard')).sort()).toEqual(
      [
        'POST /transfers/:sequenceId/cancel',
        'POST /api/v1/transfers/:sequenceId/cancel',
        'POST /api/v1/transfers/:sequenceId/resolve',
        'POST /api/v1/transfers/:sequenceId/recheck',
        'POST /api/v1/ledger/accept-epoch',
        'POST /console/transfers/:sequenceId/cancel',
        'POST /console/transfers/:sequenceId/resolve',
      ].sort(),
    );
  });

  it('tells the UI that every queue is read-only', async () => {
    const { queues: listed } = (await (await fetch(`${base}/dashboard/api/queues`)).json()) as {
      queues: Array<{ name: string; readOnlyMode: boolean; allowRetries: boolean }>;
    };
    expect(listed.map((queue) => queue.name).sort()).toEqual([QueueName.RECONCILE, QueueName.SUBMIT, QueueName.TRACK].sort());
    for (const queue of listed)
      expect({ name: queue.name, readOnly: queue.readOnlyMode, retries: queue.allowRetries }).toEqual({
        name: queue.name,
        readOnly: true,
        retries: false,
      });
  });
});

describe('dashboard with DASHBOARD_READ_ONLY=false (the control: the walk above can fail)', () => {
  let h: Harness;
  let server: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    h = await startHarness({ name: 'read-write', env: { DASHBOARD_READ_ONLY: 'false' } });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('pauses and resumes every queue, and removes the reconcile schedule', async () => {
    const queues = Object.values(h.app!.queues) as Queue[];
    expect((await fetch(`${base}/dashboard/api/queues/pause`, { method: 'PUT' })).status).toBe(200);
    for (const queue of queues) expect(await queue.isPaused(), queue.name).toBe(true);
    expect((await fetch(`${base}/dashboard/api/queues/resume`, { method: 'PUT' })).status).toBe(200);
    for (const queue of queues) expect(await queue.isPaused(), queue.name).toBe(false);
    const remove = await fetch(`${base}/dashboard/api/queues/${QueueName.RECONCILE}/job-schedulers/${QueueName.RECONCILE}/remove`, {
      method: 'PUT',
    });
    expect(remove.status).toBeLessThan(300);
    expect(await h.app!.queues[QueueName.RECONCILE].getJobSchedulers()).toEqual([]);
  });
});
