import { readFileSync } from 'node:fs';
import type { EventType } from '../events/events.ts';
import type { RedisClient } from '../redis.ts';
import type { Keys } from './keys.ts';

/**
 * A transfer's life. `submitting` is the one state where a send may have gone out without us knowing
 * the answer: whoever finds a transfer there must look before sending again (see the submit handler).
 */
export const TransferState = {
  RECEIVED: 'received',
  GATED: 'gated',
  SUBMITTING: 'submitting',
  SUBMITTED: 'submitted',
  BROADCAST: 'broadcast',
  REJECTED: 'rejected',
  BLOCKED: 'blocked',
  FAILED: 'failed',
  EXPIRED: 'expired',
} as const;
export type TransferState = (typeof TransferState)[keyof typeof TransferState];

export const TERMINAL_STATES: ReadonlySet<TransferState> = new Set([
  TransferState.BROADCAST,
  TransferState.REJECTED,
  TransferState.BLOCKED,
  TransferState.FAILED,
  TransferState.EXPIRED,
]);

/** `-` in an expected-state list: the transfer has no record yet. */
export const NO_RECORD = '-';

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
  /** Send requests made (each may have reached upstream). */
  sends: number;
  /** Failed processing attempts that were retried (drives backoff and the attempt limit). */
  failures: number;
  /** A send in flight until this time (ms): nobody else may send or resolve before it passes. */
  leaseUntil: number;
  /** The job payload, kept until the transfer is submitted so a lost job can be recreated. */
  payload: string | undefined;
  /** The travel-rule decision, once made. */
  gate: GateDecision | undefined;
  /** What tracking matches on (the upstream transaction id, or destination address and amount). */
  match: LedgerMatch;
  submittedAt: number | undefined;
  txid: string | undefined;
  /** Consecutive failed polls of get-transfer while tracking. */
  pollFailures: number;
  /** Failed wallet-transaction lookups once the txid is known. */
  enrichFailures: number;
  broadcastAt: number | undefined;
  /** The code of the last retryable error, for the failed event and operators. */
  lastError: string | undefined;
  /** Stream ids of the transfer's events, oldest first. */
  events: string[];
}

/** The travel-rule decision recorded on a transfer (what the setting said, when, and the outcome). */
export interface GateDecision {
  setting: { outgoingTxn: number; mandatory: boolean; blockTxn: boolean };
  settingFetchedAt: string;
  checkedAt: string;
  applies: boolean;
  reference: boolean;
  outcome: 'passed' | 'blocked';
}

/** How tracking recognises the transfer in a get-transfer answer; see track-transfer/match.ts. */
export interface LedgerMatch {
  transactionId?: string | undefined;
  destinationAddress?: string | undefined;
  amount?: string | undefined;
}

/*
 * Records are stored as short fields, not JSON blobs: a hash whose every value is at most 64 bytes
 * stays in Redis's compact listpack encoding (about half the memory of a hashtable), which matters
 * with 100,000s of transfers being tracked. The long job payload is dropped on submission, and the
 * transition script then rewrites the hash so it can return to the compact encoding.
 */

/** Hash fields of a gate decision (for `TransitionRequest.set`). */
export function gateFields(decision: GateDecision): Record<string, string> {
  return {
    gateOutcome: decision.outcome,
    gateSetting: JSON.stringify(decision.setting),
    gateFetchedAt: decision.settingFetchedAt,
    gateCheckedAt: decision.checkedAt,
    gateApplies: decision.applies ? '1' : '0',
    gateReference: decision.reference ? '1' : '0',
  };
}

/** Hash fields of a match (for `TransitionRequest.set`); absent parts are not written. */
export function matchFields(match: LedgerMatch): Record<string, string> {
  const fields: Record<string, string> = {};
  if (match.transactionId !== undefined) fields.matchTransactionId = match.transactionId;
  if (match.destinationAddress !== undefined) fields.matchAddress = match.destinationAddress;
  if (match.amount !== undefined) fields.matchAmount = match.amount;
  return fields;
}

export interface TransitionRequest {
  from: ReadonlyArray<TransferState | typeof NO_RECORD>;
  to: TransferState;
  set?: Record<string, string | number>;
  unset?: string[];
  /** Fields incremented by one. */
  increment?: string[];
  /** Refuse while another holder's send lease runs (leaseUntil in the future). */
  requireNoLease?: boolean;
  event?: { type: EventType; data: unknown };
}

export type TransitionResult =
  | { ok: true; version: number; streamId: string; record: TransferRecord }
  | { ok: false; state: TransferState | typeof NO_RECORD; leaseUntil?: number };

const TRANSITION_LUA = readFileSync(new URL('./transition.lua', import.meta.url), 'utf8');

interface LedgerCommands {
  transferTransition(...args: Array<string | number>): Promise<[number, number | string, string?, string[]?]>;
}

export interface LedgerOptions {
  /** Approximate MAXLEN of the events stream. */
  eventsMaxLen: number;
  /** How long a terminal record is kept. */
  retentionMs: number;
  now?: () => number;
  /** Called once per event this process published. */
  onEvent?: (type: EventType) => void;
}

/**
 * Per-transfer state in Redis. Every change goes through one Lua script that checks the expected
 * state, applies the change, publishes the event and maintains the indexes atomically.
 */
export class Ledger {
  readonly redis: RedisClient;
  readonly keys: Keys;
  readonly #options: LedgerOptions;
  readonly #now: () => number;

  constructor(redis: RedisClient, keys: Keys, options: LedgerOptions) {
    this.redis = redis;
    this.keys = keys;
    this.#options = options;
    this.#now = options.now ?? Date.now;
    if (!('transferTransition' in redis)) {
      redis.defineCommand('transferTransition', { numberOfKeys: 4, lua: TRANSITION_LUA });
    }
  }

  async get(sequenceId: string): Promise<TransferRecord | undefined> {
    const hash = await this.redis.hgetall(this.keys.transfer(sequenceId));
    return hash.state ? toRecord(sequenceId, hash) : undefined;
  }

  /** Moves a transfer between states; see transition.lua for the guarantees. */
  async transition(sequenceId: string, request: TransitionRequest): Promise<TransitionResult> {
    return this.#run(this.keys.transfer(sequenceId), sequenceId, sequenceId, request);
  }

  /**
   * Publishes `transfer.rejected` for a job whose payload had no usable sequenceId, at most once per
   * job id (a retried or stalled job finds the record and publishes nothing).
   */
  async rejectJob(
    jobId: string,
    common: { sequenceId: string; walletId: string; coin: string; metadata: string },
    data: unknown,
  ): Promise<TransitionResult> {
    return this.#run(this.keys.jobRejection(jobId), common.sequenceId, '', {
      from: [NO_RECORD],
      to: TransferState.REJECTED,
      set: { jobId, walletId: common.walletId, coin: common.coin, metadata: common.metadata, createdAt: this.#now() },
      event: { type: 'transfer.rejected', data },
    });
  }

  /** An event that belongs to no transfer (`reconcile.completed`): empty sequenceId, version 0. */
  async publishSystemEvent(type: EventType, data: unknown): Promise<string> {
    const at = new Date(this.#now()).toISOString();
    const id = await this.redis.xadd(
      this.keys.events,
      'MAXLEN',
      '~',
      this.#options.eventsMaxLen,
      '*',
      ...['event', type, 'sequenceId', '', 'walletId', '', 'coin', '', 'version', '0', 'at', at, 'data', JSON.stringify(data), 'metadata', ''],
    );
    return String(id);
  }

  async #run(key: string, eventSequenceId: string, indexMember: string, request: TransitionRequest): Promise<TransitionResult> {
    const now = this.#now();
    const pairs = Object.entries(request.set ?? {}).flatMap(([field, value]) => [field, String(value)]);
    const reply = await (this.redis as unknown as LedgerCommands).transferTransition(
      key,
      this.keys.events,
      this.keys.active,
      this.keys.terminal,
      eventSequenceId,
      request.from.join(','),
      request.to,
      TERMINAL_STATES.has(request.to) ? '1' : '0',
      now,
      new Date(now).toISOString(),
      request.event?.type ?? '',
      request.event ? JSON.stringify(request.event.data) : '',
      this.#options.eventsMaxLen,
      this.#options.retentionMs,
      indexMember,
      (request.unset ?? []).join(','),
      request.requireNoLease ? '1' : '0',
      (request.increment ?? []).join(','),
      ...pairs,
    );
    if (reply[0] === 1) {
      if (request.event) this.#options.onEvent?.(request.event.type);
      const fields: Record<string, string> = {};
      const flat = reply[3] ?? [];
      for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      return { ok: true, version: Number(reply[1]), streamId: String(reply[2] ?? ''), record: toRecord(eventSequenceId || indexMember, fields) };
    }
    const state = String(reply[1]) as TransferState | typeof NO_RECORD;
    return reply[2] === undefined ? { ok: false, state } : { ok: false, state, leaseUntil: Number(reply[2]) };
  }
}

function toRecord(sequenceId: string, hash: Record<string, string>): TransferRecord {
  const num = (value: string | undefined) => (value === undefined || value === '' ? 0 : Number(value));
  const opt = (value: string | undefined) => (value === undefined || value === '' ? undefined : value);
  return {
    sequenceId,
    state: hash.state as TransferState,
    version: num(hash.version),
    jobId: hash.jobId ?? '',
    walletId: hash.walletId ?? '',
    coin: hash.coin ?? '',
    metadata: hash.metadata ?? '',
    createdAt: num(hash.createdAt),
    updatedAt: num(hash.updatedAt),
    sends: num(hash.sends),
    failures: num(hash.failures),
    leaseUntil: num(hash.leaseUntil),
    payload: opt(hash.payload),
    gate: hash.gateOutcome
      ? {
          setting: JSON.parse(hash.gateSetting ?? '{}') as GateDecision['setting'],
          settingFetchedAt: hash.gateFetchedAt ?? '',
          checkedAt: hash.gateCheckedAt ?? '',
          applies: hash.gateApplies === '1',
          reference: hash.gateReference === '1',
          outcome: hash.gateOutcome as GateDecision['outcome'],
        }
      : undefined,
    match: { transactionId: opt(hash.matchTransactionId), destinationAddress: opt(hash.matchAddress), amount: opt(hash.matchAmount) },
    submittedAt: opt(hash.submittedAt) === undefined ? undefined : num(hash.submittedAt),
    txid: opt(hash.txid),
    pollFailures: num(hash.pollFailures),
    enrichFailures: num(hash.enrichFailures),
    broadcastAt: opt(hash.broadcastAt) === undefined ? undefined : num(hash.broadcastAt),
    lastError: opt(hash.lastError),
    events: hash.events ? hash.events.split(',') : [],
  };
}
