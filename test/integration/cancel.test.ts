/**
 * Cancel before send (docs/contract.md section 4) through the whole worker, against the simulator over
 * HTTP: a cancel that takes effect means no send of that sequenceId, ever, by any job; one that comes
 * after a send was in flight changes nothing. The HTTP route and the CLI each once.
 */
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { killAllClis, runCli } from '../helpers/cli-process.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { sleep } from '../helpers/wait.ts';
import { completedReturnValue } from '../helpers/jobs.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const REASON = 'duplicate of order A-1001, ticket OPS-77';
const USER = 'ops-desk';
const PASSWORD = 'cancel-test-password';

let h: Harness;
let submitQueue: Queue;
let server: FastifyInstance;
let base: string;

beforeAll(async () => {
  // Broadcast only when a test sets the txid: a submitted transfer stays submitted meanwhile.
  h = await startHarness({
    name: 'cancel',
    sim: { settings: { txidAfterMs: 24 * 3_600_000 } },
    env: { DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD },
  });
  submitQueue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await killAllClis();
  await server?.close();
  await submitQueue?.close();
  await h?.close();
});

const sends = (sequenceId: string) => h.sim.stats().sends[sequenceId]?.accepted ?? 0;

const completed = (jobId: string) => completedReturnValue(submitQueue, jobId);

describe('a cancel that takes effect: no send, ever', () => {
  it('(a) cancelled while its job waits (the queue paused): transfer.cancelled, the job completes without a send', async () => {
    const payload = samplePayload({ metadata: { orderId: 'A-1001' } });
    const sequenceId = payload.halfSigned.sequenceId;
    await submitQueue.pause();
    try {
      const jobId = await h.producer.submit(payload);
      await sleep(200);
      expect(await (await submitQueue.getJob(jobId))!.getState()).toBe('waiting');
      expect(await h.app!.ledger.cancel(sequenceId, { reason: REASON, by: 'producer' })).toMatchObject({
        outcome: 'cancelled',
        state: 'cancelled',
        version: 1,
      });
      await submitQueue.resume();
      expect(await completed(jobId)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled', version: 1 } });
    } finally {
      await submitQueue.resume();
    }
    const events = await h.eventsOf(sequenceId);
    // Never seen by the worker when cancelled: walletId, coin and metadata are empty.
    expect(events).toMatchObject([
      { event: 'transfer.cancelled', version: 1, walletId: '', coin: '', metadata: null, data: { reason: REASON, by: 'producer' } },
    ]);
    expect(sends(sequenceId)).toBe(0);
    expect(h.sim.transfer(sequenceId)).toBeUndefined();
    // The producer's waitForTerminal knows it as terminal; trySubmit says it ended.
    expect((await h.producer.waitForTerminal(sequenceId, 1_000)).event).toBe('transfer.cancelled');
    expect(await h.producer.trySubmit(payload)).toEqual({
      outcome: 'ended',
      sequenceId,
      ended: { event: 'transfer.cancelled', version: 1 },
    });
  });

  it('(b) a never-seen sequenceId cancelled, then enqueued under two job ids, also after RETENTION removed the record: no send, one event', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    expect(await h.app!.ledger.cancel(sequenceId, { reason: REASON, by: 'producer' })).toMatchObject({ outcome: 'cancelled' });

    const first = await h.producer.submit(payload);
    expect(await completed(first)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled', version: 1 } });
    const other = await submitQueue.add(QueueName.SUBMIT, payload, { jobId: `other-${sequenceId}` });
    expect(await completed(other.id!)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled' } });

    // RETENTION removed the record: the tombstone alone stops the next job.
    await h.redis.del(createKeys(h.prefix, h.config.queue.eventsStream).transfer(sequenceId));
    const late = await submitQueue.add(QueueName.SUBMIT, payload, { jobId: `late-${sequenceId}` });
    expect(await completed(late.id!)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled', version: 1 } });
    expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();

    expect((await h.eventsOf(sequenceId)).map((event) => [event.event, event.version])).toEqual([['transfer.cancelled', 1]]);
    expect(sends(sequenceId)).toBe(0);
  });
});

describe('a cancel that comes too late changes nothing', () => {
  it('(c) after submitted: too-late, and the transfer goes on to broadcast', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    expect(await h.app!.ledger.cancel(sequenceId, { reason: REASON, by: 'producer' })).toEqual({ outcome: 'too-late', state: 'submitted' });
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 15_000)).event).toBe('transfer.broadcast');
    expect((await h.eventsOf(sequenceId)).map((event) => event.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expect(sends(sequenceId)).toBe(1);
    expect(await h.app!.ledger.cancel(sequenceId, { reason: REASON, by: 'producer' })).toEqual({
      outcome: 'already-ended',
      state: 'broadcast',
    });
  });
});

// The longest test runs the CLI twice (two at a time), and waits for a submit (15 s) and a job (15 s).
describe('(d) the operator surfaces', { timeout: processesTimeout(2, 45_000) }, () => {
  const auth = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
  const post = (sequenceId: string, body: unknown, headers: Record<string, string> = { authorization: auth }) =>
    fetch(`${base}/transfers/${encodeURIComponent(sequenceId)}/cancel`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('POST /transfers/:sequenceId/cancel: Basic auth, a checked body, 200 {outcome, state}, counted', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    expect((await post(sequenceId, { reason: REASON }, {})).status).toBe(401);
    expect((await post('not a sequence id!', { reason: REASON })).status).toBe(400);
    for (const body of [{}, { reason: '' }, { reason: 'two\nlines' }, { reason: 'r'.repeat(257) }, { reason: 7 }, ['x'], 'text']) {
      const answer = await post(sequenceId, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(await answer.json()).toMatchObject({ error: 'INVALID_BODY' });
    }
    // Not JSON (what a form on another site could send): refused, nothing recorded.
    const form = await fetch(`${base}/transfers/${sequenceId}/cancel`, {
      method: 'POST',
      headers: { authorization: auth, 'content-type': 'text/plain' },
      body: REASON,
    });
    expect(form.status).toBe(400);
    expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();
    const counted = async () =>
      Number(/^custody_transfers_cancelled_total (\d+)/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1]);
    const before = await counted();

    const answer = await post(sequenceId, { reason: REASON });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ outcome: 'cancelled', state: 'cancelled', version: 1 });
    expect(await counted()).toBe(before + 1);
    const again = await post(sequenceId, { reason: REASON });
    expect(await again.json()).toEqual({ outcome: 'already-ended', state: 'cancelled' });
    expect(await counted()).toBe(before + 1);

    const jobId = await h.producer.submit(payload);
    expect(await completed(jobId)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled' } });
    expect(await h.eventsOf(sequenceId)).toMatchObject([
      { event: 'transfer.cancelled', version: 1, data: { reason: REASON, by: `http:${USER}` } },
    ]);
    expect(sends(sequenceId)).toBe(0);
  });

  it('custody-worker cancel: exit 0 cancelled, 5 already-ended, 4 too-late, 2 bad reason', async () => {
    const env = { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix };
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    const [cancelled, badReason] = await Promise.all([
      runCli(['cancel', sequenceId, '--reason', REASON, '--json'], { env }),
      runCli(['cancel', 'other-id', '--reason', ' ', '--json'], { env }),
    ]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({ sequenceId, outcome: 'cancelled', state: 'cancelled', version: 1 });
    expect(badReason.code).toBe(2);
    expect(await h.app!.ledger.get('other-id')).toBeUndefined();

    const submitted = samplePayload();
    await h.producer.submit(submitted);
    await h.producer.waitForTerminal(submitted.halfSigned.sequenceId, 15_000, new Set(['transfer.submitted']));
    const [ended, tooLate] = await Promise.all([
      runCli(['cancel', sequenceId, '--reason', REASON], { env }),
      runCli(['cancel', submitted.halfSigned.sequenceId, '--reason', REASON, '--json'], { env }),
    ]);
    expect(ended.code, ended.stderr).toBe(5);
    expect(ended.stdout).toMatch(/outcome\s+already-ended/);
    expect(ended.stdout).toMatch(/state\s+cancelled/);
    expect(tooLate.code, tooLate.stderr).toBe(4);
    expect(JSON.parse(tooLate.stdout)).toEqual({ sequenceId: submitted.halfSigned.sequenceId, outcome: 'too-late', state: 'submitted' });

    const jobId = await h.producer.submit(payload);
    expect(await completed(jobId)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled' } });
    expect(await h.eventsOf(sequenceId)).toMatchObject([{ event: 'transfer.cancelled', version: 1, data: { reason: REASON, by: 'cli' } }]);
    expect(sends(sequenceId)).toBe(0);
    expect(sends(submitted.halfSigned.sequenceId)).toBe(1);
  });

  it('custody-worker cancel with another RETENTION or EVENTS_STREAM than the worker recorded: exit 78 VERSION_MISMATCH, nothing written', async () => {
    const base = { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix };
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const [retention, stream] = await Promise.all([
      runCli(['cancel', sequenceId, '--reason', REASON, '--json'], { env: { ...base, RETENTION: '1d' } }),
      runCli(['cancel', sequenceId, '--reason', REASON, '--json'], { env: { ...base, EVENTS_STREAM: `${h.prefix}:elsewhere` } }),
    ]);
    expect(retention.code, retention.stderr).toBe(78);
    expect(JSON.parse(retention.stderr)).toMatchObject({
      error: { code: 'VERSION_MISMATCH', details: { fields: 'retentionMs,tombstoneTtlMs', recorded: true } },
    });
    expect(retention.stderr).toMatch(/retentionMs \(worker: \d+, here: 86400000\)/);
    expect(stream.code, stream.stderr).toBe(78);
    expect(JSON.parse(stream.stderr)).toMatchObject({ error: { code: 'VERSION_MISMATCH', details: { fields: 'eventsStream' } } });
    expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();
    expect(await h.app!.ledger.ended(sequenceId)).toBeUndefined();
    expect(await h.eventsOf(sequenceId)).toEqual([]);
  });
});
