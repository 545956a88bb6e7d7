import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import type { TransferState } from './states.ts';

/** What outlives a terminal record for TOMBSTONE_RETENTION: how the transfer ended and its last version. */
export interface Tombstone {
  state: TransferState;
  version: number;
}

export function parseTombstone(text: string): Tombstone {
  const at = text.lastIndexOf(':');
  return { state: text.slice(0, at) as TransferState, version: Number(text.slice(at + 1)) };
}

/** The ledger hash as stored: all text. Field names are the ones the Lua script and handlers use. */
export interface TransferRecord {
  sequenceId: string;
  state: TransferState;
  version: number;
  jobId: string;
  walletId: string;
  coin: string;
  metadata: string;
  createdAt: number;
  updatedAt: number;
  /** sendTransaction HTTP requests made (each may have reached upstream), 401 retries included. */
  sends: number;
  /** Failed processing attempts that were retried (drives backoff and the attempt limit). */
  failures: number;
  /** The send lease: its owner (a runner's token) and its end (Redis time, ms); see transition.lua. */
  leaseOwner: string | undefined;
  leaseUntil: number;
  /**
   * When the first send was recorded (Redis time, ms), before its request was written: a listed record
   * dated earlier is another transfer's (matching.ts). Undefined on a record written before it existed.
   */
  firstSentAt: number | undefined;
  /** A send of the lease owner's is in flight, its outcome not yet recorded. */
  pending: boolean;
  /**
   * Sticky "may have been sent": when a send's outcome first became unknown (Redis time, ms). From then
   * on nothing but a proof of acceptance, the deadline or an operator ends the transfer; never `failed`.
   */
  unknownSince: number | undefined;
  /** When `transfer.unresolved` was published (at most once). */
  unresolvedAt: number | undefined;
  /**
   * Sticky: when the first send was answered 409 although no earlier send may have been processed
   * (SEQUENCE_ID_IN_USE). From then on nothing is sent or looked up; an operator settles it.
   */
  inUseSince: number | undefined;
  /** The job payload, kept until the transfer is submitted so a lost job can be recreated. */
  payload: string | undefined;
  /**
   * SHA-256 of the creating job's payload as canonical JSON (src/transfers/payload-hash.ts), kept for
   * the record's life (the payload itself goes once submitted); undefined on a record written before it
   * existed, a rejected job's, or a cancel's of a sequenceId no job had reached.
   */
  payloadHash: string | undefined;
  /** The travel-rule decision, once made. */
  gate: GateDecision | undefined;
  /** What tracking matches on (the upstream transaction id, or destination address and amount). */
  match: LedgerMatch;
  submittedAt: number | undefined;
  txid: string | undefined;
  /** Consecutive failed polls of get-transfer while tracking. */
  pollFailures: number;
  /** Polls in a row whose list held a `send` of the wallet that matched nothing (UNMATCHED_POLLS_ALERT). */
  unmatchedPolls: number;
  /**
   * The provider's state when it said the transfer will get no txid unless someone acts
   * (ListedTransfer.halted): reported once while not final (it needs attention), and the final state
   * of a transfer that ended `halted`.
   */
  haltedAs: string | undefined;
  /** When `haltedAs` was first recorded (Redis time, ms): since when a halted transfer needs attention. */
  haltedSince: number | undefined;
  /**
   * Since when tracking has seen the provider wait for an approval of the transfer (Redis time, ms; the
   * first poll that saw it); cleared when the provider moves on (ListedTransfer.awaitingApproval).
   */
  approvalSince: number | undefined;
  /** The code of `transfer.expired` (TRACKING_DEADLINE, SEND_OUTCOME_UNKNOWN, ...) once it expired. */
  expiredCode: string | undefined;
  /** Failed wallet-transaction lookups once the txid is known. */
  enrichFailures: number;
  broadcastAt: number | undefined;
  /** The code of the last retryable error, for the failed event and operators. */
  lastError: string | undefined;
  /** Stream ids of the transfer's events, oldest first. */
  events: string[];
  /** Upstream calls made for this transfer, as the request budget counted them (CALLS_FIELD). */
  calls: number;
}

/** The hash field the request budget increments per upstream call made for a transfer (custody/budget.ts). */
export const CALLS_FIELD = 'calls';

/**
 * The travel-rule setting most gate decisions hold (the rule off): a record leaves it out of
 * `gateSetting` (operations.ts gateFields) and reads it back here. Records written before hold it.
 */
export const COMMON_GATE_SETTING = '{"outgoingTxn":0,"mandatory":false,"blockTxn":false}';

/** The travel-rule decision recorded on a transfer (what the setting said, when, and the outcome). */
export interface GateDecision {
  /** The provider's travel-rule setting as read; null when the provider does not gate (never blocks). */
  setting: { outgoingTxn: number; mandatory: boolean; blockTxn: boolean } | null;
  settingFetchedAt: string;
  checkedAt: string;
  applies: boolean;
  reference: boolean;
  outcome: 'passed' | 'blocked';
}

/** How tracking recognises the transfer in a lookup answer (port.ts KnownTransfer; the adapter matches). */
export interface LedgerMatch {
  transactionId?: string | undefined;
  destinationAddress?: string | undefined;
  amount?: string | undefined;
}

/*
 * Records are stored as short fields, not JSON blobs: a hash whose every value is at most 64 bytes
 * stays in Redis's compact listpack encoding (about half the memory of a hashtable), which matters
 * with 100,000s of transfers being tracked. The long job payload is kept in a key of its own until
 * submission (Keys.transferPayload), so the hash is compact from the start; a record written while the
 * payload was a hash field is rewritten when that field goes, so it returns to the compact encoding.
 */

/**
 * A named part of the record, read instead of the whole record: decoding all of a record's fields was
 * most of what a transition cost the worker, and each step of the hot path needs a few of them. The
 * values go through the same conversion as a whole record (toRecord), so a view never reads a field
 * differently.
 */
export interface RecordView<T> {
  /** Hash fields read (HMGET), in this order. */
  readonly fields: readonly string[];
  build(sequenceId: string, values: ReadonlyArray<string | null | undefined>): T;
}

function recordView<K extends keyof TransferRecord>(
  fields: readonly string[],
  keys: readonly K[],
): RecordView<Pick<TransferRecord, K | 'sequenceId'>> {
  return {
    fields,
    build(sequenceId, values) {
      const hash: Record<string, string> = {};
      for (let i = 0; i < fields.length; i++) {
        const value = values[i];
        if (typeof value === 'string') hash[fields[i]!] = value;
      }
      const record = toRecord(sequenceId, hash);
      const view = { sequenceId } as Pick<TransferRecord, K | 'sequenceId'>;
      for (const key of keys) view[key] = record[key];
      return view;
    },
  };
}

/** Nothing but the sequenceId: the caller only needs to know that the transition happened. */
export const NO_VIEW = recordView([], []);

/** What a runner that holds the send lease needs to act on the send's outcome (see the submit handler). */
export const SEND_VIEW = recordView(
  ['sends', 'failures', 'unknownSince', 'unresolvedAt'],
  ['sends', 'failures', 'unknownSince', 'unresolvedAt'],
);
export type SendView = Pick<TransferRecord, 'sequenceId' | 'sends' | 'failures' | 'unknownSince' | 'unresolvedAt'>;

/** What one tracking poll needs (see the track handler). */
export const TRACKING_VIEW = recordView(
  [
    'state',
    'walletId',
    'coin',
    'submittedAt',
    'updatedAt',
    'pollFailures',
    'unmatchedPolls',
    'haltedAs',
    'approvalSince',
    'enrichFailures',
    'matchTransactionId',
    'matchAddress',
    'matchAmount',
    'txid',
    'firstSentAt',
  ],
  [
    'state',
    'walletId',
    'coin',
    'submittedAt',
    'updatedAt',
    'pollFailures',
    'unmatchedPolls',
    'haltedAs',
    'approvalSince',
    'enrichFailures',
    'match',
    'txid',
    'firstSentAt',
  ],
);
export type TrackingView = Pick<
  TransferRecord,
  | 'sequenceId'
  | 'state'
  | 'walletId'
  | 'coin'
  | 'submittedAt'
  | 'updatedAt'
  | 'pollFailures'
  | 'unmatchedPolls'
  | 'haltedAs'
  | 'approvalSince'
  | 'enrichFailures'
  | 'match'
  | 'txid'
  | 'firstSentAt'
>;

/** What a broadcast transition reads back: the calls made for the transfer (the metric). */
export const BROADCAST_VIEW = recordView([CALLS_FIELD], ['calls']);

/**
 * The job that owns a transfer, from its record's `jobId` field and `submittedAt`: a job id made by
 * jobIdFor is left out of the record once the transfer is submitted (transition.lua), so a submitted
 * record without one was owned by `jobIdFor(sequenceId)`. A record never submitted without one has no
 * owning job (a sequenceId cancelled before any job of it ran): ''.
 */
export function recordJobId(sequenceId: string, jobId: string | undefined | null, submittedAt: string | undefined | null): string {
  if (jobId !== undefined && jobId !== null) return jobId;
  return submittedAt !== undefined && submittedAt !== null && submittedAt !== '' ? jobIdFor(sequenceId) : '';
}

/** An ISO time as the record keeps it: milliseconds (13 digits, 16 bytes less than the text); isoOfStored reads it back. */
export function storedTime(iso: string): string {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : String(ms);
}

/**
 * A time the record keeps as milliseconds (storedTime: the gate's two, since records got smaller), as
 * ISO text; a record written before keeps ISO text, returned as it is. '' for none.
 */
function isoOfStored(value: string | undefined): string {
  if (value === undefined || value === '') return '';
  return /^\d+$/.test(value) ? new Date(Number(value)).toISOString() : value;
}

export function toRecord(sequenceId: string, hash: Record<string, string>): TransferRecord {
  const num = (value: string | undefined) => (value === undefined || value === '' ? 0 : Number(value));
  const opt = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);
  return {
    sequenceId,
    state: hash.state as TransferState,
    version: num(hash.version),
    jobId: recordJobId(sequenceId, hash.jobId, hash.submittedAt),
    walletId: hash.walletId ?? '',
    coin: hash.coin ?? '',
    metadata: hash.metadata ?? '',
    createdAt: num(hash.createdAt),
    updatedAt: num(hash.updatedAt),
    sends: num(hash.sends),
    failures: num(hash.failures),
    leaseOwner: opt(hash.leaseOwner),
    leaseUntil: num(hash.leaseUntil),
    firstSentAt: opt(hash.firstSentAt) === undefined ? undefined : num(hash.firstSentAt),
    pending: hash.pending === '1',
    unknownSince: opt(hash.unknownSince) === undefined ? undefined : num(hash.unknownSince),
    unresolvedAt: opt(hash.unresolvedAt) === undefined ? undefined : num(hash.unresolvedAt),
    inUseSince: opt(hash.inUseSince) === undefined ? undefined : num(hash.inUseSince),
    payload: opt(hash.payload),
    payloadHash: opt(hash.payloadHash),
    gate: hash.gateOutcome
      ? {
          setting: JSON.parse(hash.gateSetting ?? COMMON_GATE_SETTING) as GateDecision['setting'],
          settingFetchedAt: isoOfStored(hash.gateFetchedAt),
          checkedAt: isoOfStored(hash.gateCheckedAt),
          applies: hash.gateApplies === '1',
          reference: hash.gateReference === '1',
          outcome: hash.gateOutcome as GateDecision['outcome'],
        }
      : undefined,
    match: { transactionId: opt(hash.matchTransactionId), destinationAddress: opt(hash.matchAddress), amount: opt(hash.matchAmount) },
    submittedAt: opt(hash.submittedAt) === undefined ? undefined : num(hash.submittedAt),
    txid: opt(hash.txid),
    pollFailures: num(hash.pollFailures),
    unmatchedPolls: num(hash.unmatchedPolls),
    haltedAs: opt(hash.haltedAs),
    haltedSince: opt(hash.haltedSince) === undefined ? undefined : num(hash.haltedSince),
    approvalSince: opt(hash.approvalSince) === undefined ? undefined : num(hash.approvalSince),
    expiredCode: opt(hash.expiredCode),
    enrichFailures: num(hash.enrichFailures),
    broadcastAt: opt(hash.broadcastAt) === undefined ? undefined : num(hash.broadcastAt),
    lastError: opt(hash.lastError),
    events: hash.events ? hash.events.split(',') : [],
    calls: num(hash[CALLS_FIELD]),
  };
}
