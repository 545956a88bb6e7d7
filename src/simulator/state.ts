/**
 * In-memory transfers, tokens and counters of the simulator.
 *
 * No timer per transfer: a transfer's life stage (accepted → visible in get-transfer → txid set) is
 * derived on every read from the timestamps fixed when it was accepted, so thousands of transfers cost
 * nothing between requests.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { buildSubmitRecord, deriveFromTxHex, formatUnits } from './records.ts';
import type { Derived, SubmitRecord } from './records.ts';
import { SIM_ENDPOINTS } from './settings.ts';
import type { SimEndpoint, SimulatorSettings } from './settings.ts';

export interface HalfSigned {
  txBase64: string;
  txHex: string;
  sequenceId: string;
  [extra: string]: unknown;
}

export interface SimTransfer {
  /** 1, 2, 3… in acceptance order; breaks ties between equal dates and numbers the record ids. */
  ordinal: number;
  sequenceId: string;
  walletId: number;
  /** sendTransaction carries no coin: learned from the first get-transfer that finds the transfer. */
  coin: string | undefined;
  txHex: string;
  halfSigned: HalfSigned;
  derived: Derived;
  acceptedAt: number;
  visibleAt: number;
  txidAt: number;
  /** `0x` + 64 hex (or what setTxid forced); only shown once `txidAt` has passed. */
  txid: string;
}

export interface SendCount {
  accepted: number;
  /** Sends refused with 409. */
  duplicates: number;
}

export interface SimulatorStats {
  /** endpoint → HTTP status (or 'timeout' / 'reset') → count. */
  requests: Record<SimEndpoint, Record<string, number>>;
  sends: Record<string, SendCount>;
  transfers: number;
}

export interface TransferView {
  sequenceId: string;
  walletId: number;
  coin: string | null;
  acceptedAt: string;
  visibleAt: string;
  visible: boolean;
  txidAt: string;
  /** "" until txidAt. */
  txid: string;
  /** Every transfer accepted under this sequenceId (more than one only when rejectDuplicates is off). */
  accepted: number;
  destinationAddress: string;
  amount: string;
  fee: string;
  /** The 2.4 record in its spec form, whatever the profile; `amount` above has the exact digits. */
  record: SubmitRecord;
}

function emptyRequests(): Record<SimEndpoint, Record<string, number>> {
  return Object.fromEntries(SIM_ENDPOINTS.map((endpoint) => [endpoint, {}])) as Record<SimEndpoint, Record<string, number>>;
}

export type AcceptResult = { accepted: true; transfer: SimTransfer } | { accepted: false };

export class SimState {
  private bySequenceId = new Map<string, SimTransfer[]>();
  private byTxid = new Map<string, SimTransfer>();
  private byWallet = new Map<number, SimTransfer[]>();
  private sends = new Map<string, SendCount>();
  private requests = emptyRequests();
  private tokens = new Map<string, number>();
  private transferCount = 0;
  private upstreamRequests = 0;

  /** Transfers, counters; tokens survive so a running client is not logged out by a reset. */
  reset(): void {
    this.bySequenceId.clear();
    this.byTxid.clear();
    this.byWallet.clear();
    this.sends.clear();
    this.requests = emptyRequests();
    this.transferCount = 0;
    this.upstreamRequests = 0;
  }

  // ---- counters

  countUpstreamRequest(): void {
    this.upstreamRequests += 1;
  }

  upstreamRequestCount(): number {
    return this.upstreamRequests;
  }

  countOutcome(endpoint: SimEndpoint, outcome: string): void {
    const byOutcome = this.requests[endpoint];
    byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1;
  }

  stats(): SimulatorStats {
    const requests = emptyRequests();
    for (const endpoint of SIM_ENDPOINTS) requests[endpoint] = { ...this.requests[endpoint] };
    const sends: Record<string, SendCount> = {};
    for (const [sequenceId, count] of this.sends) sends[sequenceId] = { ...count };
    return { requests, sends, transfers: this.transferCount };
  }

  private sendCount(sequenceId: string): SendCount {
    let count = this.sends.get(sequenceId);
    if (!count) {
      count = { accepted: 0, duplicates: 0 };
      this.sends.set(sequenceId, count);
    }
    return count;
  }

  // ---- tokens

  issueToken(lifetimeSec: number, now: number): string {
    if (this.tokens.size > 10_000) {
      for (const [token, expiresAt] of this.tokens) if (expiresAt <= now) this.tokens.delete(token);
    }
    const token = randomBytes(32).toString('base64url');
    this.tokens.set(token, now + lifetimeSec * 1000);
    return token;
  }

  tokenValid(token: string, now: number): boolean {
    const expiresAt = this.tokens.get(token);
    return expiresAt !== undefined && now < expiresAt;
  }

  expireTokens(): void {
    this.tokens.clear();
  }

  // ---- transfers

  /**
   * Records a send. Synchronous, so two concurrent sends of one sequenceId cannot both pass the
   * duplicate check.
   */
  accept(walletId: number, txHex: string, halfSigned: HalfSigned, settings: SimulatorSettings, now: number): AcceptResult {
    const sequenceId = halfSigned.sequenceId;
    const count = this.sendCount(sequenceId);
    const existing = this.bySequenceId.get(sequenceId);
    if (existing && settings.rejectDuplicates) {
      count.duplicates += 1;
      return { accepted: false };
    }
    this.transferCount += 1;
    const jitter = (maxMs: number) => (maxMs > 0 ? randomInt(maxMs + 1) : 0);
    const visibleAt = now + settings.visibleAfterMs + jitter(settings.visibleJitterMs);
    const transfer: SimTransfer = {
      ordinal: this.transferCount,
      sequenceId,
      walletId,
      coin: undefined,
      txHex,
      halfSigned,
      derived: deriveFromTxHex(txHex, settings.fixedAmount),
      acceptedAt: now,
      visibleAt,
      txidAt: visibleAt + settings.txidAfterMs + jitter(settings.txidJitterMs),
      txid: `0x${randomBytes(32).toString('hex')}`,
    };
    count.accepted += 1;
    if (existing) existing.push(transfer);
    else this.bySequenceId.set(sequenceId, [transfer]);
    this.byTxid.set(transfer.txid.toLowerCase(), transfer);
    const inWallet = this.byWallet.get(walletId);
    if (inWallet) inWallet.push(transfer);
    else this.byWallet.set(walletId, [transfer]);
    return { accepted: true, transfer };
  }

  isVisible(transfer: SimTransfer, now: number): boolean {
    return now >= transfer.visibleAt;
  }

  shownTxid(transfer: SimTransfer, now: number): string {
    return now >= transfer.txidAt ? transfer.txid : '';
  }

  /** The first transfer accepted under this sequenceId. */
  first(sequenceId: string): SimTransfer | undefined {
    return this.bySequenceId.get(sequenceId)?.[0];
  }

  /** Visible transfers of the wallet with this sequenceId. */
  findBySequenceId(walletId: number, sequenceId: string, now: number): SimTransfer[] {
    const all = this.bySequenceId.get(sequenceId);
    if (!all) return [];
    return all.filter((transfer) => transfer.walletId === walletId && this.isVisible(transfer, now));
  }

  /** The wallet's transfer whose txid is already shown. */
  findByTxid(walletId: number, txid: string, now: number): SimTransfer | undefined {
    const transfer = this.byTxid.get(txid.toLowerCase());
    if (!transfer || transfer.walletId !== walletId || this.shownTxid(transfer, now) === '') return undefined;
    return transfer;
  }

  /**
   * Up to `limit` newest visible transfers of the wallet, of the given coin (or of a coin not yet
   * known), other than `exclude`. Scans from the newest so a busy wallet costs only `limit` steps.
   */
  othersInWallet(walletId: number, coin: string, exclude: ReadonlySet<SimTransfer>, limit: number, now: number): SimTransfer[] {
    const inWallet = this.byWallet.get(walletId);
    const found: SimTransfer[] = [];
    if (!inWallet) return found;
    for (let index = inWallet.length - 1; index >= 0 && found.length < limit; index -= 1) {
      const transfer = inWallet[index]!;
      if (exclude.has(transfer) || !this.isVisible(transfer, now)) continue;
      if (transfer.coin !== undefined && transfer.coin !== coin) continue;
      found.push(transfer);
    }
    return found;
  }

  /** Every accepted transfer shows its txid from now on (the benchmark's "every txid at once"). Returns how many. */
  releaseAllTxids(now: number): number {
    let count = 0;
    for (const all of this.bySequenceId.values()) {
      for (const transfer of all) {
        transfer.visibleAt = Math.min(transfer.visibleAt, now);
        transfer.txidAt = Math.min(transfer.txidAt, now);
        count++;
      }
    }
    return count;
  }

  /** Forces the txid (a given one, or the one drawn at acceptance) to show from now on. */
  setTxid(sequenceId: string, txid: string | undefined, now: number): SimTransfer | undefined {
    const transfer = this.first(sequenceId);
    if (!transfer) return undefined;
    if (txid !== undefined && txid !== transfer.txid) {
      this.byTxid.delete(transfer.txid.toLowerCase());
      transfer.txid = txid;
      this.byTxid.set(txid.toLowerCase(), transfer);
    }
    transfer.visibleAt = Math.min(transfer.visibleAt, now);
    transfer.txidAt = Math.min(transfer.txidAt, now);
    return transfer;
  }

  /** `clientId` fills raw.user.clientid of the rebuilt record (records are rebuilt, not stored, to save memory). */
  view(sequenceId: string, clientId: string, now: number): TransferView | undefined {
    const all = this.bySequenceId.get(sequenceId);
    const transfer = all?.[0];
    if (!all || !transfer) return undefined;
    return {
      sequenceId,
      walletId: transfer.walletId,
      coin: transfer.coin ?? null,
      acceptedAt: new Date(transfer.acceptedAt).toISOString(),
      visibleAt: new Date(transfer.visibleAt).toISOString(),
      visible: this.isVisible(transfer, now),
      txidAt: new Date(Math.min(transfer.txidAt, 8.64e15)).toISOString(),
      txid: this.shownTxid(transfer, now),
      accepted: all.length,
      destinationAddress: transfer.derived.destination,
      amount: formatUnits(transfer.derived.amountUnits, transfer.derived.scale),
      fee: formatUnits(transfer.derived.feeUnits, transfer.derived.scale),
      record: buildSubmitRecord(transfer, clientId),
    };
  }
}
