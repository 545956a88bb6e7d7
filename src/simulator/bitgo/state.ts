/**
 * Transfers and counters of the BitGo simulator. As in ../state.ts, no timer per transfer: a
 * transfer's state (pendingApproval → signed → signed with a txid) is derived on each read from
 * the times fixed when it was accepted, unless the control API forced one.
 */
import { randomBytes } from 'node:crypto';
import { BITGO_ENDPOINTS } from './settings.ts';
import type { BitgoEndpoint, BitgoSettings } from './settings.ts';

/**
 * The documented transfer states (BitGo/api-changelog api.yaml, TransferState1); the simulator reaches
 * pendingApproval and signed by itself, any other only when the control API forces it.
 */
export const BITGO_TRANSFER_STATES = [
  'initialized',
  'pendingApproval',
  'rejected',
  'signed',
  'unconfirmed',
  'confirmed',
  'removed',
  'failed',
  'replaced',
  'reversed',
  'deleted',
] as const;

export type BitgoTransferState = (typeof BITGO_TRANSFER_STATES)[number];

/** States in which the txid is never shown (the transaction was not signed). */
const UNSIGNED: ReadonlySet<BitgoTransferState> = new Set(['initialized', 'pendingApproval', 'rejected', 'deleted']);

export interface Recipient {
  address: string;
  /** Base units. */
  amount: bigint;
}

export interface BitgoTransfer {
  /** 1, 2, 3… in acceptance order. */
  ordinal: number;
  /** 32 lowercase hex, as every BitGo id. */
  id: string;
  coin: string;
  walletId: string;
  sequenceId: string;
  /** The pending approval's id when the transfer needed one. */
  pendingApprovalId: string | undefined;
  recipients: Recipient[];
  fee: bigint;
  /** The half-signed transaction as sent (halfSigned.txHex or txHex), echoed as `tx`. */
  tx: string;
  comment: string | null;
  acceptedAt: number;
  approvedAt: number;
  txidAt: number;
  txid: string;
  /**
   * Set by the control API: this state from then on; `hideTxid`: its txid is never shown in it (a
   * transfer that failed before its broadcast, a re-org reported before the txid was seen).
   */
  forced: { state: BitgoTransferState; at: number; hideTxid: boolean } | undefined;
}

export interface BitgoSendCount {
  accepted: number;
  /** Sends refused with DuplicateSequenceIdError. */
  duplicates: number;
}

export interface BitgoStats {
  /** endpoint → HTTP status (or 'timeout' / 'reset') → count. */
  requests: Record<BitgoEndpoint, Record<string, number>>;
  sends: Record<string, BitgoSendCount>;
  transfers: number;
}

/** The control API's view of a transfer. */
export interface BitgoTransferView {
  id: string;
  coin: string;
  walletId: string;
  sequenceId: string;
  state: BitgoTransferState;
  /** "" until shown. */
  txid: string;
  pendingApprovalId: string | null;
  acceptedAt: string;
  approvedAt: string;
  txidAt: string;
}

function emptyRequests(): Record<BitgoEndpoint, Record<string, number>> {
  return Object.fromEntries(BITGO_ENDPOINTS.map((endpoint) => [endpoint, {}])) as Record<BitgoEndpoint, Record<string, number>>;
}

export function hexId(): string {
  return randomBytes(16).toString('hex');
}

/** EVM coins write a txid with 0x; the others (UTXO and most account chains) as bare hex. */
const EVM = /^(t|h|g|ht|gt)?(eth|arbeth|opeth|baseeth|polygon|bsc|avaxc)(:|$)/;

export function isEvmCoin(coin: string): boolean {
  return EVM.test(coin);
}

function newTxid(coin: string): string {
  const hex = randomBytes(32).toString('hex');
  return isEvmCoin(coin) ? `0x${hex}` : hex;
}

function iso(ms: number): string {
  return new Date(Math.min(ms, 8.64e15)).toISOString();
}

export type AcceptInput = Pick<BitgoTransfer, 'coin' | 'walletId' | 'sequenceId' | 'recipients' | 'fee' | 'tx' | 'comment'>;

export class BitgoState {
  /** walletId → sequenceId → transfer: a sequenceId is unique per wallet. */
  private byWallet = new Map<string, Map<string, BitgoTransfer>>();
  private bySequenceId = new Map<string, BitgoTransfer>();
  private sends = new Map<string, BitgoSendCount>();
  private requests = emptyRequests();
  private transferCount = 0;

  reset(): void {
    this.byWallet.clear();
    this.bySequenceId.clear();
    this.sends.clear();
    this.requests = emptyRequests();
    this.transferCount = 0;
  }

  countOutcome(endpoint: BitgoEndpoint, outcome: string): void {
    const byOutcome = this.requests[endpoint];
    byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1;
  }

  stats(): BitgoStats {
    const requests = emptyRequests();
    for (const endpoint of BITGO_ENDPOINTS) requests[endpoint] = { ...this.requests[endpoint] };
    const sends: Record<string, BitgoSendCount> = {};
    for (const [sequenceId, count] of this.sends) sends[sequenceId] = { ...count };
    return { requests, sends, transfers: this.transferCount };
  }

  private sendCount(sequenceId: string): BitgoSendCount {
    let count = this.sends.get(sequenceId);
    if (!count) {
      count = { accepted: 0, duplicates: 0 };
      this.sends.set(sequenceId, count);
    }
    return count;
  }

  /**
   * Records a send; undefined when the wallet already holds a transfer with this sequenceId, whatever
   * its state (BitGo "only confirms one send request per sequenceId and fails all subsequent attempts").
   * Synchronous, so two concurrent sends cannot both pass the check.
   */
  accept(input: AcceptInput, settings: BitgoSettings, now: number): BitgoTransfer | undefined {
    const count = this.sendCount(input.sequenceId);
    let inWallet = this.byWallet.get(input.walletId);
    if (inWallet?.has(input.sequenceId)) {
      count.duplicates += 1;
      return undefined;
    }
    this.transferCount += 1;
    const approvedAt = now + settings.approvalAfterMs;
    const transfer: BitgoTransfer = {
      ...input,
      ordinal: this.transferCount,
      id: hexId(),
      pendingApprovalId: settings.approvalAfterMs > 0 ? hexId() : undefined,
      acceptedAt: now,
      approvedAt,
      txidAt: approvedAt + settings.txidAfterMs,
      txid: newTxid(input.coin),
      forced: undefined,
    };
    count.accepted += 1;
    if (!inWallet) {
      inWallet = new Map();
      this.byWallet.set(input.walletId, inWallet);
    }
    inWallet.set(input.sequenceId, transfer);
    // the control API addresses transfers by sequenceId alone: the first one accepted under it
    if (!this.bySequenceId.has(input.sequenceId)) this.bySequenceId.set(input.sequenceId, transfer);
    return transfer;
  }

  find(walletId: string, sequenceId: string): BitgoTransfer | undefined {
    return this.byWallet.get(walletId)?.get(sequenceId);
  }

  /**
   * The wallet's transfer with this transfer id, or whose txid is shown and equal to `id` (BitGo's API reference
   * v2.wallet.gettransfer: "a transfer or transaction id").
   */
  findByIdOrTxid(walletId: string, id: string, now: number): BitgoTransfer | undefined {
    for (const transfer of this.byWallet.get(walletId)?.values() ?? []) {
      if (transfer.id === id) return transfer;
      const txid = this.shownTxid(transfer, now);
      if (txid !== '' && txid === id) return transfer;
    }
    return undefined;
  }

  first(sequenceId: string): BitgoTransfer | undefined {
    return this.bySequenceId.get(sequenceId);
  }

  stateOf(transfer: BitgoTransfer, now: number): BitgoTransferState {
    if (transfer.forced && now >= transfer.forced.at) return transfer.forced.state;
    return now < transfer.approvedAt ? 'pendingApproval' : 'signed';
  }

  /** "" while not shown. */
  shownTxid(transfer: BitgoTransfer, now: number): string {
    if (transfer.forced?.hideTxid === true && now >= transfer.forced.at) return '';
    return now >= transfer.txidAt && !UNSIGNED.has(this.stateOf(transfer, now)) ? transfer.txid : '';
  }

  /** Approves and signs now, and shows the txid now (the given one, or the one drawn at acceptance). */
  setTxid(sequenceId: string, txid: string | undefined, now: number): boolean {
    const transfer = this.first(sequenceId);
    if (!transfer) return false;
    if (txid !== undefined) transfer.txid = txid;
    transfer.approvedAt = Math.min(transfer.approvedAt, now);
    transfer.txidAt = Math.min(transfer.txidAt, now);
    return true;
  }

  releaseAllTxids(now: number): number {
    let count = 0;
    for (const inWallet of this.byWallet.values()) {
      for (const transfer of inWallet.values()) {
        transfer.approvedAt = Math.min(transfer.approvedAt, now);
        transfer.txidAt = Math.min(transfer.txidAt, now);
        count++;
      }
    }
    return count;
  }

  /**
   * Forces a state from now on (an admin rejecting, a failed broadcast, a re-org…). A state past
   * signing also approves and shows the txid now, unless `hideTxid` (then the txid is never shown).
   */
  forceState(sequenceId: string, state: BitgoTransferState, now: number, hideTxid = false): boolean {
    const transfer = this.first(sequenceId);
    if (!transfer) return false;
    transfer.forced = { state, at: now, hideTxid };
    if (!UNSIGNED.has(state) && state !== 'signed') {
      transfer.approvedAt = Math.min(transfer.approvedAt, now);
      if (!hideTxid) transfer.txidAt = Math.min(transfer.txidAt, now);
    }
    return true;
  }

  view(sequenceId: string, now: number): BitgoTransferView | undefined {
    const transfer = this.first(sequenceId);
    if (!transfer) return undefined;
    return {
      id: transfer.id,
      coin: transfer.coin,
      walletId: transfer.walletId,
      sequenceId,
      state: this.stateOf(transfer, now),
      txid: this.shownTxid(transfer, now),
      pendingApprovalId: transfer.pendingApprovalId ?? null,
      acceptedAt: iso(transfer.acceptedAt),
      approvedAt: iso(transfer.approvedAt),
      txidAt: iso(transfer.txidAt),
    };
  }
}
