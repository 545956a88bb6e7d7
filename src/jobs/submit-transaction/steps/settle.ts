import { FailureCode, type EventData } from '../../../../packages/producer/src/events.ts';
import { NO_VIEW, type SendView, type TransferRecord, type TransitionResult } from '../../../ledger/ledger.ts';
import { op, type Attempt, type LookupFinding, type Release } from '../../../ledger/operations.ts';
import type { RefusalReason } from '../../../ledger/request.ts';
import { TransferState } from '../../../ledger/states.ts';
import { RetryLater } from '../../../queues/outcomes.ts';
import { backoffDelay } from '../../../timing.ts';
import type { ListedTransfer } from '../../../custody/port.ts';
import type { SendFailure } from '../../../transfers/classify-send.ts';
import type { KnownTransfer } from '../../../custody/port.ts';
import { changed, REREAD, refused, SUBMITTED, type Run, type Step } from './context.ts';

/*
 * How a send (or the lookup standing in for one) ends for the lease holder: submitted, failed, still
 * unknown, in use by another transaction, or expired. Each is one named ledger operation.
 */

/** A send's entry in the attempts list: how the worker took its answer, and what the answer proved. */
export function sendAttempt(failure: SendFailure): Attempt {
  return {
    kind: 'send',
    outcome: failure.kind,
    ...(failure.proof === undefined ? {} : { proof: failure.proof }),
    ...(failure.httpStatus === null ? {} : { httpStatus: failure.httpStatus }),
    code: failure.code,
  };
}

/** A lookup's entry in the attempts list: what it found (`error`: no answer, with the error's code). */
export function lookupAttempt(finding: LookupFinding, code?: string): Attempt {
  return code === undefined ? { kind: 'lookup', finding } : { kind: 'lookup', finding, code };
}

/** The lease holder gives the lease up (the transfer stays in `submitting`). */
export function release(run: Run, record: SendView, release: Release): Promise<TransitionResult> {
  return run.deps.ledger.transition(record.sequenceId, op.release(run.owner, release));
}

/** Gives the lease up and comes back at the backoff for the record's failures (counting this one). */
export async function releaseAndRetry(run: Run, record: SendView, release: Release, why: string): Promise<never | typeof REREAD> {
  const released = await run.deps.ledger.transition(record.sequenceId, op.release(run.owner, { failures: 1, ...release }));
  if (!released.ok) return refused(released);
  throw new RetryLater(backoffDelay(run.deps.retry, released.record.failures), why);
}

/** The line logged once the transfer is marked submitted (only then: a refused mark logs nothing). */
export interface SubmittedLine {
  level: 'info' | 'warn';
  msg: string;
  fields?: Record<string, unknown>;
}

/** The refusals of a proven acceptance that leave it to record (anything else: someone else settled it). */
const PROVABLE: ReadonlySet<RefusalReason> = new Set(['owner', 'state', 'epoch']);
/** Each 'epoch' refusal is dealt with before the next try; a third in a row means the ledger is in flux. */
const PROVEN_TRIES = 3;

export async function markSubmitted(
  run: Run,
  record: SendView,
  data: EventData['transfer.submitted'],
  match: KnownTransfer,
  extraSends: number,
  line: SubmittedLine,
  attempt: Attempt,
): Promise<Step> {
  let marked = await run.deps.ledger.transitionReading(
    record.sequenceId,
    op.markSubmitted(run.owner, data, match, extraSends, attempt),
    NO_VIEW,
  );
  // Refused, though upstream accepted: the ledger no longer holds this runner's lease as it left it.
  // Another runner took it over (this send outlived it), or the ledger went back in time (refused
  // 'epoch': the loss is declared before the next try). What was proven stays true: recorded from the
  // state the ledger shows now, short of an end, rather than dropped for a lookup that may lag behind.
  for (
    let tries = 0;
    !marked.ok && PROVABLE.has(marked.reason) && marked.state !== TransferState.SUBMITTED && tries < PROVEN_TRIES;
    tries++
  )
    marked = await run.deps.ledger.transitionReading(record.sequenceId, op.markProven(data, match, extraSends, run.job, attempt), NO_VIEW);
  if (!marked.ok) return REREAD;
  // The provider's id of the accepted record, for a webhook that names it (a hint to poll sooner only):
  // one write more per submission, made only when the provider's webhooks are taken (wakeups).
  const recordId = data.transfer?.id;
  if (recordId !== undefined && run.deps.custody.wakeups !== undefined) {
    await run.deps.ledger.rememberAcceptedRecord(record.sequenceId, String(recordId)).catch(() => {});
  }
  run.log[line.level](line.fields ?? {}, line.msg);
  return SUBMITTED;
}

/** A lookup found the transfer upstream (`transaction`): submitted by that finding, with no send. */
export function submittedByLookup(run: Run, held: SendView, found: ListedTransfer, line: SubmittedLine): Promise<Step> {
  // `halted` is the adapter's reading of the record, not the provider's: tracking acts on it, events never carry it.
  const { halted: _halted, ...transaction } = found;
  const data = { transfer: null, recoveredBy: 'get-transfer' as const, transaction };
  return markSubmitted(
    run,
    held,
    data,
    { sequenceId: held.sequenceId, transactionId: transaction.id },
    0,
    { ...line, fields: { transactionId: transaction.id, ...line.fields } },
    lookupAttempt('found'),
  );
}

/** `transfer.failed`: only by the lease owner, and the ledger refuses it while a send may have gone out. */
export async function fail(
  run: Run,
  record: SendView,
  failure: SendFailure,
  extraSends: number,
  attempt: Attempt = sendAttempt(failure),
): Promise<Step> {
  const data = { code: failure.code, httpStatus: failure.httpStatus, message: failure.message, attempts: record.sends + extraSends };
  const failed = await run.deps.ledger.transition(record.sequenceId, op.fail(run.owner, data, extraSends, attempt));
  if (failed.ok) run.log.warn({ code: failure.code, httpStatus: failure.httpStatus }, 'transfer failed: every send was refused');
  return changed(failed);
}

/**
 * The send may have gone out and nothing settled it: record that (sticky), release the lease, publish
 * `transfer.unresolved` once when it has lasted UNRESOLVED_AFTER, and come back at the capped backoff.
 */
export async function stillUnknown(
  run: Run,
  record: SendView,
  code: string,
  ledgerNow: number | undefined,
  extraSends: number,
  attempt: Attempt,
): Promise<never | typeof REREAD> {
  const since = record.unknownSince;
  const announce =
    since !== undefined && ledgerNow !== undefined && record.unresolvedAt === undefined && ledgerNow - since >= run.deps.unresolvedAfterMs;
  const unresolved = announce
    ? { code: FailureCode.SEND_OUTCOME_UNKNOWN, attempts: record.sends + extraSends, lastError: code }
    : undefined;
  const released = await run.deps.ledger.transition(
    record.sequenceId,
    op.markUnknown(run.owner, { lastError: code, extraSends, failures: 1, attempt }, unresolved),
  );
  if (!released.ok) return refused(released);
  if (announce)
    run.log.error(
      { attempts: released.record.sends, lastError: code },
      'send outcome still unknown: transfer.unresolved published, an operator may resolve it',
    );
  throw new RetryLater(backoffDelay(run.deps.retry, released.record.failures), 'send outcome unknown');
}

/**
 * A 409 that nothing we did explains (no earlier send of this transfer may have been processed): the
 * sequenceId is in use upstream by a transaction we cannot claim. `transfer.unresolved`
 * SEQUENCE_ID_IN_USE at once; no tracker, no match; the sticky `inUseSince` stops every later send.
 */
export async function inUse(
  run: Run,
  record: SendView,
  failure: SendFailure,
  extraSends: number,
  attempt: Attempt = sendAttempt(failure),
): Promise<never | typeof REREAD> {
  const unresolved =
    record.unresolvedAt === undefined
      ? { code: FailureCode.SEQUENCE_ID_IN_USE, attempts: record.sends + extraSends, lastError: failure.code }
      : undefined;
  const released = await run.deps.ledger.transition(
    record.sequenceId,
    op.markInUse(run.owner, { lastError: failure.code, extraSends, failures: 1, attempt }, unresolved),
  );
  if (!released.ok) return refused(released);
  run.log.error(
    { attempts: released.record.sends },
    'sequenceId in use upstream by another transaction: transfer.unresolved published, an operator must resolve it',
  );
  throw new RetryLater(backoffDelay(run.deps.retry, released.record.failures), 'sequenceId in use upstream');
}

/**
 * TRACK_DEADLINE passed and nothing settled the transfer: `transfer.expired` with what kept it
 * unsettled. SEQUENCE_ID_IN_USE: the sequenceId was found in use by another transaction (sticky
 * `inUseSince`) and none of our sends was accepted, counted from then; SEND_OUTCOME_UNKNOWN: a send may
 * have gone out (sticky `unknownSince`), counted from then. The two never meet on one record (a 409
 * after a send that may have gone out proves that send accepted: classify-send.ts).
 */
export async function expireUnsettled(
  run: Run,
  record: TransferRecord,
  code: typeof FailureCode.SEND_OUTCOME_UNKNOWN | typeof FailureCode.SEQUENCE_ID_IN_USE,
  attempt?: Attempt,
): Promise<Step> {
  const since = (code === FailureCode.SEQUENCE_ID_IN_USE ? record.inUseSince : record.unknownSince) ?? record.updatedAt;
  const expired = await run.deps.ledger.transition(
    record.sequenceId,
    op.expireUnsettled(
      run.owner,
      {
        code,
        submittedAt: new Date(since).toISOString(),
        deadline: new Date(since + run.deps.deadlineMs).toISOString(),
      },
      attempt,
    ),
  );
  if (expired.ok) run.log.error({ sends: record.sends, code }, 'transfer never settled by TRACK_DEADLINE: transfer expired');
  return changed(expired);
}
