/**
 * The worker watchdog (src/queues/watchdog.ts): a BullMQ worker that stops fetching while the rest of
 * the process works (as one whose blocking connection wedged after a Redis Cluster failover,
 * bullmq#4138) is replaced, and its queue's jobs run again. The wedge is stood in for by pausing the
 * tracking worker locally (BullMQ's `Worker.pause`): it takes nothing, as a wedged one or one whose
 * fetch loop ended does. Real Redis, real simulator, the in-process worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const SUBMITTED = new Set(['transfer.submitted']);

async function replaced(h: Harness, queue: string): Promise<number> {
  const text = await h.app!.metrics.registry.getSingleMetricAsString('custody_worker_replaced_total');
  return Number(new RegExp(`custody_worker_replaced_total\\{queue="${queue}"\\} (\\d+)`).exec(text)?.[1] ?? NaN);
}

describe('a worker that stopped fetching', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'watchdog', env: { WORKER_STALL_TIMEOUT: '1s' } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is replaced, and its queue’s jobs run again', { timeout: 60_000 }, async () => {
    expect(await replaced(h, QueueName.TRACK)).toBe(0);
    const tracker = h.app!.workers.find((worker) => worker.name.startsWith(QueueName.TRACK))!;
    await tracker.pause(true);

    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, SUBMITTED);
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 30_000)).event).toBe('transfer.broadcast');

    expect(await replaced(h, QueueName.TRACK)).toBeGreaterThanOrEqual(1);
    expect(await replaced(h, QueueName.SUBMIT)).toBe(0);
    expect(h.app!.workers).not.toContain(tracker);
    expect(h.app!.workers.filter((worker) => worker.name.startsWith(QueueName.TRACK))).toHaveLength(1);
    expect(h.app!.running()).toBe(true);
  });
});
