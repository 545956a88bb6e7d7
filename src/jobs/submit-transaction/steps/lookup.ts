import type { BudgetClass } from '../../../custody/budget.ts';
import { Deadline } from '../../../custody/deadline.ts';
import type { ListedTransfer, TransferFinding } from '../../../custody/port.ts';
import type { TransferRecord } from '../../../ledger/ledger.ts';
import { storedPayload, type Run } from './context.ts';

/**
 * Looks the transfer up by sequenceId, under the send deadline, in the budget class `klass`, and says
 * what the answer proves (docs/contract.md section 4a): found, absent, ambiguous (no guess is made: a
 * record without our sequenceId identifies nothing unless the provider narrows its answers) or
 * unreadable. The provider's adapter decides which listed transfer is ours (port.ts, findTransfer).
 * The lookup before a resend goes with sends (it precedes one), settling an unknown outcome comes
 * right after them.
 */
export async function identify(run: Run, held: TransferRecord, klass: BudgetClass): Promise<TransferFinding> {
  const found = await lookUp(run, held, klass);
  // `updatedAt` is the ledger's clock at the lease take that preceded this lookup.
  if ((run.deps.ledger.epoch.state?.recoveryUntil ?? 0) > held.updatedAt) {
    run.deps.onRecoveryLookup?.(found.kind === 'unreadable' ? 'ambiguous' : found.kind);
  }
  return found;
}

/** The lookup itself (identify, and the look before a resend). */
export async function lookUp(run: Run, held: TransferRecord, klass: BudgetClass): Promise<TransferFinding> {
  const sequenceId = held.sequenceId;
  const payload = storedPayload(held);
  const deadline = new Deadline(run.deps.sendDeadlineMs);
  try {
    const wallet = { walletId: payload.walletId, coin: payload.coin };
    // A lone record the ledger holds for another transfer is never taken for ours (matching.ts).
    const known = {
      sequenceId,
      firstSentAt: held.firstSentAt,
      heldByOthers: (records: readonly ListedTransfer[]) => run.deps.ledger.heldByOthers(sequenceId, records),
    };
    return await run.deps.custody.findTransfer(wallet, known, { signal: deadline.signal, budget: { klass, member: sequenceId } });
  } finally {
    deadline.clear();
  }
}

/** The log fields of a finding that cannot tell which record is ours. */
export function cannotTell(found: Extract<TransferFinding, { kind: 'ambiguous' | 'unreadable' }>): Record<string, unknown> {
  return found.kind === 'ambiguous' ? { candidates: found.candidates } : { unreadable: 'a record carrying the sequenceId' };
}
