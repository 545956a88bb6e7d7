/**
 * A submit job that failed before its transfer had a ledger record (in a Redis failover test run: a
 * move refused mid-failover) is found by reconciliation, which starts from the ledger, only through
 * the queue's failed jobs. Here such jobs are made by a stand-in worker that fails everything it
 * takes, as BullMQ fails a job whose processor throws; then the real worker starts and its first
 * reconciliation runs.
 */
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';

describe('reconciliation of failed submit jobs', () => {
  let h: Harness;
  const connection = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  beforeAll(async () => {
    h = await startHarness({ name: 'reconcile-failed', worker: false, env: { RECONCILE_GRACE: '0' } });
  });
  afterAll(async () => {
    await h.close();
    connection.disconnect();
  });

  it('retries those that failed before any record was made, and leaves a refused one failed', { timeout: 30_000 }, async () => {
    const orphan = samplePayload();
    const invalid = samplePayload({ walletId: 'not a wallet' });
    await h.producer.submit(orphan);
    const submitQueue = new Queue(QueueName.SUBMIT, { connection, prefix: h.prefix });
    // A job of another name: the worker refuses those for good; reconciliation must leave it failed.
    await submitQueue.add(
      'not-a-submission',
      { halfSigned: { sequenceId: samplePayload().halfSigned.sequenceId } },
      { jobId: 'other-name' },
    );
    // Invalid data added behind the producer's back: retried, it becomes transfer.rejected.
    await submitQueue.add(QueueName.SUBMIT, invalid, { jobId: 'invalid-payload' });

    // Everything fails, as a processor cut off by Redis trouble does.
    const failingConnection = connection.duplicate();
    const failing = new Worker(
      QueueName.SUBMIT,
      async () => {
        throw new Error('Connection is closed.');
      },
      { connection: failingConnection, prefix: h.prefix },
    );
    await until('three failed jobs', 10_000, async () => ((await submitQueue.getJobCounts('failed')).failed === 3 ? true : undefined));
    await failing.close();
    failingConnection.disconnect();
    expect(await h.redis.exists(`${h.prefix}:transfer:${orphan.halfSigned.sequenceId}`)).toBe(0);

    // The worker starts; its first reconciliation runs at once.
    await h.startWorker();
    const outcome = await h.producer.waitForTerminal(orphan.halfSigned.sequenceId, 15_000);
    expect(outcome.event).toBe('transfer.broadcast');
    expect(h.sim.stats().sends[orphan.halfSigned.sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    const rejected = await h.producer.waitForTerminal(invalid.halfSigned.sequenceId, 15_000);
    expect(rejected.event).toBe('transfer.rejected');

    const other = (await submitQueue.getJob('other-name')) as Job;
    expect(await other.getState()).toBe('failed');
    const completed = (await h.events()).filter((e) => e.event === 'reconcile.completed');
    expect(completed.some((e) => (e.data as { resubmitted: number }).resubmitted === 2)).toBe(true);
    await submitQueue.close();
  });
});
