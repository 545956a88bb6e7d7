/**
 * The producer validates what it enqueues: BullMQ stores the job's data as JSON text and the worker
 * validates that text parsed back, so a value whose JSON differs from itself (an object with `toJSON`)
 * must be judged by its JSON, with the worker's own schema (packages/producer/src/payload.ts).
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InvalidPayloadError,
  jobIdFor,
  parseSubmitPayload,
  SUBMIT_TRANSACTION,
  TransferProducer,
} from '../../packages/producer/src/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

describe('TransferProducer validates the payload as BullMQ stores it', () => {
  const prefix = uniquePrefix('producer-serialised');
  let producer: TransferProducer;
  let queue: Queue;
  beforeAll(() => {
    const redis = newRedis();
    producer = new TransferProducer({ connection: redis, prefix });
    queue = new Queue(SUBMIT_TRANSACTION, { connection: redis, prefix });
  });
  afterAll(async () => {
    await producer?.close();
    await queue?.close();
    await closeAllRedis();
  });

  it.each([
    ['toJSON returning a string', { toJSON: () => 'x' }],
    ['a Date-like value (toJSON returning its ISO text)', { toJSON: () => new Date(0).toISOString() }],
    ['toJSON returning an array', { toJSON: () => [1, 2] }],
  ])('refuses metadata whose JSON is not an object: %s', async (_name, metadata) => {
    const payload = samplePayload({ metadata });
    const error = await producer.submit(payload).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidPayloadError);
    expect(error).toMatchObject({
      code: 'INVALID_PAYLOAD',
      issues: [{ path: 'metadata', message: 'must be a JSON object (once serialised as JSON)' }],
    });
    await expect(producer.trySubmit(payload)).rejects.toBeInstanceOf(InvalidPayloadError);
    // Nothing was enqueued: the worker would have rejected it.
    expect(await queue.getJob(jobIdFor(payload.halfSigned.sequenceId))).toBeUndefined();
  });

  it('refuses metadata whose toJSON makes it bigger than 4 KiB', async () => {
    const payload = samplePayload({ metadata: { note: 'small', toJSON: () => ({ note: 'x'.repeat(5_000) }) } });
    await expect(producer.submit(payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD', issues: [{ path: 'metadata' }] });
  });

  it('enqueues a valid payload unchanged: the job data is what the schema makes of it, and what the worker reads back', async () => {
    const payload = samplePayload({ walletId: '00310', metadata: { orderId: 'A-1', nested: { n: 1, list: [true, null, 'x'] } } });
    const expected = parseSubmitPayload(payload);
    if (!expected.ok) throw new Error('sample payload is invalid');
    expect(await producer.submit(payload)).toBe(jobIdFor(payload.halfSigned.sequenceId));
    const job = await queue.getJob(jobIdFor(payload.halfSigned.sequenceId));
    expect(job?.data).toEqual(expected.payload);
    expect(job?.data.walletId).toBe(310);
    expect(parseSubmitPayload(job?.data)).toEqual({ ok: true, payload: expected.payload });
    // An object whose toJSON gives a valid object is judged by, and enqueued as, that object.
    const viaToJson = samplePayload({ metadata: { secret: 'dropped', toJSON: () => ({ orderId: 'B-2' }) } });
    await producer.submit(viaToJson);
    expect((await queue.getJob(jobIdFor(viaToJson.halfSigned.sequenceId)))?.data.metadata).toEqual({ orderId: 'B-2' });
  });

  it("enqueues BitGo's 32-hex wallet id as the string, and a string of digits as the number", async () => {
    const walletId = '59cd72485007a239fb00282ed480da1f';
    const hex = samplePayload({ walletId });
    await producer.submit(hex);
    const job = await queue.getJob(jobIdFor(hex.halfSigned.sequenceId));
    expect(job?.data.walletId).toBe(walletId);
    expect(parseSubmitPayload(job?.data)).toMatchObject({ ok: true, payload: { walletId } });
    const digits = samplePayload({ walletId: '0310' });
    await producer.submit(digits);
    expect((await queue.getJob(jobIdFor(digits.halfSigned.sequenceId)))?.data.walletId).toBe(310);
    await expect(producer.submit(samplePayload({ walletId: walletId.toUpperCase() }))).rejects.toMatchObject({
      code: 'INVALID_PAYLOAD',
      issues: [{ path: 'walletId', message: 'must be a positive integer or a 32-hex wallet id' }],
    });
  });
});
