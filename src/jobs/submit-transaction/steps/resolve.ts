import { FailureCode } from '../../../../packages/producer/src/events.ts';
import { BudgetClass } from '../../../custody/budget.ts';
import { TransferState, type TransferRecord } from '../../../ledger/ledger.ts';
import { op } from '../../../ledger/operations.ts';
import type { TransferFinding } from '../../../custody/port.ts';
import { CustodyError } from '../../../custody/errors.ts';
import { refused, type Run, type Step } from './context.ts';
import { cannotTell, identify, lookUp } from './lookup.ts';
import { lookThenSend, takeAndSend } from './send.ts';
import { expireUnsettled, fail, inUse, lookupAttempt, releaseAndRetry, stillUnknown, submittedByLookup } from './settle.ts';

/**
 * Found in `submitting` (a send failed before, or a runner crashed or outlived its lease): take the
 * lease, then
 * - the sequenceId was found in use by another transaction (SEQUENCE_ID_IN_USE): send nothing, look
 *   nothing up, wait for an operator until TRACK_DEADLINE;
 * - no send was made yet: send;
 * - every send so far was answered "not taken": look, then resend (lookBeforeResend);
 * - a send may have gone out: look, and settle from what the lookup proves (settleUnknown).
 */
export async function resolve(run: Run, record: TransferRecord): Promise<Step> {
  const taken = await run.deps.ledger.transition(record.sequenceId, op.takeLease(run.owner, run.deps.sendLeaseMs));
  if (!taken.ok) return refused(taken);
  const held = taken.record;
  // `updatedAt` is the ledger's clock at the take, so the time guards never use this process's.
  const ledgerNow = held.updatedAt;
  if (held.inUseSince !== undefined) return parkInUse(run, held, ledgerNow);
  if (held.unknownSince !== undefined) return settleUnknown(run, held, ledgerNow);
  if (held.sends === 0) {
    // No send was ever made (a runner stopped between its lease and its send, or its lookup).
    return run.deps.lookupBeforeFirstSend
      ? lookThenSend(run, held, TransferState.SUBMITTING)
      : takeAndSend(run, held, TransferState.SUBMITTING);
  }
  return lookBeforeResend(run, held);
}

/**
 * Every send so far was proven "not taken", so no record upstream can be this transfer's: one that
 * carries our sequenceId is another transaction's (SEQUENCE_ID_IN_USE, as a 409 would be). Records
 * without a sequenceId prove nothing either way (the wallet's other transfers, when the list is not
 * narrowed): the resend's own answer decides, and a 409 to it means the same.
 */
async function lookBeforeResend(run: Run, held: TransferRecord): Promise<Step> {
  let taken: boolean;
  let found: TransferFinding;
  try {
    found = await lookUp(run, held, BudgetClass.SEND);
    // A record carrying our sequenceId, readable or not, one or several: the sequenceId is in use.
    taken = found.kind === 'unreadable' || ((found.kind === 'found' || found.kind === 'ambiguous') && found.bySequenceId === true);
  } catch (error) {
    const code = error instanceof CustodyError ? error.code : 'INTERNAL_ERROR';
    // No resend without a look: try again later (failed once SUBMIT_ATTEMPTS runs could not look).
    // `failed` claims nothing about upstream here: every send was answered "not taken" (the ledger
    // refuses it once one may have been processed), and an unreadable answer is a finding, not this.
    run.log.warn({ err: error, code }, 'lookup before a resend failed');
    if (held.failures + 1 >= run.deps.attempts) {
      return fail(
        run,
        held,
        { kind: 'refused', code: held.lastError ?? code, httpStatus: null, message: 'retries exhausted', retryAfterMs: undefined },
        0,
        lookupAttempt('error', code),
      );
    }
    return releaseAndRetry(run, held, { extraSends: 0, attempt: lookupAttempt('error', code) }, code);
  }
  if (taken) {
    return inUse(
      run,
      held,
      {
        kind: 'in-use',
        code: 'SEQUENCE_ID_IN_USE',
        httpStatus: null,
        message: 'lookup shows the sequenceId in use',
        retryAfterMs: undefined,
      },
      0,
      lookupAttempt(found.kind),
    );
  }
  return takeAndSend(run, held, TransferState.SUBMITTING, held.updatedAt, found.kind);
}

/**
 * A send may have gone out. Look first, even past the deadline (a transfer upstream shows is
 * submitted, not expired): found → submitted; an answer that cannot tell (several candidates, or one
 * record without our sequenceId from a provider that does not narrow) → never resend, never claim,
 * the transfer stays unsettled (sticky) and gets `transfer.unresolved` at UNRESOLVED_AFTER; not found
 * → resend while fewer than SUBMIT_ATTEMPTS sends were made, else keep looking at the capped backoff.
 */
async function settleUnknown(run: Run, held: TransferRecord, ledgerNow: number): Promise<Step> {
  const pastDeadline = ledgerNow - held.unknownSince! >= run.deps.deadlineMs;
  let found: TransferFinding;
  try {
    found = await identify(run, held, BudgetClass.SETTLE);
  } catch (error) {
    const code = error instanceof CustodyError ? error.code : 'INTERNAL_ERROR';
    run.log.warn({ err: error, code }, 'lookup of a send with unknown outcome failed');
    if (pastDeadline) return expireUnsettled(run, held, FailureCode.SEND_OUTCOME_UNKNOWN, lookupAttempt('error', code));
    return stillUnknown(run, held, code, ledgerNow, 0, lookupAttempt('error', code));
  }
  if (found.kind === 'found') {
    return submittedByLookup(run, held, found.transfer, { level: 'info', msg: 'earlier send found by lookup' });
  }
  if (found.kind === 'ambiguous' || found.kind === 'unreadable') {
    run.deps.onAmbiguous?.('resolve');
    if (!pastDeadline) {
      // One of the candidates may be ours: a resend could be a second payment, a claim a wrong one.
      run.log.warn(cannotTell(found), 'lookup cannot tell which record is ours: no resend');
      return stillUnknown(run, held, held.lastError ?? 'SEND_OUTCOME_UNKNOWN', ledgerNow, 0, lookupAttempt(found.kind));
    }
  }
  if (pastDeadline) return expireUnsettled(run, held, FailureCode.SEND_OUTCOME_UNKNOWN, lookupAttempt(found.kind));
  if (held.sends < run.deps.attempts) return takeAndSend(run, held, TransferState.SUBMITTING, held.updatedAt, found.kind);
  return stillUnknown(run, held, held.lastError ?? 'SEND_OUTCOME_UNKNOWN', ledgerNow, 0, lookupAttempt(found.kind));
}

/**
 * SEQUENCE_ID_IN_USE: nothing is sent or looked up again (the other transaction's records would be
 * read as ours); an operator settles it (docs/operations.md), else it expires at TRACK_DEADLINE with
 * that code (none of our sends was accepted: the outcome is known, not "unknown").
 */
async function parkInUse(run: Run, held: TransferRecord, ledgerNow: number): Promise<Step> {
  if (ledgerNow - held.inUseSince! >= run.deps.deadlineMs) return expireUnsettled(run, held, FailureCode.SEQUENCE_ID_IN_USE);
  return releaseAndRetry(run, held, { extraSends: 0 }, 'sequenceId in use upstream');
}
