/**
 * One demo run against a started stack: enqueues the samples (a little apart, so outcomes arrive over
 * a few seconds), follows the events stream from its start (the prefix is fresh, so every entry is this
 * run's) and prints each event as it lands, until every sample has settled, then checks the outcome.
 *
 * A sample has settled when its transfer has a terminal event and every job enqueued for it has
 * finished: the duplicate's second job must have run, or "it published nothing" would prove nothing.
 *
 * With BitGo, each `transfer.submitted` is followed by a look at the simulator's transfer: when it is
 * still in `pendingApproval` (accepted, unsigned, no txid), a line says so; and at the end each sent
 * transfer's time in approval is read from the simulator (when it was accepted and approved).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from '../../packages/producer/src/events.ts';
import type { TransferProducer } from '../../packages/producer/src/producer.ts';
import { QueueName } from '../../src/queues/names.ts';
import type { DemoOutput } from './output.ts';
import { enqueueOrder, type Sample } from './samples.ts';
import { acceptedSends, type Started } from './stack.ts';
import { verifyRun, type Verdict } from './verify.ts';

/** Longest blocking read: how quickly the loop notices Ctrl-C, the deadline and finished jobs. */
const READ_BLOCK_MS = 200;
/** Upper bound of the pause between two enqueued jobs. */
const MAX_ENQUEUE_GAP_MS = 250;

export interface RunOptions {
  paceMs: number;
  timeoutMs: number;
  signal: AbortSignal;
}

/** A sent BitGo transfer's approval, as the simulator tells it. */
export interface ApprovalInfo {
  /** How long it waited in pendingApproval before it was signed (0: no approval was needed). */
  waitedMs: number;
  /** It was still in pendingApproval when its transfer.submitted event arrived. */
  seenWaiting: boolean;
}

export interface RunResult {
  verdict: Verdict;
  /** BitGo only: by sequenceId, every transfer the simulator accepted. */
  approvals: Record<string, ApprovalInfo> | undefined;
  events: TransferEvent[];
  jobs: number;
  durationMs: number;
  timedOut: boolean;
}

export async function runSamples(started: Started, samples: readonly Sample[], out: DemoOutput, options: RunOptions): Promise<RunResult> {
  const startedAt = Date.now();
  const deadline = startedAt + options.timeoutMs;
  const queue = started.app.queues[QueueName.SUBMIT];
  const stream = started.config.queue.eventsStream;
  const order = enqueueOrder(samples);
  const gapMs = Math.min(MAX_ENQUEUE_GAP_MS, Math.round(options.paceMs / 8));

  let enqueueDone = false;
  let enqueueError: unknown;
  void enqueueAll(order, started.producer, queue, gapMs, options.signal).then(
    () => (enqueueDone = true),
    (error: unknown) => (enqueueError = error),
  );

  // A connection of its own: a blocking XREAD would hold up the producer's commands on the shared one.
  const reader = started.client.duplicate();
  reader.on('error', () => {});
  const events: TransferEvent[] = [];
  const terminal = new Set<string>();
  const finishedJobs = new Set<string>();
  const seenWaiting = new Set<string>();
  let cursor = '0-0';
  let timedOut = false;
  try {
    out.progress(0, samples.length, 0);
    for (;;) {
      options.signal.throwIfAborted();
      if (enqueueError !== undefined) throw enqueueError;
      for (const event of await readEvents(reader, stream, cursor)) {
        cursor = event.id;
        events.push(event);
        out.event(event);
        if (event.event === 'transfer.submitted' && started.bitgo?.transfer(event.sequenceId)?.state === 'pendingApproval') {
          seenWaiting.add(event.sequenceId);
          out.approval(event.sequenceId);
        }
        if (TERMINAL_EVENTS.has(event.event)) terminal.add(event.sequenceId);
      }
      await markFinishedJobs(samples, terminal, finishedJobs, queue);
      const settled = samples.filter(
        (sample) => terminal.has(sample.sequenceId) && sample.jobs.every((job) => finishedJobs.has(job.jobId)),
      ).length;
      out.progress(settled, samples.length, Date.now() - startedAt);
      if (settled === samples.length && enqueueDone) break;
      if (Date.now() >= deadline) {
        timedOut = true;
        break;
      }
    }
  } finally {
    reader.disconnect();
    out.endProgress();
  }

  return {
    verdict: verifyRun(samples, events, (sequenceId) => acceptedSends(started.sim, sequenceId)),
    approvals: started.bitgo ? approvalsOf(started.bitgo, samples, seenWaiting) : undefined,
    events,
    jobs: order.length,
    durationMs: Date.now() - startedAt,
    timedOut,
  };
}

function approvalsOf(
  bitgo: NonNullable<Started['bitgo']>,
  samples: readonly Sample[],
  seenWaiting: ReadonlySet<string>,
): Record<string, ApprovalInfo> {
  const approvals: Record<string, ApprovalInfo> = {};
  for (const sample of samples) {
    const view = bitgo.transfer(sample.sequenceId);
    if (!view) continue;
    const waitedMs = view.pendingApprovalId === null ? 0 : Math.max(0, Date.parse(view.approvedAt) - Date.parse(view.acceptedAt));
    approvals[sample.sequenceId] = { waitedMs, seenWaiting: seenWaiting.has(sample.sequenceId) };
  }
  return approvals;
}

async function enqueueAll(
  order: ReturnType<typeof enqueueOrder>,
  producer: TransferProducer,
  queue: Queue,
  gapMs: number,
  signal: AbortSignal,
): Promise<void> {
  for (const [index, { job }] of order.entries()) {
    if (index > 0 && gapMs > 0) await sleep(gapMs, undefined, { signal });
    signal.throwIfAborted();
    if (job.via === 'producer') await producer.submit(job.data);
    // Raw, past the producer's validation: how an invalid payload or a second job id gets in.
    else await queue.add(QueueName.SUBMIT, job.data, { jobId: job.jobId });
  }
}

async function readEvents(reader: Redis, stream: string, cursor: string): Promise<TransferEvent[]> {
  const reply = (await reader.xread('COUNT', 100, 'BLOCK', READ_BLOCK_MS, 'STREAMS', stream, cursor)) as Array<
    [string, Array<[string, string[]]>]
  > | null;
  return (reply ?? []).flatMap(([, entries]) => entries.map((entry) => parseStreamEntry(entry)));
}

/** Looks up the jobs of transfers that have their outcome; a job stays finished, so each is asked until it is. */
async function markFinishedJobs(
  samples: readonly Sample[],
  terminal: ReadonlySet<string>,
  finished: Set<string>,
  queue: Queue,
): Promise<void> {
  const pending = samples
    .filter((sample) => terminal.has(sample.sequenceId))
    .flatMap((sample) => sample.jobs.filter((job) => !finished.has(job.jobId)));
  const states = await Promise.all(pending.map((job) => queue.getJobState(job.jobId)));
  pending.forEach((job, index) => {
    if (states[index] === 'completed' || states[index] === 'failed') finished.add(job.jobId);
  });
}
