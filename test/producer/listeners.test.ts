/**
 * A burst of submit() calls on a connection that is not ready yet shares one wait for readiness: one
 * 'ready' and one 'end' listener in total, whatever the number of callers, so no
 * MaxListenersExceededWarning (the default limit is 10 listeners per event).
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { jobIdFor, TransferProducer } from '../../packages/producer/src/index.ts';
import { samplePayload, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

const producers: TransferProducer[] = [];
const clients: Redis[] = [];
afterEach(async () => {
  await Promise.all(producers.splice(0).map((producer) => producer.close()));
  for (const client of clients.splice(0)) client.disconnect();
});

/** Runs `work` and returns the process warnings of the given name emitted meanwhile (and one tick after). */
async function warningsDuring(name: string, work: () => Promise<unknown>): Promise<Error[]> {
  const seen: Error[] = [];
  const onWarning = (warning: Error): void => {
    if (warning.name === name) seen.push(warning);
  };
  process.on('warning', onWarning);
  try {
    await work();
    // Process warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  return seen;
}

function burst(count: number): { sequenceIds: string[]; payloads: ValidSamplePayload[] } {
  const base = `burst-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;
  const sequenceIds = Array.from({ length: count }, (_, i) => `${base}-${i}`);
  return { sequenceIds, payloads: sequenceIds.map((sequenceId) => samplePayload({ sequenceId })) };
}

describe('TransferProducer: concurrent submits before the connection is ready', () => {
  it('50 submits on a fresh connection URL share one wait: no MaxListenersExceededWarning, all enqueued', async () => {
    const { sequenceIds, payloads } = burst(50);
    let jobIds: string[] = [];
    const warnings = await warningsDuring('MaxListenersExceededWarning', async () => {
      const producer = new TransferProducer({ connection: testRedisUrl(), prefix: uniquePrefix('listeners-url') });
      producers.push(producer);
      jobIds = await Promise.all(payloads.map((payload) => producer.submit(payload)));
    });
    expect(warnings.map((warning) => warning.message)).toEqual([]);
    expect(jobIds).toEqual(sequenceIds.map((sequenceId) => jobIdFor(sequenceId)));
  });

  it('50 submits on a shared, not yet connected ioredis client: no warning, all enqueued, no listener left behind', async () => {
    const { sequenceIds, payloads } = burst(50);
    const client = new Redis(testRedisUrl(), { lazyConnect: true, maxRetriesPerRequest: null });
    clients.push(client);
    let before = {};
    let jobIds: string[] = [];
    const warnings = await warningsDuring('MaxListenersExceededWarning', async () => {
      const producer = new TransferProducer({ connection: client, prefix: uniquePrefix('listeners-shared') });
      producers.push(producer);
      // BullMQ's queue keeps a 'ready' listener of its own on the connection.
      before = { ready: client.listenerCount('ready'), end: client.listenerCount('end') };
      expect(client.status).not.toBe('ready');
      jobIds = await Promise.all(payloads.map((payload) => producer.submit(payload)));
    });
    expect(warnings.map((warning) => warning.message)).toEqual([]);
    expect(jobIds).toEqual(sequenceIds.map((sequenceId) => jobIdFor(sequenceId)));
    expect({ ready: client.listenerCount('ready'), end: client.listenerCount('end') }).toEqual(before);
  });
});
