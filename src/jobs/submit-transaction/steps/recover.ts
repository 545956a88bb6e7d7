import { BudgetClass } from '../../../custody/budget.ts';
import { CustodyError } from '../../../custody/errors.ts';
import type { TransferState, TransferRecord } from '../../../ledger/ledger.ts';
import { op } from '../../../ledger/operations.ts';
import type { TransferFinding } from '../../../custody/port.ts';
import { RetryLater } from '../../../queues/outcomes.ts';
import { refused, type Run, type Step } from './context.ts';
import { cannotTell, identify } from './lookup.ts';
import { lookupAttempt, release, releaseAndRetry, stillUnknown, submittedByLookup } from './settle.ts';

/**
 * The ledger refused a first send because it is recovering from a loss (epoch.ts): this transfer may
 * have lived before, in the ledger Redis forgot, and its send may have been accepted then. So it is
 * looked up first, and the answer decides as for any send that may have been processed
 * (docs/contract.md section 4a):
 * - found: submitted, with no send;
 * - ambiguous (several candidates, or a record without our sequenceId from a provider that does not
 *   narrow) or unreadable (our record is there, unreadable): never sent, never claimed; the transfer stays unsettled (sticky) and gets
 *   `transfer.unresolved` at UNRESOLVED_AFTER;
 * - absent: the caller sends, telling the ledger that the lookup came first (`{ absent }`).
 * Whatever the answer, the transfer may have been sent in the life the ledger lost, and lookups lag:
 * it is marked as such (sticky `unknownSince`), so that a refusal of a send of this life never ends it
 * `failed` (docs/contract.md section 4: only an operator may then); it ends submitted, or unresolved.
 * The lease is taken first (the transfer moves to `submitting` without a send in flight), so no other
 * runner sends meanwhile; a crash leaves `submitting` with no send, and the next runner comes here again.
 * The lookup is made no sooner than one send lease after the loss was recorded.
 *
 * `afterLoss: false` (LOOKUP_BEFORE_FIRST_SEND, outside a recovery): the same lookup before a first
 * send, for a provider that does not refuse a reused sequenceId, without the sticky mark and the wait:
 * nothing says a send was ever made, so a refusal of the send that follows may still end `failed`.
 */
export async function lookFirst(
  run: Run,
  record: TransferRecord,
  from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
  afterLoss = true,
): Promise<{ settled: Step } | { absent: TransferRecord }> {
  const request = afterLoss
    ? op.takeLeaseAfterLoss(run.owner, run.deps.sendLeaseMs, from)
    : op.takeLease(run.owner, run.deps.sendLeaseMs, from);
  const taken = await run.deps.ledger.transition(record.sequenceId, request);
  if (!taken.ok) return { settled: refused(taken) };
  const held = taken.record;
  // A send of the lost ledger's life may still be in flight, written inside its runner's lease; a
  // lookup made before that lease surely ended could miss it. The lookup waits one lease from when
  // the loss was recorded (the lease is given back meanwhile).
  const quietAt = afterLoss ? (run.deps.ledger.epoch.state?.lostAt ?? 0) + run.deps.sendLeaseMs : 0;
  if (held.updatedAt < quietAt) {
    const released = await release(run, held, { extraSends: 0 });
    if (!released.ok) return { settled: refused(released) };
    throw new RetryLater(quietAt - held.updatedAt, 'ledger lost: waiting for sends of its old life to end');
  }
  let found: TransferFinding;
  try {
    found = await identify(run, held, BudgetClass.SEND);
  } catch (error) {
    const code = error instanceof CustodyError ? error.code : 'INTERNAL_ERROR';
    run.log.warn(
      { err: error, code },
      afterLoss ? 'lookup before a first send after the ledger was lost failed' : 'lookup before a first send failed',
    );
    return { settled: await releaseAndRetry(run, held, { extraSends: 0, attempt: lookupAttempt('error', code) }, code) };
  }
  if (found.kind === 'found') {
    const line = afterLoss
      ? ({ level: 'warn', msg: 'transfer found upstream after the ledger was lost: submitted, not sent again' } as const)
      : ({ level: 'warn', msg: 'transfer found upstream before its first send: submitted, not sent' } as const);
    return { settled: await submittedByLookup(run, held, found.transfer, line) };
  }
  if (found.kind === 'ambiguous' || found.kind === 'unreadable') {
    run.deps.onAmbiguous?.('resolve');
    run.log.warn(cannotTell(found), 'the lookup before a first send cannot tell which record is ours: no send');
    return { settled: await stillUnknown(run, held, 'SEND_OUTCOME_UNKNOWN', held.updatedAt, 0, lookupAttempt(found.kind)) };
  }
  return { absent: held };
}
