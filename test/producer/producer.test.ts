/**
 * The typed producer (packages/producer, docs/contract.md sections 3 and 8) against a private Redis, the
 * simulator and the worker: the job id rule for every class of sequenceId docs/contract.md section 3 allows, one
 * transfer whatever job ids it arrives under, typed events, typed errors.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EnqueueError,
  InvalidPayloadError,
  jobIdFor,
  JOB_ID_PREFIX,
  ProducerClosedError,
  ProducerError,
  sequenceIdOfJobId,
  SUBMIT_TRANSACTION,
  TransferProducer,
  type TransferEvent,
} from '../../packages/producer/src/index.ts';
import { countBy, startHarness, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { testRedisUrl } from '../helpers/redis.ts';

/** One of every class of sequenceId docs/contract.md section 3 allows (1–128 of [A-Za-z0-9_-]), made unique per run. */
function sequenceIdClasses(): Record<string, string> {
  const n = String(Date.now()).slice(-9) + String(Math.floor(Math.random() * 1e6)).padStart(6, '0');
  const letters = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const tag = [...n].map((digit) => letters[Number(digit) * 5]!).join('');
  return {
    'all digits, integer-like': n.slice(0, 7) === '0000000' ? `1${n.slice(1)}` : n,
    'all digits with leading zeros': `000${n}`,
    'negative-integer-like': `-${n}`,
    'a single digit': String(Number(n) % 10),
    'dashes only': '-'.repeat(3 + (Number(n) % 50)),
    'underscores only': '_'.repeat(3 + (Number(n) % 50)),
    'dash and underscore mix': `_-${tag}-_`,
    'uuid-like': `a88a1846-b23d-${n.slice(0, 4)}-2344-${n.slice(4, 15).padEnd(12, '0')}`,
    '128 characters': `${tag}_${n}-`.padEnd(128, 'Zz9_-'),
  };
}

describe('the job id rule (jobIdFor)', () => {
  it('is "transfer-" + sequenceId: never integer-like, never a ":", for every valid sequenceId', () => {
    for (const sequenceId of Object.values(sequenceIdClasses())) {
      const jobId = jobIdFor(sequenceId);
      expect(jobId).toBe(`${JOB_ID_PREFIX}${sequenceId}`);
      // BullMQ's own tests (Job.validateOptions): integer-like ids and ':' are refused.
      expect(`${Number.parseInt(jobId, 10)}`).not.toBe(jobId);
      expect(jobId).not.toContain(':');
      expect(sequenceIdOfJobId(jobId)).toBe(sequenceId);
    }
    expect(sequenceIdOfJobId('1234567')).toBeUndefined();
    expect(sequenceIdOfJobId('transfer-')).toBeUndefined();
    expect(sequenceIdOfJobId('transfer-a:b')).toBeUndefined();
  });

  it('refuses what is not a sequenceId with the typed InvalidPayloadError', () => {
    for (const bad of ['', 'a:b', 'x'.repeat(129), 'é', 'a b']) {
      expect(() => jobIdFor(bad)).toThrow(InvalidPayloadError);
    }
  });
});

describe('TransferProducer with the worker', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'producer-pkg' });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('enqueues every class of sequenceId (integer-like, dashes, underscores, 128 chars) and each settles with transfer.broadcast', async () => {
    const classes = sequenceIdClasses();
    const payloads = Object.entries(classes).map(([name, sequenceId]) => ({ name, payload: samplePayload({ sequenceId }) }));
    const jobIds = await Promise.all(payloads.map(({ payload }) => h.producer.submit(payload)));
    expect(jobIds).toEqual(payloads.map(({ payload }) => jobIdFor(payload.halfSigned.sequenceId)));
    const outcomes = await Promise.all(payloads.map(({ payload }) => h.producer.waitForTerminal(payload.halfSigned.sequenceId, 20_000)));
    for (const [i, { name, payload }] of payloads.entries()) {
      const sequenceId = payload.halfSigned.sequenceId;
      expect(outcomes[i], name).toMatchObject({ event: 'transfer.broadcast', sequenceId });
      expect(h.sim.stats().sends[sequenceId], name).toEqual({ accepted: 1, duplicates: 0 });
      const job = await h.app!.queues[SUBMIT_TRANSACTION].getJob(jobIdFor(sequenceId));
      expect(job?.data.halfSigned.sequenceId, name).toBe(sequenceId);
    }
  });

  it('the same sequenceId through the producer and through a raw queue.add under another job id is one transfer', async () => {
    const payload = samplePayload({ sequenceId: String(Date.now()) });
    const sequenceId = payload.halfSigned.sequenceId;
    const raw = new Queue(SUBMIT_TRANSACTION, { connection: h.redis, prefix: h.prefix });
    try {
      await Promise.all([h.producer.submit(payload), raw.add(SUBMIT_TRANSACTION, payload, { jobId: `other-id-${sequenceId}` })]);
      const outcome = await h.producer.waitForTerminal(sequenceId, 15_000);
      expect(outcome.event).toBe('transfer.broadcast');
      // Both jobs ended, and again later under the producer's id: no new send, no new event.
      for (const jobId of [jobIdFor(sequenceId), `other-id-${sequenceId}`]) {
        await expect.poll(async () => raw.getJobState(jobId), { timeout: 10_000 }).toBe('completed');
      }
      await h.producer.submit(payload);
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      await raw.close();
    }
    const events = await h.eventsOf(sequenceId);
    expect(h.sim.stats().sends[sequenceId]?.accepted).toBe(1);
    expect(countBy(events, 'transfer.submitted').get(sequenceId)).toBe(1);
    expect(events.map((event) => event.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
  });

  it('events(): the events so far, and with follow the new ones up to the terminal event, typed by their type', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    const followed: TransferEvent[] = [];
    const following = (async () => {
      for await (const event of h.producer.events(sequenceId, { follow: true })) followed.push(event);
    })();
    await new Promise((resolve) => setTimeout(resolve, 50));
    await h.producer.submit(payload);
    await following;
    expect(followed.map((event) => [event.event, event.version])).toEqual([
      ['transfer.submitted', 1],
      ['transfer.broadcast', 2],
    ]);
    const last = followed[1]!;
    if (last.event !== 'transfer.broadcast') throw new Error('unreachable');
    // Narrowed by `event`: data is the broadcast shape, no cast.
    expect(last.data.txid).toBe(h.sim.transfer(sequenceId)!.txid);

    const past: TransferEvent[] = [];
    for await (const event of h.producer.events(sequenceId)) past.push(event);
    expect(past).toEqual(followed);
    const none: TransferEvent[] = [];
    for await (const event of h.producer.events('no-such-transfer')) none.push(event);
    expect(none).toEqual([]);
    // An already settled transfer: follow yields the past and ends at its terminal event.
    const again: TransferEvent[] = [];
    for await (const event of h.producer.events(sequenceId, { follow: true })) again.push(event);
    expect(again).toEqual(followed);
  });

  it('events({ follow, signal }): an abort ends a follow that has nothing to read', async () => {
    const controller = new AbortController();
    const seen: TransferEvent[] = [];
    const started = Date.now();
    setTimeout(() => controller.abort(), 200);
    await expect(
      (async () => {
        for await (const event of h.producer.events('never-submitted', { follow: true, signal: controller.signal })) seen.push(event);
      })(),
    ).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen).toEqual([]);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it('waitForTerminal rejects with WaitTimeoutError when nothing settles in time', async () => {
    await expect(h.producer.waitForTerminal('never-submitted-either', 300)).rejects.toMatchObject({
      name: 'WaitTimeoutError',
      code: 'WAIT_TIMEOUT',
      sequenceId: 'never-submitted-either',
    });
  });

  it('errors BullMQ throws on add come out as the typed EnqueueError, never raw', async () => {
    const payload = samplePayload();
    const error = await h.producer.submit(payload, { priority: 1.5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EnqueueError);
    expect(error).toBeInstanceOf(ProducerError);
    expect(error).toMatchObject({ code: 'ENQUEUE_FAILED', jobId: jobIdFor(payload.halfSigned.sequenceId) });
    expect((error as Error).message).toContain('Priority should not be float');
    expect((error as Error).cause).toBeInstanceOf(Error);
    expect(await h.app!.queues[SUBMIT_TRANSACTION].getJob(jobIdFor(payload.halfSigned.sequenceId))).toBeUndefined();
  });

  it('an invalid payload is refused with every issue before Redis is contacted; a closed producer refuses with PRODUCER_CLOSED', async () => {
    const producer = new TransferProducer({ connection: testRedisUrl(), prefix: h.prefix });
    await expect(producer.submit({ ...samplePayload(), walletId: 0, coin: 'ETH' })).rejects.toMatchObject({
      code: 'INVALID_PAYLOAD',
      issues: [{ path: 'walletId' }, { path: 'coin' }],
    });
    // Its own connection from a URL works like a shared one.
    const payload = samplePayload();
    expect(await producer.submit(payload)).toBe(jobIdFor(payload.halfSigned.sequenceId));
    expect((await producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000)).event).toBe('transfer.broadcast');
    await producer.close();
    await producer.close();
    await expect(producer.submit(samplePayload())).rejects.toBeInstanceOf(ProducerClosedError);
    await expect(producer.waitForTerminal(payload.halfSigned.sequenceId, 1_000)).rejects.toMatchObject({ code: 'PRODUCER_CLOSED' });
  });
});
