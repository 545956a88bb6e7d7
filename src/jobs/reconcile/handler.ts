import { randomUUID } from 'node:crypto';
import type { Job, Queue } from 'bullmq';
import { TERMINAL_STATES, TransferState, type Ledger, type TransferRecord } from '../../ledger/ledger.ts';
import { op } from '../../ledger/operations.ts';
import { BudgetClass } from '../../custody/budget.ts';
import { isCustodyError } from '../../custody/errors.ts';
import type { JobContext } from '../../queues/processor.ts';
import { QueueName } from '../../queues/names.ts';
import type { Trackers } from '../../queues/trackers.ts';
import type { CustodyPort, ListedTransfer } from '../../custody/port.ts';
import {
  INDEX_PAGE,
  RECONCILE_LOCK_RENEW_MS,
  RECONCILE_LOCK_TTL_MS,
  RECONCILE_MAX_RETRIES,
  VERIFY_BUDGET_MS,
  VERIFY_WINDOW_MS,
} from '../../timing.ts';
import { txidEquals } from '../../custody/matching.ts';
import { describeInvalidPayload } from '../../../packages/producer/src/payload.ts';

export interface ReconcileDeps {
  ledger: Ledger;
  submitQueue: Queue;
  /** Adds tracking jobs (Trackers.ensure), and those a crash left in the tracker outbox (Trackers.sweep). */
  trackers: Pick<Trackers, 'ensure' | 'sweep'>;
  custody: Pick<CustodyPort, 'findTransfer' | 'getWalletTransaction'>;
  /** A transfer untouched this long in a non-terminal state is checked. */
  graceMs: number;
  retentionMs: number;
  now?: () => number;
  /** Aborted when the worker shuts down: a run then stops between two transfers. */
  shutdown?: AbortSignal;
  /** Several records matched one transfer (no guess was made). */
  onAmbiguous?: (step: 'reconcile') => void;
  /**
   * A failed submit job was retried, or (once per job) left failed because reconciliation had retried
   * it RECONCILE_MAX_RETRIES times already.
   */
  onRetry?: (outcome: 'retried' | 'gave-up') => void;
}

export interface ReconcileCounts {
  checked: number;
  resubmitted: number;
  trackersRestored: number;
  unrecoverable: number;
  verified: number;
  mismatches: number;
  verifyErrors: number;
  retentionRemoved: number;
  staleIndexRemoved: number;
  /** True when the worker shut down mid-run: the rest is left to the next run. */
  interrupted: boolean;
}

/** A run's counts before it did anything. */
export function zeroCounts(): ReconcileCounts {
  return {
    checked: 0,
    resubmitted: 0,
    trackersRestored: 0,
    unrecoverable: 0,
    verified: 0,
    mismatches: 0,
    verifyErrors: 0,
    retentionRemoved: 0,
    staleIndexRemoved: 0,
    interrupted: false,
  };
}

export type ReconcileResult = { skipped: true } | ({ skipped: false } & ReconcileCounts);

/**
 * The scheduled `reconcile` job: finds what crashes and lost jobs left behind and repairs it, using the
 * ledger's indexes (never a keyspace scan). One run at a time across all workers (a lock; a second run
 * started meanwhile does nothing and publishes nothing). Every repair goes through the normal handlers,
 * so it inherits their guarantees: re-driving a submission looks before it sends, a second tracker
 * publishes nothing the first did.
 */
export function createReconcileHandler(deps: ReconcileDeps) {
  const now = deps.now ?? Date.now;
  const { ledger } = deps;

  return async ({ log }: JobContext): Promise<ReconcileResult> => {
    const result = await ledger.withLock('reconcile', RECONCILE_LOCK_TTL_MS, RECONCILE_LOCK_RENEW_MS, async () => {
      // Index scores are the ledger's clock (Redis time): so is every cutoff of this run.
      const started = await ledger.now();
      const wallStarted = now(); // the run's duration, on this process's clock
      // One id per run, made before anything is published: a replayed publish finds it and adds nothing.
      const runId = randomUUID();
      const counts = zeroCounts();
      // Stops between two transfers on shutdown: each repair is a complete step, the next run goes on.
      const stop = () => {
        counts.interrupted ||= deps.shutdown?.aborted === true;
        return counts.interrupted;
      };
      // Trackers a crash left in the outbox between the `submitted` transition and their Queue.add.
      for (const sequenceId of await deps.trackers.sweep(started, deps.graceMs, INDEX_PAGE)) {
        counts.trackersRestored++;
        log.warn({ sequenceId }, 'tracking job added from the tracker outbox');
      }
      // What a worker before contract v1.4 left in its index of non-terminal transfers, first.
      await ledger.adoptLegacyActive();
      await repairActive(started, counts, log, stop);
      if (!stop()) await retryFailedWithoutRecord(counts, log, stop);
      if (!stop()) await verifyBroadcasts(started, counts, log, stop);
      counts.retentionRemoved = await ledger.forgetTerminal(started - deps.retentionMs);
      // The claims of transfers whose tombstone expired (not one of the event's counts: the log's).
      const claimsRemoved = await ledger.forgetClaims();
      if (claimsRemoved > 0) log.info({ claimsRemoved }, 'claims of forgotten transfers removed');
      await ledger.publishSystemEvent('reconcile.completed', { ...counts, durationMs: now() - wallStarted }, runId);
      log.info(counts, 'reconciliation completed');
      return counts;
    });
    if (result === undefined) {
      log.info('another reconciliation is running, skipped');
      return { skipped: true };
    }
    return { skipped: false, ...result };
  };

  /** Non-terminal transfers untouched for the grace period: each must have a live job driving it. */
  async function repairActive(started: number, counts: ReconcileCounts, log: JobContext['log'], stop: () => boolean): Promise<void> {
    for await (const sequenceId of ledger.staleActive(started - deps.graceMs, INDEX_PAGE)) {
      if (stop()) return;
      const record = await ledger.get(sequenceId);
      if (!record || TERMINAL_STATES.has(record.state)) {
        // The record expired or ended without its index entry going (a crash between the two).
        await ledger.dropActive(sequenceId);
        counts.staleIndexRemoved++;
        continue;
      }
      counts.checked++;
      if (record.state === TransferState.SUBMITTED) await ensureTracker(record, counts, log);
      else await ensureSubmitJob(record, counts, log);
    }
  }

  /** A submitted transfer idle past the grace period must have a live tracker (a lost one is replaced). */
  async function ensureTracker(record: TransferRecord, counts: ReconcileCounts, log: JobContext['log']): Promise<void> {
    if ((await deps.trackers.ensure(record.sequenceId, { replaceEnded: true })) !== 'added') return;
    counts.trackersRestored++;
    log.warn({ sequenceId: record.sequenceId }, 'tracking job restored');
  }

  /**
   * A submission in received/gated/submitting with no live job (removed by hand, failed after too many
   * stalls): retry it, or recreate it from the payload the ledger kept. The recreated job takes over
   * ownership first, so the handler accepts it; if it finds `submitting` it looks before sending.
   */
  async function ensureSubmitJob(record: TransferRecord, counts: ReconcileCounts, log: JobContext['log']): Promise<void> {
    const job = record.jobId ? await deps.submitQueue.getJob(record.jobId) : undefined;
    const state = job ? await job.getState() : 'missing';
    if (state === 'failed' && job) {
      const fields = { sequenceId: record.sequenceId, jobId: record.jobId, state: record.state };
      if (await retryFailed(job, counts, log, fields)) log.warn(fields, 'failed submission retried');
      return;
    }
    if (state !== 'missing' && state !== 'completed' && state !== 'unknown') return;
    if (!record.payload) {
      counts.unrecoverable++;
      log.error({ sequenceId: record.sequenceId, state: record.state }, 'submission lost and no payload kept, cannot recreate');
      return;
    }
    const jobId = `resume-${record.sequenceId}-${randomUUID().slice(0, 8)}`;
    const taken = await ledger.transition(record.sequenceId, op.handOver(record.state, jobId));
    if (!taken.ok) return; // it moved meanwhile: something is driving it
    await deps.submitQueue.add(QueueName.SUBMIT, JSON.parse(record.payload), { jobId });
    counts.resubmitted++;
    log.warn({ sequenceId: record.sequenceId, previousJob: record.jobId, jobId, state: record.state }, 'lost submission recreated');
  }

  /**
   * A submit job that failed before its transfer had a ledger record is invisible to repairActive,
   * which starts from records, and would never get a terminal event. Our processor fails a job only
   * when it refuses it for good (another job name, data that is not JSON: both left alone here); any
   * other failed submit job failed for Redis trouble (a move refused mid-failover, too many stalls).
   * Each such job whose sequenceId has no record is retried: the handler starts the transfer afresh,
   * or finds it ended. One whose transfer has a record is repairActive's (ensureSubmitJob).
   */
  async function retryFailedWithoutRecord(counts: ReconcileCounts, log: JobContext['log'], stop: () => boolean): Promise<void> {
    for (let start = 0; ; start += INDEX_PAGE) {
      const ids = await deps.submitQueue.getRanges(['failed'], start, start + INDEX_PAGE - 1, true);
      let retried = 0;
      for (const id of ids) {
        if (stop()) return;
        const job = await deps.submitQueue.getJob(id).catch(() => undefined); // data that is not JSON: refused, left as it is
        if (!job || job.name !== QueueName.SUBMIT) continue;
        // Read as the handler keys a rejection too; without one, retrying makes the handler reject it.
        const { sequenceId } = describeInvalidPayload(job.data);
        if (sequenceId !== '' && (await ledger.get(sequenceId)) !== undefined) continue;
        if ((await job.getState()) !== 'failed') continue; // retried meanwhile (an operator, another path)
        const fields = { sequenceId, jobId: id, failedReason: job.failedReason?.slice(0, 200) };
        if (!(await retryFailed(job, counts, log, fields))) continue;
        retried++;
        log.warn(fields, 'failed submission without a record retried');
      }
      // A retried job left the failed set, so the next page starts that many earlier.
      start -= retried;
      if (ids.length < INDEX_PAGE) return;
    }
  }

  /**
   * Retries a failed submit job unless reconciliation retried it RECONCILE_MAX_RETRIES times already
   * (counted per job in the worker's own key): then it is left failed, logged and counted once, and
   * passed over silently from then on. Returns whether it was retried.
   */
  async function retryFailed(job: Job, counts: ReconcileCounts, log: JobContext['log'], fields: object): Promise<boolean> {
    const verdict = await ledger.reconcileRetry({ id: job.id!, timestamp: job.timestamp }, RECONCILE_MAX_RETRIES);
    if (verdict === 'retry') {
      await job.retry('failed');
      counts.resubmitted++;
      deps.onRetry?.('retried');
      return true;
    }
    if (verdict === 'give-up') {
      deps.onRetry?.('gave-up');
      log.error(
        { ...fields, retries: RECONCILE_MAX_RETRIES, failedReason: job.failedReason?.slice(0, 200) },
        `failed submission retried ${RECONCILE_MAX_RETRIES} times by reconciliation and failed again: left failed, not retried any more (retry it by hand once the cause is fixed)`,
      );
    }
    return false;
  }

  /** Broadcast transfers re-checked once: get-transfer by txId (4.1) and the wallet transaction (4.3). */
  async function verifyBroadcasts(started: number, counts: ReconcileCounts, log: JobContext['log'], stop: () => boolean): Promise<void> {
    const due = await ledger.dueBroadcasts(started - deps.graceMs, VERIFY_WINDOW_MS, INDEX_PAGE);
    const budgetEnds = now() + VERIFY_BUDGET_MS;
    for (const [index, sequenceId] of due.entries()) {
      if (stop()) return;
      if (now() > budgetEnds) {
        log.info({ left: due.length - index }, 'verification budget spent, the rest next run');
        return;
      }
      const record = await ledger.get(sequenceId);
      if (!record?.txid) {
        await ledger.verified(sequenceId);
        continue;
      }
      try {
        const wallet = { walletId: record.walletId, coin: record.coin };
        // The lowest class of the budget: whatever sends, polls and enrichment leave.
        const budget = { klass: BudgetClass.VERIFY, member: sequenceId };
        const known = {
          sequenceId,
          ...record.match,
          firstSentAt: record.firstSentAt,
          heldByOthers: (records: readonly ListedTransfer[]) => ledger.heldByOthers(sequenceId, records),
        };
        const found = await deps.custody.findTransfer(wallet, known, { budget, txid: record.txid });
        if (found.kind === 'ambiguous') deps.onAmbiguous?.('reconcile');
        const walletTx = await deps.custody.getWalletTransaction(wallet, record.txid, { budget }).catch((error: unknown) => {
          if (isCustodyError(error) && error.budgetRefused) throw error;
          return null;
        });
        const problems: string[] = [];
        if (found.kind !== 'found') problems.push(`get-transfer by txId: ${found.kind}`);
        if (walletTx && !txidEquals(walletTx.txid, record.txid)) problems.push('wallet transaction txid differs');
        counts.verified++;
        if (problems.length > 0) {
          counts.mismatches++;
          log.warn({ sequenceId, txid: record.txid, problems }, 'broadcast transfer does not verify');
        }
        await ledger.verified(sequenceId);
      } catch (error) {
        if (isCustodyError(error) && error.budgetRefused) {
          log.info({ left: due.length - index }, 'request budget spent by higher classes, the rest next run');
          return;
        }
        counts.verifyErrors++;
        log.warn({ err: error, sequenceId }, 'broadcast verification failed, retried next run');
      }
    }
  }
}
