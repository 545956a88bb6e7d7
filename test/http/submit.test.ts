/**
 * `POST /api/v1/transfers` (src/http/api-v1/submit.ts) on a real server on 127.0.0.1, a real worker,
 * Redis and simulator: key, body limit, validation before enqueueing, idempotency by sequenceId, the
 * rate limit per key; and the worker's side, a second job with another payload for a used sequenceId.
 */
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import { parseSubmitPayload } from '../../packages/producer/src/payload.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { payloadHash } from '../../src/transfers/payload-hash.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { OpenApiDocument } from '../helpers/openapi.ts';
import { until } from '../helpers/wait.ts';

const KEY = 'sk_test_producer_key_0123456789';
const OTHER_KEY = 'sk_test_other_key_9876543210';
// The answers' shapes are what the assertions check.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

let h: Harness;
let server: FastifyInstance;
let limited: FastifyInstance;
let off: FastifyInstance;
let base: string;
let queue: Queue;
/** Every answer of `submit` is checked against the server's own /openapi.json. */
let document: OpenApiDocument;

beforeAll(async () => {
  const apiKeys = `billing:${await hashSecret(KEY)},ops:${await hashSecret(OTHER_KEY)}`;
  h = await startHarness({ name: 'api-v1-submit', env: { SUBMIT_API_KEYS: apiKeys } });
  const logger = createLogger({ level: 'silent' });
  const deps = { app: h.app!, config: h.config, logger, metrics: h.app!.metrics };
  server = await createHttpServer(deps);
  base = await server.listen({ host: '127.0.0.1', port: 0 });
  limited = await createHttpServer({ ...deps, submitRateLimit: { max: 2, timeWindowMs: 60_000 } });
  await limited.listen({ host: '127.0.0.1', port: 0 });
  off = await createHttpServer({ ...deps, config: { ...h.config, submit: { ...h.config.submit, apiKeys: [] } } });
  await off.listen({ host: '127.0.0.1', port: 0 });
  queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
  // The API has no console users here: a loopback peer is the local operator.
  document = await OpenApiDocument.fetch(base, {});
});
afterAll(async () => {
  await Promise.all([server?.close(), limited?.close(), off?.close()]);
  await queue?.close();
  await h?.close();
});

function urlOf(instance: FastifyInstance): string {
  const address = instance.server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening');
  return `http://127.0.0.1:${address.port}`;
}

async function submit(body: unknown, { key = KEY, to = base }: { key?: string | null; to?: string } = {}) {
  const response = await fetch(`${to}/api/v1/transfers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  const answer = { status: response.status, headers: response.headers, body: (text === '' ? null : JSON.parse(text)) as Json };
  if (to !== urlOf(off)) document.expectAnswer('POST', '/api/v1/transfers', answer);
  return answer;
}

const nothingStoredFor = async (sequenceId: string) => {
  expect(await queue.getJob(jobIdFor(sequenceId))).toBeUndefined();
  expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();
};

describe('POST /api/v1/transfers', () => {
  it('answers a new transfer 202 with its job id and Location, the same payload again 200 with the same job id', async () => {
    const payload = samplePayload({ metadata: { orderId: 'A-1' } });
    const sequenceId = payload.halfSigned.sequenceId;
    const first = await submit(payload);
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ sequenceId, jobId: jobIdFor(sequenceId) });
    expect(first.headers.get('location')).toBe(`/api/v1/transfers/${sequenceId}`);

    // Keys in another order and the walletId as text: the same payload once parsed.
    const reordered = {
      metadata: payload.metadata,
      halfSigned: payload.halfSigned,
      txHex: payload.txHex,
      coin: payload.coin,
      walletId: String(payload.walletId),
    };
    const again = await submit(reordered);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ sequenceId, jobId: first.body.jobId });

    await h.producer.waitForTerminal(sequenceId, 15_000);
    const later = await submit(payload);
    expect(later.status).toBe(200);
    expect(later.body).toMatchObject({ sequenceId, jobId: first.body.jobId, state: 'broadcast' });
    expect(Array.isArray(later.body.timeline)).toBe(true);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    const parsed = parseSubmitPayload(payload);
    expect((await h.app!.ledger.get(sequenceId))?.payloadHash).toBe(parsed.ok && payloadHash(parsed.payload));
  });

  it('answers another payload under a used sequenceId 409 SEQUENCE_ID_CONFLICT, before and after the record exists', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    expect((await submit(payload)).status).toBe(202);
    const other = samplePayload({ sequenceId, coin: 'btc' });
    const early = await submit(other);
    expect(early.status).toBe(409);
    expect(early.body).toMatchObject({ code: 'SEQUENCE_ID_CONFLICT' });
    await h.producer.waitForTerminal(sequenceId, 15_000);
    const late = await submit(other);
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: 'SEQUENCE_ID_CONFLICT' });
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('answers an invalid payload 422 with its issues and enqueues nothing', async () => {
    const payload = samplePayload({ coin: 'NOT A COIN' });
    const answer = await submit(payload);
    expect(answer.status).toBe(422);
    expect(answer.body.issues).toEqual([expect.objectContaining({ path: 'coin' })]);
    await nothingStoredFor(payload.halfSigned.sequenceId);
  });

  it('answers 401 without a key or with a wrong one, and stores nothing', async () => {
    const payload = samplePayload();
    expect((await submit(payload, { key: null })).status).toBe(401);
    expect((await submit(payload, { key: 'sk_not_a_configured_key' })).status).toBe(401);
    expect((await submit(payload, { key: OTHER_KEY })).status).toBe(202);
    await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);
    const refused = samplePayload();
    expect((await submit(refused, { key: `${KEY}x` })).status).toBe(401);
    await nothingStoredFor(refused.halfSigned.sequenceId);
  });

  it('answers a body over the limit 413 and stores nothing', async () => {
    const payload = samplePayload();
    const answer = await submit({ ...payload, padding: 'a'.repeat(5 * 1024 * 1024) });
    expect(answer.status).toBe(413);
    await nothingStoredFor(payload.halfSigned.sequenceId);
  });

  it('limits the rate per key: 429 with Retry-After, another key still served', async () => {
    const to = urlOf(limited);
    expect((await submit(samplePayload(), { to })).status).toBe(202);
    expect((await submit(samplePayload(), { to })).status).toBe(202);
    const refused = samplePayload();
    const answer = await submit(refused, { to });
    expect(answer.status).toBe(429);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
    await nothingStoredFor(refused.halfSigned.sequenceId);
    expect((await submit(samplePayload(), { to, key: OTHER_KEY })).status).toBe(202);
  });

  it('is off (404) when SUBMIT_API_KEYS is unset', async () => {
    expect((await submit(samplePayload(), { to: urlOf(off) })).status).toBe(404);
  });
});

describe('a second job with another payload for a used sequenceId', () => {
  it('is never sent, publishes nothing and is counted', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000);
    const eventsBefore = await h.eventsOf(sequenceId);
    const conflicts = async () => (await h.app!.metrics.payloadConflicts.get()).values[0]?.value ?? 0;
    const before = await conflicts();

    const other = samplePayload({ sequenceId, coin: 'btc' });
    const job = await queue.add(QueueName.SUBMIT, other, { jobId: `other-${sequenceId}` });
    await until('the conflicting job completed', 15_000, async () => ((await job.getState()) === 'completed' ? true : undefined));

    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect(await h.eventsOf(sequenceId)).toEqual(eventsBefore);
    expect(await conflicts()).toBe(before + 1);
    // The same payload under another job id is a plain duplicate, not a conflict.
    const same = await queue.add(QueueName.SUBMIT, payload, { jobId: `same-${sequenceId}` });
    await until('the duplicate job completed', 15_000, async () => ((await same.getState()) === 'completed' ? true : undefined));
    expect(await conflicts()).toBe(before + 1);
  });
});

// The pre-record hash key is the route's own: named under the prefix (one Cluster slot with the rest).
it('keeps the pre-record hash under the queue prefix', () => {
  expect(createKeys('{wtx}', 'e').submittedPayloadHash('s1').startsWith('{wtx}:')).toBe(true);
});
