import type { Job, Queue } from 'bullmq';
import { TransferState, type Ledger } from '../ledger/ledger.ts';
import { legacyTrackJobId, QueueName, trackJobId, trackJobOptions } from './names.ts';

/**
 * Moves a waiting job to the head of its queue's line (BullMQ's public `changePriority` with `lifo`,
 * priority 0: out of the wait list and back in at the end jobs are taken from). A job no longer
 * waiting (taken meanwhile, or ended) is left as it is.
 */
async function toHeadOfLine(job: Job): Promise<void> {
  await job.changePriority({ priority: 0, lifo: true }).catch(() => undefined);
}

/** Job states in which a tracking job no longer tracks anything. */
const ENDED = new Set(['missing', 'completed', 'failed', 'unknown']);

export type TrackerOutcome = 'added' | 'live';

/**
 * What making a transfer's tracking poll now did: `promoted` (it waited for its next poll and runs
 * now), `polling` (it is due or running already: nothing to hurry; a due one is moved up to be next),
 * `added` (there was none, or it had ended: a new one polls at once).
 */
export type PollNowOutcome = 'promoted' | 'polling' | 'added';

/**
 * The one way a transfer's tracking job is added, by the submit handler, reconciliation and the CLI's
 * `resolve`: BullMQ's public `Queue.add` under the id derived from the sequenceId (trackJobOptions), so
 * adding it again is a no-op. No script of ours writes a key of BullMQ's.
 *
 * A submitted transfer is never without either its tracking job or the ledger's record that it still
 * needs one: the `submitted` transition records the transfer in the tracker outbox atomically
 * (`trackerPending`), `ensure` removes the entry once the job is added, and `sweep` (run by
 * reconciliation) adds the job for entries a crash left between the two.
 */
export class Trackers {
  readonly #queue: Queue;
  readonly #ledger: Ledger;
  readonly #firstPollMs: number;

  constructor(queue: Queue, ledger: Ledger, firstPollMs: number) {
    this.#queue = queue;
    this.#ledger = ledger;
    this.#firstPollMs = firstPollMs;
  }

  /**
   * Adds the transfer's tracking job unless it exists, then clears its outbox entry. With
   * `replaceEnded`, a job of that id that ended (completed or failed: a tracker that gave up, or was
   * removed by hand) is replaced, and a live one under the former id counts as present: what
   * reconciliation and an operator's resolution need. With `atOnce`, a job it adds polls at once rather
   * than after the first poll's delay (an operator's resolution, a recheck, a wake-up: each polls now).
   */
  async ensure(sequenceId: string, options: { replaceEnded?: boolean; atOnce?: boolean } = {}): Promise<TrackerOutcome> {
    if (options.replaceEnded) {
      const job = await this.#queue.getJob(trackJobId(sequenceId));
      const state = job ? await job.getState() : 'missing';
      const legacy = ENDED.has(state) ? await this.#queue.getJob(legacyTrackJobId(sequenceId)) : undefined;
      if (!ENDED.has(state) || (legacy && !ENDED.has(await legacy.getState()))) {
        await this.#ledger.trackerAdded(sequenceId);
        return 'live';
      }
      if (job) await job.remove();
    }
    await this.#queue.add(QueueName.TRACK, { sequenceId }, trackJobOptions(sequenceId, options.atOnce ? 0 : this.#firstPollMs));
    await this.#ledger.trackerAdded(sequenceId);
    return 'added';
  }

  /**
   * Makes the transfer's tracking poll now (an operator's recheck, a provider's wake-up): its job,
   * waiting for its next poll, is promoted; one due already (`polling`) stays due; a running one is left
   * as it is; a missing or ended one is added (as `ensure` with `replaceEnded`). Promoted, due or added,
   * the job goes to the head of the queue's line. The poll then takes its slot in the
   * request budget like every other, and decides by what the provider answers. The caller checked that
   * the transfer is submitted.
   *
   * The head of the line matters when polls spend the whole budget: due jobs then queue for it, one
   * budget interval each, and a woken job at the tail waits as long as a scheduled one (measured with
   * `BUDGET_WEBHOOKS=1 npm run bench:budget`, bench/README.md).
   */
  async pollNow(sequenceId: string, options: { headOfLine?: boolean } = {}): Promise<PollNowOutcome> {
    // Ahead of every due poll (an operator's recheck, a webhook naming the hash), or, when the call
    // proves nothing yet (BitGo's "first seen"), due behind the others: a burst of new transfers must
    // not push their sends' budget aside with polls that can find nothing.
    const headOfLine = options.headOfLine ?? true;
    const job = await this.#queue.getJob(trackJobId(sequenceId));
    const state = job ? await job.getState() : 'missing';
    if (job && state === 'delayed') {
      // It may have left the delayed set meanwhile (its own time came): then it is due anyway.
      const outcome = await job.promote().then(
        () => 'promoted' as const,
        () => 'polling' as const,
      );
      if (headOfLine) await toHeadOfLine(job);
      return outcome;
    }
    if (job && state === 'waiting') {
      if (headOfLine) await toHeadOfLine(job);
      return 'polling';
    }
    if (state === 'active' || state === 'prioritized' || state === 'waiting-children') return 'polling';
    if ((await this.ensure(sequenceId, { replaceEnded: true, atOnce: true })) !== 'added') return 'polling';
    const added = headOfLine ? await this.#queue.getJob(trackJobId(sequenceId)) : undefined;
    if (added) await toHeadOfLine(added);
    return 'added';
  }

  /**
   * Adds the tracking job of every transfer whose outbox entry is older than `graceMs` (a crash between
   * the `submitted` transition and `ensure`), at most `limit`; an entry of a transfer no longer
   * submitted just goes. Returns the transfers whose job was added.
   */
  async sweep(now: number, graceMs: number, limit: number): Promise<string[]> {
    const added: string[] = [];
    for (const sequenceId of await this.#ledger.pendingTrackers(now - graceMs, limit)) {
      if ((await this.#ledger.get(sequenceId))?.state !== TransferState.SUBMITTED) {
        await this.#ledger.trackerAdded(sequenceId);
        continue;
      }
      if ((await this.ensure(sequenceId, { replaceEnded: true })) === 'added') added.push(sequenceId);
    }
    return added;
  }
}
