/**
 * The reconciliation schedule survives the loss of its next job. BullMQ adds a job scheduler's next
 * job only when the current one runs, so a next job lost (a Redis failover that dropped the last
 * writes of the old primary) ended reconciliation for good. Every worker process upserts the
 * scheduler again once per RECONCILE_EVERY, which puts the missing run back. The loss is made here
 * with BullMQ's public API: the scheduler and its next job removed (BullMQ refuses to remove a
 * scheduler's job alone), as a failover that lost the scheduler's writes would leave it.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

describe('reconciliation schedule', () => {
  let h: Harness;
  let queue: Queue;

  beforeAll(async () => {
    h = await startHarness({ name: 'reconcile-schedule', env: { RECONCILE_EVERY: '1s' } });
    queue = new Queue(QueueName.RECONCILE, { connection: h.redis, prefix: h.prefix });
  });
  afterAll(async () => {
    await queue?.close();
    await h?.close();
  });

  const runs = async () => (await h.events()).filter((e) => e.event === 'reconcile.completed').length;

  it('runs again after its next job was lost', async () => {
    await until('a first reconciliation run', 15_000, async () => ((await runs()) >= 1 ? true : undefined), 100);
    await queue.removeJobScheduler(QueueName.RECONCILE);
    expect(await queue.getJobScheduler(QueueName.RECONCILE)).toBeUndefined();
    expect((await queue.getDelayed()).filter((job) => job.name === QueueName.RECONCILE)).toEqual([]);
    const before = await runs();
    await until('another reconciliation run after the loss', 10_000, async () => ((await runs()) > before ? true : undefined), 100);
  }, 40_000);
});
