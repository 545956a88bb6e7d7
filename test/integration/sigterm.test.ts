/**
 * Graceful shutdown under load: SIGTERM while sends are in flight must let them finish, leave no job
 * active (so the next worker does not wait for the stalled check), exit 0, and lose nothing.
 */
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { createKeys } from '../../src/ledger/keys.ts';
import { QueueName } from '../../src/queues/names.ts';
import { countBy, startHarness, versionProblems } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const TRANSFERS = 200;
/** Long on purpose: a job left active by the first worker would come back only through a stalled-job recovery. */
const LOCK_MS = 20_000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await killAllWorkers();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

// Two worker starts, and the waits in between: 40 submitted (20 s), the drain (30 s), the rest submitted
// (PROCESS_MS), an idle queue (10 s), the stop (10 s).
describe('SIGTERM during load', { timeout: processesTimeout(2, 130_000) }, () => {
  it('exits 0 after draining in-flight sends, leaves no job active, and a second worker finishes the rest: nothing lost, nothing sent twice', async () => {
    const h = await startHarness({
      name: 'sigterm',
      worker: false,
      sim: { settings: { latencyMs: { sendTransaction: 50 }, visibleAfterMs: 300, txidAfterMs: 3_600_000 } },
      env: {
        SUBMIT_CONCURRENCY: '16',
        JOB_LOCK_DURATION: `${LOCK_MS}ms`,
        TRACK_POLL_MIN: '60s',
        TRACK_POLL_MAX: '60s',
        SHUTDOWN_TIMEOUT: '20s',
        LOG_LEVEL: 'info',
      },
    });
    cleanups.push(() => h.close());
    const queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
    cleanups.push(() => queue.close());
    const keys = createKeys(h.prefix, h.config.queue.eventsStream);

    const submittedCount = async () => (await h.events()).filter((e) => e.event === 'transfer.submitted').length;
    const acceptedCount = () => Object.values(h.sim.stats().sends).filter((count) => count.accepted > 0).length;

    const payloads = Array.from({ length: TRANSFERS }, () => samplePayload());
    const sequenceIds = payloads.map((p) => p.halfSigned.sequenceId);
    await Promise.all(payloads.map((p) => h.producer.submit(p)));

    // First worker: SIGTERM once a fifth of the transfers are out, with up to 16 sends in flight.
    const first = spawnWorker(h.env, { name: 'sigterm-worker-1' });
    await first.waitForLog('worker started', PROCESS_MS);
    const atSignal = await until(
      '40 submitted events',
      20_000,
      async () => {
        const n = await submittedCount();
        return n >= 40 ? n : undefined;
      },
      5,
    );
    const inFlightAtSignal = (await queue.getJobCounts('active')).active ?? 0;
    const signalled = Date.now();
    first.kill('SIGTERM');
    // Draining is bounded by SHUTDOWN_TIMEOUT (20 s), which it must not reach (checked below).
    const exit = await first.waitForExit(30_000);
    const exitMs = Date.now() - signalled;
    expect(exit, `first worker output:\n${first.output().slice(-4_000)}`).toEqual({ code: 0, signal: null });
    expect(first.output()).toContain('"msg":"stopped"');
    expect(first.output()).not.toContain('drain took too long');

    // Right after the exit: nothing active (no stalled-check wait ahead), nothing half-done, work left over.
    const countsAfterExit = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'completed', 'failed');
    expect(countsAfterExit.active).toBe(0);
    expect(countsAfterExit.failed).toBe(0);
    const submittedByFirst = await submittedCount();
    expect(atSignal).toBeLessThan(TRANSFERS);
    expect(submittedByFirst, 'the first worker must not have finished everything (else the restart is untested)').toBeLessThan(TRANSFERS);
    // Every send the first worker made was answered and recorded before it exited.
    expect(acceptedCount()).toBe(submittedByFirst);
    const states = await Promise.all(sequenceIds.map((id) => h.redis.hget(keys.transfer(id), 'state')));
    const halfDone = sequenceIds.filter((_, i) => states[i] !== null && states[i] !== 'submitted').map((id, i) => `${id}: ${states[i]}`);
    expect(halfDone, 'transfers left between states by the drained worker').toEqual([]);

    // Second worker: finishes the rest without a stalled-job recovery (checked below on every job, not
    // timed: on a busy machine its start alone can take longer than a lock duration).
    const secondStarted = Date.now();
    const second = spawnWorker(h.env, { name: 'sigterm-worker-2' });
    await second.waitForLog('worker started', PROCESS_MS);
    await until(
      `all ${TRANSFERS} transfers submitted`,
      PROCESS_MS,
      async () => ((await submittedCount()) >= TRANSFERS ? true : undefined),
      25,
    );
    const secondMs = Date.now() - secondStarted;
    await until(
      'an idle submit-transaction queue',
      10_000,
      async () => {
        const counts = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'waiting-children');
        return Object.values(counts).every((n) => n === 0) ? true : undefined;
      },
      50,
    );
    expect(await second.stop(10_000)).toEqual({ code: 0, signal: null });
    // No job was left active for the second worker to recover: BullMQ counts each stalled-job recovery on the job.
    const jobs = await queue.getJobs(['completed'], 0, -1);
    expect(jobs).toHaveLength(TRANSFERS);
    expect(jobs.filter((job) => job.stalledCounter > 0).map((job) => `${job.id}: stalled ${job.stalledCounter}`)).toEqual([]);

    // Nothing lost, nothing twice.
    const events = await h.events();
    const transferEvents = events.filter((e) => e.event !== 'reconcile.completed');
    expect(transferEvents.filter((e) => e.event !== 'transfer.submitted').map((e) => `${e.event}@${e.sequenceId}`)).toEqual([]);
    const submitted = countBy(transferEvents, 'transfer.submitted');
    expect(sequenceIds.filter((id) => submitted.get(id) !== 1).map((id) => `${id}: ${submitted.get(id) ?? 0}`)).toEqual([]);
    expect(transferEvents).toHaveLength(TRANSFERS);
    const sends = h.sim.stats().sends;
    // A graceful stop has no crash window: not even a 409.
    expect(
      sequenceIds
        .filter((id) => sends[id]?.accepted !== 1 || sends[id]?.duplicates !== 0)
        .map((id) => `${id}: ${JSON.stringify(sends[id])}`),
    ).toEqual([]);
    const sendCounts = await Promise.all(sequenceIds.map((id) => h.redis.hget(keys.transfer(id), 'sends')));
    expect(sendCounts.every((n) => n === '1')).toBe(true);
    expect(versionProblems(events)).toEqual([]);

    console.log(
      [
        '[SIGTERM during load]',
        `  transfers: ${TRANSFERS}; SIGTERM at ${atSignal} submitted with ${inFlightAtSignal} jobs active`,
        `  first worker exited ${exit.code} after ${exitMs} ms having submitted ${submittedByFirst}; jobs active after exit: ${countsAfterExit.active}`,
        `  second worker: spawn → all ${TRANSFERS} submitted in ${secondMs} ms (lock duration ${LOCK_MS} ms)`,
        `  409 duplicates: 0; sendTransaction answers: ${JSON.stringify(h.sim.stats().requests.sendTransaction)}`,
      ].join('\n'),
    );
  });
});
