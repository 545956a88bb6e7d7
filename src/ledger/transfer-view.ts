import type { TransferEvent } from '../../packages/producer/src/events.ts';
import type { Ledger } from './ledger.ts';
import { TransferState } from './states.ts';

/** What operators see of one transfer (HTTP `GET /transfers/:sequenceId`, CLI `status`). */
export interface TransferView {
  sequenceId: string;
  state: string;
  walletId: string | undefined;
  coin: string | undefined;
  /** sendTransaction requests made for it. */
  attempts: number;
  failures: number;
  lastError: string | null;
  txid: string | null;
  gate: unknown;
  createdAt: string | null;
  updatedAt: string | null;
  submittedAt: string | null;
  /**
   * While the transfer is `submitting`: when a send's outcome first became unknown ("may have been
   * sent"). Null when never, and once the transfer left `submitting` (a lookup found the send, or it
   * ended): the record keeps the time (sticky, the ledger decides by it), but the outcome is known then.
   */
  sendOutcomeUnknownSince: string | null;
  /** When `transfer.unresolved` was published; null when it was not. */
  unresolvedAt: string | null;
  /** When the sequenceId was found in use by a transaction this worker cannot claim (SEQUENCE_ID_IN_USE); null when never. */
  sequenceIdInUseSince: string | null;
  /**
   * The end of the send lease as stored (Redis time), null when nobody holds it. A past time means it
   * has run out: a runner died or outlived it, and the next runner (or an operator) may take over.
   */
  leaseUntil: string | null;
  version: number;
  events: TransferEvent[];
}

/** The transfer's ledger record and its events so far; undefined when the sequenceId is unknown. */
export async function transferView(ledger: Ledger, sequenceId: string): Promise<TransferView | undefined> {
  const record = await ledger.get(sequenceId);
  if (!record) return undefined;
  const iso = (ms: number | undefined) => (ms === undefined || ms === 0 ? null : new Date(ms).toISOString());
  return {
    sequenceId,
    state: record.state,
    walletId: record.walletId,
    coin: record.coin,
    attempts: record.sends,
    failures: record.failures,
    lastError: record.lastError ?? null,
    txid: record.txid ?? null,
    gate: record.gate ?? null,
    createdAt: iso(record.createdAt),
    updatedAt: iso(record.updatedAt),
    submittedAt: iso(record.submittedAt),
    sendOutcomeUnknownSince: record.state === TransferState.SUBMITTING ? iso(record.unknownSince) : null,
    unresolvedAt: iso(record.unresolvedAt),
    sequenceIdInUseSince: iso(record.inUseSince),
    leaseUntil: record.leaseOwner === undefined ? null : iso(record.leaseUntil),
    version: record.version,
    events: await ledger.events(sequenceId),
  };
}
