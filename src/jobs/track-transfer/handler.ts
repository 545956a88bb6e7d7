import { z } from 'zod';
import { FailureCode } from '../../../packages/producer/src/events.ts';
import { op } from '../../ledger/operations.ts';
import { BROADCAST_VIEW, TRACKING_VIEW, TransferState, type Ledger, type TrackingView } from '../../ledger/ledger.ts';
import { RetryLater, WaitForSlot } from '../../queues/outcomes.ts';
import {
  backoffDelay,
  ENRICH_ATTEMPTS,
  POLL_FAILURES_ALERT,
  TRACK_ERROR_RETRY,
  trackPollDelay,
  trackPollProfile,
  UNMATCHED_POLLS_ALERT,
  type BackoffProfile,
} from '../../timing.ts';
import type { JobContext } from '../../queues/processor.ts';
import type { CustodyPort, KnownTransfer, ListedTransfer, TransferFinding, WalletTransaction } from '../../custody/port.ts';
import { BudgetClass } from '../../custody/budget.ts';
import { CustodyErrorCode, isCustodyError } from '../../custody/errors.ts';
import { sequenceIdSchema } from '../../../packages/producer/src/sequence-id.ts';
import { SettledListing } from './settled-listing.ts';

/**
 * How long one process remembers a listed transfer with nothing left to settle, and how many at most
 * (SettledListing): an answer that is not narrowed lists the wallet's newest transfers on every poll.
 */
const SETTLED_LISTING_TTL_MS = 10 * 60_000;
const SETTLED_LISTING_CAPACITY = 10_000;

export const trackPayloadSchema = z.object({ sequenceId: sequenceIdSchema });

export interface TrackDeps {
  ledger: Ledger;
  custody: Pick<CustodyPort, 'findTransfer' | 'getWalletTransaction'>;
  pollMinMs: number;
  pollMaxMs: number;
  /**
   * The tracking queue hands out jobs at the budget's pace (a BullMQ limiter: CUSTODY_MAX_RPS > 0), so
   * a poll the budget turned away makes the whole queue wait for the next slot (WaitForSlot). Without
   * a limit only a provider's 429 turns polls away, rarely: each is then put back on its own.
   */
  pacedByBudget: boolean;
  /**
   * Count each poll on the transfer's record as the record is read (Ledger.readCounting) instead of
   * by a command of the budget's: without a limit the budget makes no Redis call of its own per
   * request (CUSTODY_MAX_RPS=0). With a limit its admission script counts the call anyway.
   */
  countPollOnRead?: boolean;
  deadlineMs: number;
  errorRetry?: BackoffProfile;
  now?: () => number;
  /** Several records matched one transfer (no guess was made). */
  onAmbiguous?: (step: 'track') => void;
  /** A poll failed; `streak` counts this transfer's consecutive failures. */
  onPollFailed?: (streak: number) => void;
  /** UNMATCHED_POLLS_ALERT polls in a row listed a `send` of the wallet that matched nothing (once per transfer). */
  onUnmatched?: () => void;
  /**
   * The provider says the transfer will get no txid unless someone acts (ListedTransfer.halted): once
   * per transfer in a state that is not final, and once more when a final state ends it.
   */
  onHalted?: (upstreamState: string) => void;
  /** The budget turned a poll away: the tracking queue waits `ms` for the next free slot. */
  onPollStretched?: (ms: number) => void;
  /** The transfer was broadcast; `calls`: the upstream calls made for it. */
  onBroadcast?: (calls: number) => void;
  /**
   * Runs the tracking job of another transfer now (it was delayed): used when this poll's answer
   * listed that transfer with its txid, so its own run goes straight to the wallet-transaction lookup.
   */
  wake?: (sequenceId: string) => Promise<void>;
  /** Another tracked transfer was found, txid and all, in this transfer's answer (one poll saved). */
  onFoundForOther?: () => void;
}

export type TrackResult = { outcome: 'broadcast' | 'expired' | 'halted' | 'not-tracking'; sequenceId: string; state?: string };

/**
 * The `track-transfer` job: one per transfer, polling get-transfer by sequenceId and re-delaying
 * itself (capped exponential backoff, jittered) until a txid shows up or the deadline passes. It
 * holds no state of its own besides the ledger, so a lost or duplicated tracker is harmless: a
 * recreated one continues, and the guarded transition makes sure only one broadcast is published.
 */
export function createTrackHandler(deps: TrackDeps) {
  const now = deps.now ?? Date.now;
  const pollProfile = trackPollProfile(deps.pollMinMs, deps.pollMaxMs);
  const errorProfile = deps.errorRetry ?? { ...TRACK_ERROR_RETRY, maxMs: deps.pollMaxMs };
  const settled = new SettledListing(SETTLED_LISTING_TTL_MS, SETTLED_LISTING_CAPACITY, now);

  return async ({ job, log }: JobContext): Promise<TrackResult> => {
    const parsed = trackPayloadSchema.safeParse(job.data);
    if (!parsed.success) {
      log.error('tracking job without a valid sequenceId, dropped');
      return { outcome: 'not-tracking', sequenceId: '' };
    }
    const { sequenceId } = parsed.data;
    const record = deps.countPollOnRead
      ? await deps.ledger.readCounting(sequenceId, TRACKING_VIEW, { state: TransferState.SUBMITTED, unless: 'txid' })
      : await deps.ledger.read(sequenceId, TRACKING_VIEW);
    if (!record || record.state !== TransferState.SUBMITTED) {
      // Already ended (or never submitted): a late duplicate tracker has nothing to do.
      return { outcome: 'not-tracking', sequenceId, state: record?.state ?? 'unknown' };
    }
    const submittedAt = record.submittedAt ?? record.updatedAt;
    const deadline = submittedAt + deps.deadlineMs;
    // Never a record dated before our first send, nor one the ledger holds for another transfer: an
    // earlier twin (same address, same amount) listed before ours is not ours (matching.ts).
    const match: KnownTransfer = {
      sequenceId,
      ...record.match,
      firstSentAt: record.firstSentAt,
      heldByOthers: (records) => deps.ledger.heldByOthers(sequenceId, records),
    };

    if (record.txid !== undefined) {
      // Found with its txid by an earlier run whose wallet-transaction lookup had to wait: no new poll.
      const found = await deps.ledger.found(sequenceId);
      if (isListedTransfer(found) && found.txid === record.txid) return broadcast(record, found, log);
    }

    // Counted by the read unless the record had a txid (readCounting's `unless`): then the budget counts it.
    const counted = deps.countPollOnRead === true && record.txid === undefined;
    let found: TransferFinding;
    try {
      found = await deps.custody.findTransfer({ walletId: record.walletId, coin: record.coin }, match, {
        budget: { klass: BudgetClass.POLL, member: sequenceId, dispensed: true, counted },
      });
    } catch (error) {
      if (isCustodyError(error) && error.budgetRefused) {
        // A higher class took the slot: not a failure. The whole queue waits for the next free slot
        // (nothing else is fetched meanwhile) and this job goes back to wait, first in line for it.
        // Never expired for that: the deadline needs a poll that was made.
        const waitMs = error.retryAfterMs ?? deps.pollMinMs;
        deps.onPollStretched?.(waitMs);
        throw deps.pacedByBudget ? new WaitForSlot(waitMs) : new RetryLater(waitMs, 'provider pause');
      }
      // Upstream trouble never loses the tracker: count it and poll again later (or expire at the deadline).
      const failures = record.pollFailures + 1;
      await deps.ledger.transition(sequenceId, op.pollFailed(failures));
      deps.onPollFailed?.(failures);
      const level = failures >= POLL_FAILURES_ALERT ? 'error' : 'warn';
      log[level]({ err: error, failures }, 'poll failed, tracking continues');
      return expireOrWait(record, deadline, backoffDelay(errorProfile, failures), log);
    }

    if (deps.wake && found.others.size > 0) await settleOthers(record, found.others, log);
    if (found.kind === 'ambiguous') {
      deps.onAmbiguous?.('track');
      log.warn({ candidates: found.candidates }, 'several transactions match, not guessing');
    } else if (found.kind === 'unreadable') {
      deps.onAmbiguous?.('track');
      log.warn('the record carrying the sequenceId could not be read, not guessing');
    }
    if (found.kind === 'found' && found.transfer.txid !== '') {
      return broadcast(record, found.transfer, log);
    }
    if (found.kind === 'found' && found.transfer.halted?.final === true) {
      return halt(record, found.transfer, found.transfer.halted.state, log);
    }
    if (found.kind === 'found' && found.transfer.halted !== undefined && record.haltedAs === undefined) {
      // Dropped by a re-org, …: not final (it may be mined again), so not an end. It is reported once,
      // and tracking goes on until the provider moves on, an operator acts or TRACK_DEADLINE ends it.
      const upstreamState = found.transfer.halted.state.slice(0, 64);
      await deps.ledger.transition(sequenceId, op.haltedForNow(upstreamState));
      deps.onHalted?.(upstreamState);
      log.error(
        { upstreamState, transactionId: found.transfer.id },
        'the provider halted the transfer without a txid: an operator must act',
      );
    }
    if (found.kind === 'found') await noteApproval(record, found.transfer);
    if (found.kind === 'found' && match.transactionId === undefined) {
      // Remember the record id: a later answer is then matched by id, the cheapest sure way.
      match.transactionId = found.transfer.id;
      const identified = await deps.ledger.transition(sequenceId, op.identified(match));
      // Another transfer claimed this record since it was weighed: the next poll weighs it again.
      if (!identified.ok && identified.reason === 'claimed')
        log.warn({ transactionId: found.transfer.id }, 'record claimed by another transfer meanwhile');
    } else if (found.kind === 'absent' && record.unmatchedPolls < UNMATCHED_POLLS_ALERT && found.sendsListed > 0) {
      // The wallet's sends are listed but none is ours: not visible yet, or a match that can never
      // succeed (an amount or address upstream writes differently). Counted and logged once, so the
      // second kind is seen long before TRACK_DEADLINE. Counting stops at the alert: a write per poll
      // would keep the transfer's last change fresh and hide it from the stale-transfer alerts.
      const unmatched = record.unmatchedPolls + 1;
      await deps.ledger.transition(sequenceId, op.unmatched(unmatched));
      if (unmatched === UNMATCHED_POLLS_ALERT) {
        deps.onUnmatched?.();
        log.warn(
          {
            unmatchedPolls: unmatched,
            sends: found.sendsListed,
            compared: found.compared,
            matchAmount: match.amount,
          },
          'transfer not matched in get-transfer answers that list sends of its wallet',
        );
      }
    } else if (record.pollFailures > 0) {
      await deps.ledger.transition(sequenceId, op.pollAnswered());
    }
    return expireOrWait(record, deadline, trackPollDelay(pollProfile, now() - submittedAt), log);
  };

  /**
   * A provider that does not narrow its answers lists the wallet's other transfers too. Each one that
   * carries the sequenceId of another transfer of ours being tracked, with its txid (the adapter
   * identified it: TransferFinding.others), is recorded as found (Ledger.rememberFound, op.txidFound)
   * and its tracker woken: its next run makes the wallet-transaction lookup without a poll of its own.
   * Best effort: whatever fails here, that transfer's own polls go on. A listed transfer found with
   * nothing left to do (not ours, ended, its txid already noted) is not read again while this process
   * remembers it (SettledListing): the same newest transfers are listed by every answer.
   */
  async function settleOthers(record: TrackingView, others: TransferFinding['others'], log: JobContext['log']): Promise<void> {
    for (const [other, transfer] of others) {
      if (transfer.txid === '' || settled.has(other)) continue;
      // Claimed before the read: the concurrent polls of this process that list it too skip it.
      settled.add(other);
      try {
        const view = await deps.ledger.read(other, TRACKING_VIEW);
        if (!view || view.state !== TransferState.SUBMITTED || view.txid !== undefined) continue;
        if (view.walletId !== record.walletId) {
          settled.delete(other); // not this wallet's answer to settle it from
          continue;
        }
        await deps.ledger.rememberFound(other, transfer);
        const noted = await deps.ledger.transition(other, op.txidFound(transfer));
        if (!noted.ok) continue;
        deps.onFoundForOther?.();
        await deps.wake!(other);
      } catch (err) {
        settled.delete(other);
        log.warn({ err, other }, "could not record a transfer found in another transfer's answer; its own polls go on");
      }
    }
  }

  /**
   * Whether the provider waits for an approval of the transfer, recorded when it changes only: stamped
   * by the first poll that sees it (op.approvalPending), cleared by the first that no longer does.
   */
  async function noteApproval(record: TrackingView, transfer: ListedTransfer): Promise<void> {
    const waiting = transfer.awaitingApproval === true;
    if (waiting === (record.approvalSince !== undefined)) return;
    await deps.ledger.transition(record.sequenceId, waiting ? op.approvalPending() : op.approvalEnded());
  }

  async function broadcast(record: TrackingView, transaction: ListedTransfer, log: JobContext['log']): Promise<TrackResult> {
    const sequenceId = record.sequenceId;
    let walletTransaction: WalletTransaction | null = null;
    try {
      walletTransaction = await deps.custody.getWalletTransaction({ walletId: record.walletId, coin: record.coin }, transaction.txid, {
        budget: { klass: BudgetClass.ENRICH, member: sequenceId, dispensed: true },
      });
    } catch (error) {
      if (isCustodyError(error) && error.budgetRefused) {
        // Our own budget, not the provider: not an enrichment failure. The found record is kept so the
        // next run goes straight to this lookup instead of polling again.
        if (record.txid !== transaction.txid) {
          await deps.ledger.rememberFound(sequenceId, transaction);
          await deps.ledger.transition(sequenceId, op.txidFound(transaction));
        }
        const waitMs = error.retryAfterMs ?? deps.pollMinMs;
        throw deps.pacedByBudget ? new WaitForSlot(waitMs) : new RetryLater(waitMs, 'provider pause');
      }
      const final = isCustodyError(error) && (error.code === CustodyErrorCode.NOT_FOUND || !error.retryable);
      const tries = record.enrichFailures + 1;
      if (!final && tries < ENRICH_ATTEMPTS) {
        await deps.ledger.transition(sequenceId, op.enrichFailed(tries));
        log.warn({ err: error, tries }, 'wallet transaction lookup failed, retrying');
        throw new RetryLater(backoffDelay(errorProfile, tries), 'wallet transaction lookup failed');
      }
      log.info({ code: isCustodyError(error) ? error.code : 'INTERNAL_ERROR' }, 'wallet transaction not available, broadcast without it');
    }
    const result = await deps.ledger.transitionReading(
      sequenceId,
      op.broadcast(transaction.txid, now(), { txid: transaction.txid, transaction, walletTransaction }),
      BROADCAST_VIEW,
    );
    if (result.ok) {
      deps.onBroadcast?.(result.record.calls);
      log.info({ txid: transaction.txid, calls: result.record.calls }, 'transfer broadcast');
    } else if (result.reason === 'claimed') {
      // Another transfer claimed this record or txid since it was weighed: not ours; polling goes on.
      log.warn({ txid: transaction.txid, transactionId: transaction.id }, 'record claimed by another transfer meanwhile');
      throw new RetryLater(deps.pollMinMs, 'found record claimed by another transfer');
    }
    return { outcome: 'broadcast', sequenceId };
  }

  /**
   * The provider reports a final state without a txid (ListedTransfer.halted): the transfer will never
   * reach the chain. `transfer.halted`, once (the ledger's guarded transition: a concurrent tracker's
   * copy is refused), and tracking ends; the tombstone stops any resend of the sequenceId.
   */
  async function halt(record: TrackingView, transfer: ListedTransfer, state: string, log: JobContext['log']): Promise<TrackResult> {
    const sequenceId = record.sequenceId;
    const upstreamState = state.slice(0, 64);
    const result = await deps.ledger.transition(sequenceId, op.halt({ state: upstreamState, providerTransferId: transfer.id }));
    if (result.ok) {
      deps.onHalted?.(upstreamState);
      log.error(
        { upstreamState, transactionId: transfer.id },
        'the provider ended the transfer before it reached the chain: transfer halted',
      );
    }
    return { outcome: 'halted', sequenceId };
  }

  async function expireOrWait(record: TrackingView, deadline: number, delayMs: number, log: JobContext['log']): Promise<TrackResult> {
    const sequenceId = record.sequenceId;
    // This process's clock says the deadline passed; the ledger's clock (which stamped submittedAt)
    // must agree, so a worker whose clock runs ahead does not expire a transfer early.
    const ledgerNow = now() >= deadline ? await deps.ledger.now() : undefined;
    if (ledgerNow !== undefined && ledgerNow < deadline) {
      throw new RetryLater(Math.max(1, Math.min(delayMs, deadline - ledgerNow)), 'no txid yet');
    }
    if (ledgerNow !== undefined) {
      const result = await deps.ledger.transition(
        sequenceId,
        op.expireTracking({
          code: FailureCode.TRACKING_DEADLINE,
          submittedAt: new Date(record.submittedAt ?? record.updatedAt).toISOString(),
          deadline: new Date(deadline).toISOString(),
        }),
      );
      if (result.ok) log.warn('tracking deadline reached without txid, transfer expired');
      return { outcome: 'expired', sequenceId };
    }
    // The last poll happens at the deadline itself, so a txid that arrives just in time still counts.
    throw new RetryLater(Math.max(1, Math.min(delayMs, deadline - now())), 'no txid yet');
  }
}

/** A record rememberFound kept (JSON: what identifies it survived; the rest rides along as given). */
function isListedTransfer(value: unknown): value is ListedTransfer {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Record<string, unknown>;
  return typeof record.id === 'string' && typeof record.txid === 'string' && record.txid !== '' && Array.isArray(record.outputs);
}
