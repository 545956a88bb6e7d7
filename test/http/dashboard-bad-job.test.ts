/**
 * One job whose stored `data` is not JSON (written straight into its hash, as a buggy producer in any
 * language, or someone with Redis access, could) must not take its queue's board down: Bull Board's
 * API answers every view of the queue, the bad job with a placeholder for its data, the others as they are.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { UNREADABLE_JOB_DATA } from '../../src/http/job-view.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

interface ListedJob {
  id: string;
  data: unknown;
}
interface QueuesBody {
  queues: Array<{ name: string; jobs: ListedJob[] }>;
}

describe('dashboard with a job whose data is not JSON', () => {
  let h: Harness;
  let server: FastifyInstance;
  const queueName = QueueName.SUBMIT;
  beforeAll(async () => {
    // Paused queues: the jobs stay waiting and no handler touches them.
    h = await startHarness({ name: 'dashboard-bad-job', worker: false });
    await h.startWorker();
    for (const queue of Object.values(h.app!.queues)) await queue.pause();
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });

    const queue = h.app!.queues[queueName];
    await queue.add(queueName, { good: 'first' }, { jobId: 'good-1' });
    const bad = await queue.add(queueName, { placeholder: true }, { jobId: 'bad-job' });
    await queue.add(queueName, { good: 'second' }, { jobId: 'good-2' });
    await h.redis.hset(`${h.prefix}:${queueName}:${bad.id}`, 'data', '{not json');
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  const get = (url: string) => server.inject({ method: 'GET', url: `/dashboard${url}` });

  it.each(['waiting', 'latest', ''])('lists the queue (status %j): 200, the good jobs as they are, the bad one marked', async (status) => {
    const query = status ? `&status=${status}` : '';
    const response = await get(`/api/queues?activeQueue=${queueName}${query}&page=1&jobsPerPage=10`);
    expect(response.statusCode, response.body.slice(0, 300)).toBe(200);
    const queue = (response.json() as QueuesBody).queues.find((q) => q.name === queueName);
    expect(queue).toBeDefined();
    const byId = new Map(queue!.jobs.map((job) => [job.id, job.data]));
    expect(byId.get('good-1')).toEqual({ good: 'first' });
    expect(byId.get('good-2')).toEqual({ good: 'second' });
    expect(byId.get('bad-job')).toEqual(UNREADABLE_JOB_DATA);
  });

  it('shows the bad job, its logs and its flow, and the good jobs: 200', async () => {
    const bad = await get(`/api/queues/${queueName}/bad-job`);
    expect(bad.statusCode, bad.body.slice(0, 300)).toBe(200);
    expect((bad.json() as { job: ListedJob; status: string }).job).toMatchObject({ id: 'bad-job', data: UNREADABLE_JOB_DATA });
    expect((bad.json() as { status: string }).status).toBe('waiting');
    for (const url of [`/api/queues/${queueName}/bad-job/logs`, `/api/queues/${queueName}/bad-job/flow`]) {
      const response = await get(url);
      expect(response.statusCode, `${url}: ${response.body.slice(0, 300)}`).toBe(200);
    }
    const good = await get(`/api/queues/${queueName}/good-1`);
    expect(good.statusCode, good.body.slice(0, 300)).toBe(200);
    expect((good.json() as { job: ListedJob }).job.data).toEqual({ good: 'first' });
  });

  it('still answers 404 for a job that does not exist', async () => {
    expect((await get(`/api/queues/${queueName}/no-such-job`)).statusCode).toBe(404);
  });
});
