/**
 * BitGo's `transfer` webhook as a wake-up for tracking (src/http/provider-wakeups.ts), end to end: the
 * real worker with its HTTP server, real Redis, the BitGo simulator over HTTP calling the registered
 * webhook. Polls are 10 minutes apart, so only the wake-up can explain a broadcast within the test. A
 * forged call is refused (401) and polls nothing; unknown, duplicate and untracked calls are answered
 * 200, counted and ignored.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { FAST_ENV } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';

const WEBHOOK_SECRET = 'test-bitgo-webhook-secret-0123456789';
const hexId = () => randomBytes(16).toString('hex');

let sim: BitgoSimulator;
let app: App;
let server: FastifyInstance;
let base: string;
let redis: Redis;
let producer: TransferProducer;
let trackQueue: Queue;

beforeAll(async () => {
  // No txid until the test sets it; a transfer needs no approval, so the send's answer names its transfer id.
  sim = await startBitgoSimulator({ port: 0, webhookSecret: WEBHOOK_SECRET, settings: { approvalAfterMs: 0, txidAfterMs: 3_600_000 } });
  const prefix = uniquePrefix('bitgo-wakeups');
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: prefix,
    ...workerBitgoEnv(sim),
    BITGO_WEBHOOK_SECRET: WEBHOOK_SECRET,
    HTTP_PORT: '0',
    ...FAST_ENV,
    // Ten minutes between polls: a broadcast within the test is the wake-up's doing.
    TRACK_POLL_MIN: '10m',
    TRACK_POLL_MAX: '10m',
  });
  app = await createApp(config, createLogger({ level: config.log.level }));
  server = await createHttpServer({ app, config, logger: createLogger({ level: 'silent' }), metrics: app.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
  redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });
  trackQueue = new Queue(QueueName.TRACK, { connection: redis, prefix });
});
afterAll(async () => {
  await trackQueue?.close();
  await server?.close();
  await app?.close();
  await producer?.close();
  await redis?.quit();
  await sim?.close();
});

const polls = () => sim.stats().requests.transferBySequenceId['200'] ?? 0;
const webhooks = async (outcome: string) =>
  (await app.metrics.registry.getSingleMetric('custody_provider_webhooks_total')?.get())?.values.find(
    (v) => v.labels.provider === 'bitgo' && v.labels.outcome === outcome,
  )?.value ?? 0;

async function call(body: string, signature: string | undefined) {
  const res = await fetch(`${base}/providers/bitgo/webhook`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(signature === undefined ? {} : { 'x-signature-sha256': signature }) },
    body,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
const sign = (body: string) => createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex');

/** A transfer submitted, its tracking job waiting ten minutes for its first poll. */
async function submittedAndWaiting() {
  const payload = samplePayload({ walletId: hexId(), coin: 'tbtc' });
  const sequenceId = payload.halfSigned.sequenceId;
  await producer.submit(payload);
  await producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
  await until('the tracking job delayed', 5_000, async () =>
    (await (await trackQueue.getJob(trackJobId(sequenceId)))?.getState()) === 'delayed' ? true : undefined,
  );
  return { payload, sequenceId, transferId: sim.transfer(sequenceId)!.id };
}

describe('POST /providers/bitgo/webhook', () => {
  it('a forged call is answered 401, counted, and polls nothing', async () => {
    const { transferId, sequenceId } = await submittedAndWaiting();
    const before = { polls: polls(), forged: await webhooks('forged') };
    const body = JSON.stringify({ type: 'transfer', wallet: 'w', coin: 'tbtc', transfer: transferId, hash: '', state: 'signed' });
    expect((await call(body, createHmac('sha256', 'another-secret-entirely').update(body).digest('hex'))).status).toBe(401);
    expect((await call(body, undefined)).status).toBe(401);
    expect((await call(body, 'zz')).status).toBe(401);
    expect(await webhooks('forged')).toBe(before.forged + 3);
    expect(await (await trackQueue.getJob(trackJobId(sequenceId)))!.getState()).toBe('delayed');
    expect(polls()).toBe(before.polls);
  });

  it("the simulator's signed call when the txid shows wakes exactly one poll, and the transfer is broadcast", async () => {
    const { payload, sequenceId } = await submittedAndWaiting();
    const registered = await fetch(`${sim.apiBase}/${payload.coin}/wallet/${payload.walletId}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${sim.accessToken}` },
      body: JSON.stringify({ type: 'transfer', url: `${base}/providers/bitgo/webhook` }),
    });
    expect(registered.status).toBe(200);
    const before = { polls: polls(), accepted: await webhooks('accepted') };
    sim.setTxid(sequenceId);
    const broadcast = await producer.waitForTerminal(sequenceId, 15_000);
    expect(broadcast.event).toBe('transfer.broadcast');
    expect(polls()).toBe(before.polls + 1);
    expect(await webhooks('accepted')).toBe(before.accepted + 1);
  });

  it('unknown, duplicate and untracked calls are answered 200, counted and ignored', async () => {
    const before = {
      unknown: await webhooks('unknown'),
      duplicate: await webhooks('duplicate'),
      ignored: await webhooks('ignored'),
      polls: polls(),
    };
    const unknown = JSON.stringify({
      type: 'transfer',
      wallet: hexId(),
      coin: 'tbtc',
      transfer: hexId(),
      hash: 'ab'.repeat(32),
      state: 'confirmed',
    });
    expect(await call(unknown, sign(unknown))).toEqual({ status: 200, body: { outcome: 'unknown' } });
    expect(await call(unknown, sign(unknown))).toEqual({ status: 200, body: { outcome: 'duplicate' } });
    const notTransfer = JSON.stringify({ type: 'block', hash: 'cd'.repeat(32) });
    expect(await call(notTransfer, sign(notTransfer))).toEqual({ status: 200, body: { outcome: 'unknown' } });

    // A transfer that ended (broadcast) is not tracked any more: nothing to wake.
    const { sequenceId, transferId } = await submittedAndWaiting();
    sim.setTxid(sequenceId);
    const woke = JSON.stringify({ type: 'transfer', transfer: transferId, hash: '', state: 'signed' });
    expect(await call(woke, sign(woke))).toEqual({ status: 200, body: { outcome: 'accepted' } });
    expect((await producer.waitForTerminal(sequenceId, 15_000)).event).toBe('transfer.broadcast');
    const late = JSON.stringify({ type: 'transfer', transfer: transferId, hash: sim.transfer(sequenceId)!.txid, state: 'confirmed' });
    expect(await call(late, sign(late))).toEqual({ status: 200, body: { outcome: 'ignored' } });

    expect(await webhooks('unknown')).toBe(before.unknown + 2);
    expect(await webhooks('duplicate')).toBe(before.duplicate + 1);
    expect(await webhooks('ignored')).toBe(before.ignored + 1);
    // The one poll is the accepted call's.
    expect(polls()).toBe(before.polls + 1);
  });
});
