import type { BudgetClass } from '../../../custody/budget.ts';
import { Deadline } from '../../../custody/deadline.ts';
import type { ListedTransfer, WalletRef } from '../../../custody/port.ts';
import type { TransferRecord } from '../../../ledger/ledger.ts';
import { findTransfer, type MatchResult } from '../../../transfers/match.ts';
import { storedPayload, type Run } from './context.ts';

/**
 * get-transfer by sequenceId for the transfer's wallet, under the send deadline, in the budget class
 * `klass`: the lookup before a resend goes with sends (it precedes one), settling an unknown outcome
 * comes right after them.
 */
export async function lookup<T>(
  run: Run,
  record: TransferRecord,
  klass: BudgetClass,
  then: (list: ListedTransfer[], wallet: WalletRef, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const payload = storedPayload(record);
  const wallet = { walletId: payload.walletId, coin: payload.coin };
  const deadline = new Deadline(run.deps.sendDeadlineMs);
  try {
    const budget = { klass, member: record.sequenceId };
    const list = await run.deps.custody.getTransfersBySequenceId(wallet, record.sequenceId, { signal: deadline.signal, budget });
    return await then(list, wallet, deadline.signal);
  } finally {
    deadline.clear();
  }
}

/**
 * Looks the transfer up by sequenceId and says what the answer proves (docs/contract.md section 4a):
 * found, absent, or ambiguous. A record without our sequenceId identifies nothing unless this provider
 * narrows its answers to the sequenceId asked for.
 */
export async function identify(run: Run, held: TransferRecord, klass: BudgetClass): Promise<MatchResult> {
  const sequenceId = held.sequenceId;
  const found = await lookup(run, held, klass, async (list, wallet, signal): Promise<MatchResult> => {
    const match = findTransfer(list, { sequenceId });
    if (
      match.kind === 'found' &&
      match.transaction.sequenceId !== sequenceId &&
      !(await run.deps.lookupNarrowing.narrows(wallet, signal))
    ) {
      return { kind: 'ambiguous', candidates: 1 };
    }
    return match;
  });
  // `updatedAt` is the ledger's clock at the lease take that preceded this lookup.
  if ((run.deps.ledger.epoch.state?.recoveryUntil ?? 0) > held.updatedAt) {
    run.deps.onRecoveryLookup?.(found.kind === 'none' ? 'absent' : found.kind);
  }
  return found;
}
