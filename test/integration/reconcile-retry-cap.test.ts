/**
 * Reconciliation retries a failed submit job at most RECONCILE_MAX_RETRIES times, then leaves it
 * failed, logs that once and counts it (custody_reconcile_retries_total). Both paths that retry one:
 * a job that failed before its transfer had a ledger record (retryFailedWithoutRecord), and the job of
 * a transfer that has one (repairActive). The jobs fail every time: the real worker's submit worker is
 * paused and a stand-in worker fails everything it takes, as BullMQ fails a job whose processor throws.
 * Before the cap, every run retried both jobs again, for ever, with nothing counted.
 */
import { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferState } from '../../src/ledger/ledger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { RECONCILE_MAX_RETRIES } from '../../src/timing.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

describe('reconciliation retries of a failed submit job', () => {
  let h: Harness;
  const lines: string[] = [];
  beforeAll(async () => {
    h = await startHarness({
      name: 'reconcile-retry-cap',
      // The watchdog would replace the paused submit worker.
      env: { RECONCILE_GRACE: '0', WORKER_STALL_TIMEOUT: '0', LOG_LEVEL: 'info' },
      logTo: { write: (line: string) => void lines.push(line) },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  async function reconcileIdle(): Promise<void> {
    const queue = h.app!.queues[QueueName.RECONCILE];
    await until('reconcile queue idle', 10_000, async () => {
      const counts = await queue.getJobCounts('active', 'waiting', 'prioritized');
      return (counts.active ?? 0) + (counts.waiting ?? 0) + (counts.prioritized ?? 0) === 0 ? true : undefined;
    });
  }

  /** One run through the queue, as the schedule makes them; resolves when it completed. */
  async function reconcileOnce(): Promise<void> {
    await reconcileIdle();
    const runs = async () => (await h.events()).filter((e) => e.event === 'reconcile.completed').length;
    const before = await runs();
    await h.app!.queues[QueueName.RECONCILE].add(QueueName.RECONCILE, {});
    await until('reconcile run completed', 10_000, async () => ((await runs()) > before ? true : undefined));
  }

  async function retryMetric(): Promise<Record<string, number>> {
    const metric = await h.app!.metrics.registry.getSingleMetric('custody_reconcile_retries_total')?.get();
    return Object.fromEntries((metric?.values ?? []).map((v) => [String(v.labels.outcome), v.value]));
  }

  it(`retries it at most ${RECONCILE_MAX_RETRIES} times, then leaves it failed, logged and counted once`, { timeout: 60_000 }, async () => {
    await reconcileIdle(); // the run the schedule starts at boot
    const submitQueue = h.app!.queues[QueueName.SUBMIT];
    const submitWorker = h.app!.workers.find((worker) => worker.name === QueueName.SUBMIT)!;
    await submitWorker.pause();

    const taken = new Map<string, number>();
    const connection = h.redis.duplicate({ maxRetriesPerRequest: null });
    const failing = new Worker(
      QueueName.SUBMIT,
      async (job) => {
        taken.set(job.id!, (taken.get(job.id!) ?? 0) + 1);
        throw new Error('Connection is closed.');
      },
      { connection, prefix: h.prefix },
    );
    try {
      // No record: failed before the handler made one.
      const orphanJob = await h.producer.submit(samplePayload());
      // A record in `gated` whose job failed (a worker that stalled too often, say).
      const stranded = samplePayload();
      const strandedJob = await h.producer.submit(stranded);
      const ledger = h.app!.ledger;
      await ledger.transition(stranded.halfSigned.sequenceId, {
        from: ['-'],
        to: TransferState.RECEIVED,
        set: { jobId: strandedJob, walletId: '310', coin: 'eth', metadata: '', createdAt: Date.now(), payload: JSON.stringify(stranded) },
      });
      await ledger.transition(stranded.halfSigned.sequenceId, {
        from: [TransferState.RECEIVED],
        to: TransferState.GATED,
        set: { gate: '{}' },
      });
      const bothFailed = async () => ((await submitQueue.getJobCounts('failed')).failed === 2 ? true : undefined);
      await until('both jobs failed', 10_000, bothFailed);

      for (let run = 1; run <= RECONCILE_MAX_RETRIES + 2; run++) {
        await reconcileOnce();
        await until(`both jobs failed again after run ${run}`, 10_000, bothFailed);
      }

      // Taken once by the producer's enqueue, then once per retry: RECONCILE_MAX_RETRIES retries each.
      expect(taken.get(orphanJob)).toBe(1 + RECONCILE_MAX_RETRIES);
      expect(taken.get(strandedJob)).toBe(1 + RECONCILE_MAX_RETRIES);
      expect(await (await submitQueue.getJob(orphanJob))!.getState()).toBe('failed');
      expect(await (await submitQueue.getJob(strandedJob))!.getState()).toBe('failed');
      expect(await retryMetric()).toEqual({ retried: 2 * RECONCILE_MAX_RETRIES, 'gave-up': 2 });

      const gaveUp = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((l) => String(l.msg).includes('left failed'));
      expect(gaveUp.map((l) => l.jobId).sort()).toEqual([orphanJob, strandedJob].sort());
      for (const line of gaveUp) expect(line).toMatchObject({ level: 'error', retries: RECONCILE_MAX_RETRIES });
    } finally {
      await failing.close();
      connection.disconnect();
      submitWorker.resume();
    }
  });
});
