/**
 * The HELP of custody_worker_jobs_total names every outcome the processor wrapper records: each kind of
 * ending a handler can have is driven through createProcessor (a job of another name, a return, each
 * signal of src/queues/outcomes.ts, an unexpected throw) and the outcome it reported looked up in the HELP.
 */
import type { Job } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import { JOB_OUTCOMES, RateLimited, RetryLater, WaitForSlot } from '../../src/queues/outcomes.ts';
import { createProcessor, type Handler } from '../../src/queues/processor.ts';

const JOB_NAME = 'submit-transaction';

/** Enough of a BullMQ job for the wrapper: the moves it makes are no-ops. */
function fakeJob(name = JOB_NAME): Job {
  return {
    id: 'job-1',
    name,
    data: { sequenceId: 'outcomes' },
    attemptsStarted: 1,
    moveToDelayed: async () => undefined,
  } as unknown as Job;
}

/** The outcome the wrapper reports for one run of `handler` on `job`. */
async function outcomeOf(handler: Handler<unknown>, job = fakeJob()): Promise<string> {
  let reported: string | undefined;
  const process = createProcessor(handler, {
    queue: 'q',
    jobName: JOB_NAME,
    logger: createLogger({ level: 'silent' }),
    rateLimit: async () => undefined,
    onFinished: (_queue, outcome) => {
      reported = outcome;
    },
  });
  await process(job, 'token').catch(() => undefined);
  if (reported === undefined) throw new Error('the processor reported no outcome');
  return reported;
}

async function recordedOutcomes(): Promise<Set<string>> {
  const endings: Array<[Handler<unknown>, Job?]> = [
    [async () => 'done'],
    [async () => 'never runs', fakeJob('another-name')],
    [
      async () => {
        throw new RetryLater(1_000, 'later');
      },
    ],
    [
      async () => {
        throw new WaitForSlot(1_000);
      },
    ],
    [
      async () => {
        throw new RateLimited(1_000);
      },
    ],
    [
      async () => {
        throw new Error('boom');
      },
    ],
  ];
  return new Set(await Promise.all(endings.map(([handler, job]) => outcomeOf(handler, job))));
}

describe('custody_worker_jobs_total', () => {
  it('names in its HELP every outcome the processor records', async () => {
    const outcomes = await recordedOutcomes();
    expect(outcomes.size).toBeGreaterThanOrEqual(5);
    const metric = (await createMetrics().registry.getMetricsAsJSON()).find((m) => m.name === 'custody_worker_jobs_total');
    const help = metric?.help ?? '';
    const missing = [...outcomes].filter((outcome) => !new RegExp(`\\b${outcome}\\b`).test(help));
    expect(missing, help).toEqual([]);
  });

  it('JOB_OUTCOMES, which the HELP and the zeroed series come from, is exactly what the processor records', async () => {
    expect(new Set(JOB_OUTCOMES)).toEqual(await recordedOutcomes());
  });
});
