/**
 * `GET /transfers/:sequenceId` shows a transfer's `metadata` (echoed in each of its events) as the
 * dashboard shows a job's: only the values of DASHBOARD_METADATA_KEYS, and of those only scalars; an
 * object under an allowed key keeps its keys with every value `[redacted]`.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const SECRETS = ['person@example.org', 'desk-secret-note', 'desk-display-name', 'list-secret'];
const METADATA = {
  orderId: 'order-visible-1',
  email: 'person@example.org',
  desk: { name: 'desk-display-name', secretNote: 'desk-secret-note' },
  tags: ['list-secret'],
};
const SHOWN = {
  orderId: 'order-visible-1',
  email: '[redacted]',
  desk: { name: '[redacted]', secretNote: '[redacted]' },
  tags: ['[redacted]'],
};

describe('/transfers/:sequenceId and DASHBOARD_METADATA_KEYS', () => {
  let h: Harness;
  let server: FastifyInstance;
  beforeAll(async () => {
    h = await startHarness({ name: 'transfer-metadata', env: { DASHBOARD_METADATA_KEYS: 'orderId,desk,tags' } });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('redacts metadata in the embedded events as the board does in the job', async () => {
    const payload = samplePayload({ metadata: METADATA });
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 10_000);

    const response = await server.inject({ method: 'GET', url: `/transfers/${sequenceId}` });
    expect(response.statusCode, response.body.slice(0, 300)).toBe(200);
    const body = response.json() as { state: string; events: Array<{ event: string; metadata: unknown }> };
    expect(body.state).toBe('broadcast');
    expect(body.events.length).toBeGreaterThan(0);
    for (const event of body.events) expect(event.metadata, event.event).toEqual(SHOWN);
    for (const secret of SECRETS) expect(response.body).not.toContain(secret);
    // The events themselves still carry the metadata as given: only the view redacts it.
    expect((await h.eventsOf(sequenceId))[0]!.metadata).toEqual(METADATA);

    // The board shows the job's metadata the same way.
    const list = await server.inject({
      method: 'GET',
      url: `/dashboard/api/queues?activeQueue=${QueueName.SUBMIT}&status=completed&page=1&jobsPerPage=50`,
    });
    expect(list.statusCode, list.body.slice(0, 300)).toBe(200);
    const jobs = (list.json() as { queues: Array<{ name: string; jobs: Array<{ data: unknown }> }> }).queues.find(
      (queue) => queue.name === QueueName.SUBMIT,
    )!.jobs;
    const job = jobs.find((candidate) => JSON.stringify(candidate.data).includes(sequenceId));
    expect(job, 'the submit job on the board').toBeDefined();
    expect((job!.data as { metadata: unknown }).metadata).toEqual(SHOWN);
    for (const secret of SECRETS) expect(list.body).not.toContain(secret);
  });
});
