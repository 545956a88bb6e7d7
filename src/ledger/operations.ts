import { FailureCode, type EventData, type EventOf } from '../../packages/producer/src/events.ts';
import type { SubmitPayload } from '../../packages/producer/src/payload.ts';
import { COMMON_GATE_SETTING, storedTime, type GateDecision, type LedgerMatch } from './record.ts';
import { cancelRequest } from '../../packages/producer/src/transition.ts';
import type { TransitionRequest } from './request.ts';
import { NO_RECORD, TransferState } from './states.ts';
import { payloadHash } from '../transfers/payload-hash.ts';
import type { SendFailureKind } from '../transfers/classify-send.ts';
import type { SendProof } from '../transfers/send-proof.ts';

/**
 * The ledger's named operations: every change a handler, reconciliation or the CLI makes to a transfer,
 * each as the transition request it is. The record's hash field names are written here and in
 * record.ts (which reads them) only; callers say what happened, not which fields change.
 */

/** Fields that hold the send lease; a transition that releases it deletes them. */
const LEASE_FIELDS = ['leaseOwner', 'leaseUntil', 'pending'];

/**
 * When the first send was recorded, before its request was written (record.ts firstSentAt): a listed
 * record dated earlier is another transfer's (matching.ts).
 */
const FIRST_SENT = 'firstSentAt';

/** Since when a halted transfer needs attention (record.ts haltedSince; transition.lua attentionOf). */
const HALTED_SINCE = 'haltedSince';
/** Consecutive failed polls: absent when there are none (a poll that answered removes it). */
const POLL_FAILURES = 'pollFailures';

/** Since when the provider waits for an approval of a submitted transfer (record.ts approvalSince; transition.lua attentionOf). */
const APPROVAL_SINCE = 'approvalSince';

/** How a transfer expired (record.ts expiredCode): SEND_OUTCOME_UNKNOWN needs attention (transition.lua attentionOf). */
const EXPIRED_CODE = 'expiredCode';

/** The claims of a match: the record id it stores is this transfer's alone (transition.lua, KEYS[10..]). */
function matchClaims(match: LedgerMatch): TransitionRequest['claims'] {
  return match.transactionId === undefined ? undefined : { recordIds: [match.transactionId] };
}

/** Who holds the send lease for a change: the runner's token. */
export type LeaseOwner = string;

/** The fields of a new ledger record; the job that writes them owns the transfer. */
function newRecord(jobId: string, payload: SubmitPayload): Record<string, string> {
  return {
    jobId,
    walletId: String(payload.walletId),
    coin: payload.coin,
    metadata: payload.metadata ? JSON.stringify(payload.metadata) : '',
    // Kept until submitted: it is what gets sent (by any runner), and what reconciliation recreates a
    // lost job from.
    payload: JSON.stringify(payload),
    // What a later submission of this sequenceId is compared with (HTTP submit, a second job).
    payloadHash: payloadHash(payload),
  };
}

/**
 * Hash fields of a gate decision (written once, leaving `received`). What most decisions hold is left
 * out, and toRecord reads it back: `gateApplies` and `gateReference` when false (absent reads as false
 * to any worker), `gateSetting` when it is COMMON_GATE_SETTING. About 100 bytes less per record. The
 * two times are milliseconds (a worker of contract v1.2 shows them as digits).
 */
function gateFields(decision: GateDecision): Record<string, string> {
  const setting = JSON.stringify(decision.setting);
  return {
    gateOutcome: decision.outcome,
    ...(setting === COMMON_GATE_SETTING ? {} : { gateSetting: setting }),
    gateFetchedAt: storedTime(decision.settingFetchedAt),
    gateCheckedAt: storedTime(decision.checkedAt),
    ...(decision.applies ? { gateApplies: '1' } : {}),
    ...(decision.reference ? { gateReference: '1' } : {}),
  };
}

/** Hash fields of a match; absent parts are not written. */
function matchFields(match: LedgerMatch): Record<string, string> {
  const fields: Record<string, string> = {};
  if (match.transactionId !== undefined) fields.matchTransactionId = match.transactionId;
  if (match.destinationAddress !== undefined) fields.matchAddress = match.destinationAddress;
  if (match.amount !== undefined) fields.matchAmount = match.amount;
  return fields;
}

/** What a lookup made to settle a send found (port.ts TransferFinding's kinds), or `error`: no answer it could read. */
export type LookupFinding = 'found' | 'absent' | 'ambiguous' | 'unreadable' | 'error';

/**
 * One entry of a transfer's attempts list (Keys.attempts), pushed by the transition that records its
 * outcome (the ledger adds `at`): a send, with what its answer proved (send-proof.ts, the proof
 * table's class) and how the worker took it (classify-send.ts), or a lookup made to settle a send and
 * what it found. Codes and statuses only: never an answer's body, a secret or personal data.
 */
export type Attempt =
  | { kind: 'send'; outcome: 'accepted' | SendFailureKind; proof?: SendProof; httpStatus?: number; code?: string }
  | { kind: 'lookup'; finding: LookupFinding; code?: string };

/** The request part of an attempt (none: nothing is pushed). */
function attempted(attempt: Attempt | undefined): Pick<TransitionRequest, 'attempt'> {
  return attempt === undefined ? {} : { attempt };
}

/**
 * The record field (`1`) that stands for the send whose own answer proved it accepted (the attempt `{
 * kind: 'send', outcome: 'accepted', proof: 'accepted' }`, at `submittedAt`, which the same transition
 * stamps): set by the transition to `submitted` instead of an attempts entry, so a transfer sent once
 * has no attempts key (about 180 bytes of Redis each); Ledger.attempts puts the entry back in its place.
 */
export const SEND_ACCEPTED = 'sendAccepted';
/** What records written before the flag held instead: the same time as `submittedAt`, stamped. */
export const SEND_ACCEPTED_AT_BEFORE = 'sendAcceptedAt';

function acceptedByItsAnswer(attempt: Attempt | undefined): boolean {
  return (
    attempt?.kind === 'send' &&
    attempt.outcome === 'accepted' &&
    attempt.proof === 'accepted' &&
    attempt.httpStatus === undefined &&
    attempt.code === undefined
  );
}

/** What a released lease may also record: the retryable error, and the sends and failures to add. */
export interface Release {
  /** The send attempt or lookup whose outcome this release records. */
  attempt?: Attempt;
  lastError?: string;
  /** sendTransaction requests made beyond the one counted when the lease was taken (−1: none was made). */
  extraSends: number;
  failures?: number;
}

export const op = {
  /** An invalid job with a usable sequenceId: `transfer.rejected`, once, unless a record or tombstone exists. */
  reject(
    jobId: string,
    described: { walletId: string; coin: string; metadata: string },
    data: EventData['transfer.rejected'],
  ): TransitionRequest {
    return {
      from: [NO_RECORD],
      to: TransferState.REJECTED,
      set: { jobId, walletId: described.walletId, coin: described.coin, metadata: described.metadata },
      stamp: ['createdAt'],
      event: { type: 'transfer.rejected', data },
    };
  },

  /** The record of a new transfer (`received`); of two jobs with one sequenceId, the first to write owns it. */
  create(jobId: string, payload: SubmitPayload): TransitionRequest {
    return { from: [NO_RECORD], to: TransferState.RECEIVED, set: newRecord(jobId, payload), stamp: ['createdAt'] };
  },

  /** A new transfer whose gate passed, straight to a send in flight: record, gate decision and lease in one step. */
  createAndTakeSend(jobId: string, payload: SubmitPayload, decision: GateDecision, owner: LeaseOwner, leaseMs: number): TransitionRequest {
    return {
      from: [NO_RECORD],
      to: TransferState.SUBMITTING,
      set: { ...newRecord(jobId, payload), ...gateFields(decision), pending: 1 },
      stamp: ['createdAt'],
      stampOnce: [FIRST_SENT],
      lease: { mode: 'take', owner, ms: leaseMs },
      increment: { sends: 1 },
      sendInFlight: { lookedUpAt: undefined },
    };
  },

  /** The travel-rule setting could not be read: counted, retried later. */
  gateUnavailable(failures: number): TransitionRequest {
    return {
      from: [TransferState.RECEIVED],
      to: TransferState.RECEIVED,
      set: { failures, lastError: FailureCode.TRAVEL_RULE_UNAVAILABLE },
    };
  },

  /** The travel-rule setting could not be read SUBMIT_ATTEMPTS times: `transfer.failed`, nothing was sent. */
  gateFailed(failures: number, data: EventData['transfer.failed']): TransitionRequest {
    return {
      from: [TransferState.RECEIVED],
      to: TransferState.FAILED,
      set: { failures },
      unset: ['payload'],
      event: { type: 'transfer.failed', data },
    };
  },

  block(decision: GateDecision & { setting: NonNullable<GateDecision['setting']> }): TransitionRequest {
    return {
      from: [TransferState.RECEIVED],
      to: TransferState.BLOCKED,
      set: gateFields(decision),
      unset: ['payload'],
      event: { type: 'transfer.blocked', data: { code: FailureCode.TRAVEL_RULE_REQUIRED, setting: decision.setting } },
    };
  },

  pass(decision: GateDecision): TransitionRequest {
    return { from: [TransferState.RECEIVED], to: TransferState.GATED, set: gateFields(decision) };
  },

  /**
   * Takes (or renews) the send lease and marks a send in flight, counted. `lookedUpAt`: the ledger's
   * time before the transfer was looked up upstream, if it was (what the recovery window asks, epoch.ts).
   */
  takeSend(
    from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
    owner: LeaseOwner,
    leaseMs: number,
    lookedUpAt: number | undefined,
    lookup?: Attempt,
  ): TransitionRequest {
    return {
      from: [from],
      to: TransferState.SUBMITTING,
      lease: { mode: 'take', owner, ms: leaseMs },
      set: { pending: 1 },
      stampOnce: [FIRST_SENT],
      increment: { sends: 1 },
      sendInFlight: { lookedUpAt },
      ...attempted(lookup),
    };
  },

  /**
   * Takes (or renews) the send lease, sending nothing yet: of a transfer in `submitting` (to resolve
   * it), or in `gated` (to look it up before its first send while the ledger recovers, epoch.ts).
   */
  takeLease(owner: LeaseOwner, leaseMs: number, from: TransferState = TransferState.SUBMITTING): TransitionRequest {
    return { from: [from], to: TransferState.SUBMITTING, lease: { mode: 'take', owner, ms: leaseMs } };
  },

  /**
   * The send the lease holder marked in flight was never written (its lease may have ended first):
   * while it still owns the lease in the ledger, it says so, so that no later runner reads its
   * `pending` as "may have gone out". The lease itself is left as it is (it may be over already).
   */
  unsent(owner: LeaseOwner): TransitionRequest {
    return {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner },
      unset: ['pending'],
      increment: { sends: -1 },
    };
  },

  /**
   * While the ledger recovers from a loss (epoch.ts): takes the lease to look the transfer up before
   * its first send, and records that a send of it may have been accepted in the life the ledger lost
   * (sticky `unknownSince`): from now on it can end `failed` only by an operator's decision.
   */
  takeLeaseAfterLoss(owner: LeaseOwner, leaseMs: number, from: TransferState): TransitionRequest {
    return { ...op.takeLease(owner, leaseMs, from), stampOnce: ['unknownSince'] };
  },

  /** The lease owner gives the lease up; the transfer stays in `submitting`. */
  release(owner: LeaseOwner, release: Release): TransitionRequest {
    return {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner },
      set: release.lastError === undefined ? {} : { lastError: release.lastError },
      unset: LEASE_FIELDS,
      increment: { sends: release.extraSends, failures: release.failures ?? 0 },
      ...attempted(release.attempt),
    };
  },

  /**
   * A send may have gone out and nothing settled it: sticky `unknownSince`, the lease released;
   * `unresolved` (the event) is published with it, at most once.
   */
  markUnknown(owner: LeaseOwner, release: Release, unresolved?: EventData['transfer.unresolved']): TransitionRequest {
    return {
      ...op.release(owner, release),
      stampOnce: ['unknownSince'],
      ...(unresolved
        ? { requireAbsent: ['unresolvedAt'], stamp: ['unresolvedAt'], event: { type: 'transfer.unresolved', data: unresolved } }
        : {}),
    };
  },

  /** The sequenceId is in use upstream by another transaction: sticky `inUseSince`; `unresolved` at most once. */
  markInUse(owner: LeaseOwner, release: Release, unresolved?: EventData['transfer.unresolved']): TransitionRequest {
    return {
      ...op.release(owner, release),
      stampOnce: ['inUseSince'],
      ...(unresolved ? { stamp: ['unresolvedAt'], event: { type: 'transfer.unresolved', data: unresolved } } : {}),
    };
  },

  /** Proven accepted upstream: `transfer.submitted`, the tracker recorded as pending in the same step. */
  markSubmitted(
    owner: LeaseOwner,
    data: EventData['transfer.submitted'],
    match: LedgerMatch,
    extraSends: number,
    attempt?: Attempt,
  ): TransitionRequest {
    const accepted = acceptedByItsAnswer(attempt);
    return {
      ...(accepted ? {} : attempted(attempt)),
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTED,
      lease: { mode: 'own', owner },
      set: accepted ? { ...matchFields(match), [SEND_ACCEPTED]: '1' } : matchFields(match),
      claims: matchClaims(match),
      stamp: ['submittedAt'],
      unset: ['payload', 'lastError', ...LEASE_FIELDS],
      increment: { sends: extraSends },
      event: { type: 'transfer.submitted', data },
      trackerPending: true,
    };
  },

  /**
   * What markSubmitted records, when the ledger refused it to the runner whose send was proven accepted
   * (another runner took its lease over, or the ledger went back in time): from any state short of an
   * end, whoever holds the lease now (a send of theirs would be a second one).
   */
  markProven(
    data: EventData['transfer.submitted'],
    match: LedgerMatch,
    extraSends: number,
    job?: { jobId: string; payload: SubmitPayload },
    attempt?: Attempt,
  ): TransitionRequest {
    const marked = op.markSubmitted('', data, match, extraSends, attempt);
    if (job === undefined)
      return { ...marked, from: [TransferState.RECEIVED, TransferState.GATED, TransferState.SUBMITTING], lease: { mode: 'proven' } };
    // A ledger that went back to before the record existed: the record again, as its job made it, but
    // submitted (the payload is kept only until then; its hash stays for later submissions).
    const { payload: _sent, ...created } = newRecord(job.jobId, job.payload);
    return {
      ...marked,
      from: [NO_RECORD, TransferState.RECEIVED, TransferState.GATED, TransferState.SUBMITTING],
      lease: { mode: 'proven' },
      set: { ...created, ...marked.set },
      stampOnce: ['createdAt'],
    };
  },

  /** `transfer.failed` by the lease owner; the ledger refuses it while a send may have gone out. */
  fail(owner: LeaseOwner, data: EventData['transfer.failed'], extraSends: number, attempt?: Attempt): TransitionRequest {
    return {
      ...attempted(attempt),
      from: [TransferState.SUBMITTING],
      to: TransferState.FAILED,
      lease: { mode: 'own', owner },
      unset: ['payload', ...LEASE_FIELDS],
      increment: { sends: extraSends },
      event: { type: 'transfer.failed', data },
    };
  },

  /** TRACK_DEADLINE passed while a send's outcome stayed unknown (SEND_OUTCOME_UNKNOWN), or its sequenceId in use (SEQUENCE_ID_IN_USE). */
  expireUnsettled(owner: LeaseOwner, data: EventData['transfer.expired'], attempt?: Attempt): TransitionRequest {
    return {
      ...attempted(attempt),
      from: [TransferState.SUBMITTING],
      to: TransferState.EXPIRED,
      lease: { mode: 'own', owner },
      set: { [EXPIRED_CODE]: data.code },
      unset: ['payload', ...LEASE_FIELDS],
      event: { type: 'transfer.expired', data },
    };
  },

  /**
   * An operator settles a transfer in `submitting` (src/operations: the console, /api/v1, the CLI's
   * `resolve`): only while no runner holds the lease, or (`owner`) under the lease the operator's own
   * lookup took, so that no runner sent between that lookup and this change. `found`: the provider's
   * record the operator's txid was checked against, stored as tracking stores a found one (its record
   * id and txid, claimed), so the tracker goes straight to the wallet transaction.
   */
  resolveByOperator(
    event: EventOf & { type: 'transfer.submitted' | 'transfer.failed' },
    by: { owner?: LeaseOwner; found?: { id: string; txid: string } } = {},
  ): TransitionRequest {
    const lease = by.owner === undefined ? ({ mode: 'free' } as const) : ({ mode: 'own', owner: by.owner } as const);
    const common = { from: [TransferState.SUBMITTING], lease, operator: true } as const;
    if (event.type === 'transfer.submitted') {
      const found = by.found;
      // Recorded with the resolution: if adding the tracking job fails, reconciliation adds it.
      return {
        ...common,
        to: TransferState.SUBMITTED,
        ...(found ? { set: { ...matchFields({ transactionId: found.id }), txid: found.txid } } : {}),
        ...(found ? { claims: { recordIds: [found.id], txids: [found.txid] } } : {}),
        stamp: ['submittedAt'],
        unset: ['payload', 'lastError', ...LEASE_FIELDS],
        event,
        trackerPending: true,
      };
    }
    return { ...common, to: TransferState.FAILED, unset: ['payload', ...LEASE_FIELDS], event };
  },

  /**
   * Cancel before send (docs/contract.md section 4, "Cancelling a transfer"): `transfer.cancelled`,
   * terminal, with its tombstone, from "no record", `received` or `gated` only, and only while the
   * ledger is intact. The request is built in the producer package (cancelRequest, where the reasoning
   * is written), whose cancel() sends the very same request to the very same script: one cancel, whoever
   * asks. Every transition that records a send in flight moves the transfer to `submitting` in the same
   * atomic step as it takes the lease, so of a cancel and a send claim exactly one succeeds.
   */
  cancel(data: EventData['transfer.cancelled']): TransitionRequest {
    return cancelRequest(data);
  },

  /** Reconciliation hands a transfer whose job was lost to a new job (same state, new owner). */
  handOver(state: TransferState, jobId: string): TransitionRequest {
    return { from: [state], to: state, set: { jobId } };
  },

  /** Tracking: a poll of get-transfer failed (the count drives backoff and the alert). */
  pollFailed(failures: number): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, set: { [POLL_FAILURES]: failures } };
  },

  /** Tracking: a poll answered (clears the failure count). */
  pollAnswered(): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, unset: [POLL_FAILURES] };
  },

  /** Tracking: the transfer was identified upstream; later polls match by what is remembered here. */
  identified(match: LedgerMatch): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.SUBMITTED,
      set: matchFields(match),
      unset: [POLL_FAILURES],
      claims: matchClaims(match),
    };
  },

  /** Tracking: the wallet's sends were listed and none matched (counted up to UNMATCHED_POLLS_ALERT). */
  unmatched(unmatchedPolls: number): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, set: { unmatchedPolls }, unset: [POLL_FAILURES] };
  },

  /**
   * Tracking: the provider says the transfer will get no txid unless someone acts, in a state that is
   * not final (BitGo `removed`): it needs attention (`haltedAs`, reported once) and tracking goes on.
   */
  haltedForNow(upstreamState: string): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.SUBMITTED,
      set: { haltedAs: upstreamState },
      unset: [POLL_FAILURES],
      stampOnce: [HALTED_SINCE],
    };
  },

  /**
   * Tracking: the provider waits for an approval of the transfer (ListedTransfer.awaitingApproval):
   * since when, stamped by the first poll that sees it only (later ones write nothing), so a transfer
   * waiting longer than CONSOLE_APPROVAL_WAIT needs attention (transition.lua attentionOf).
   */
  approvalPending(): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, stampOnce: [APPROVAL_SINCE] };
  },

  /** Tracking: the provider no longer waits for an approval (approved, or moved on): not waiting any more. */
  approvalEnded(): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, unset: [APPROVAL_SINCE] };
  },

  /**
   * Tracking: the provider reports a final state in which the transfer never reaches the chain (BitGo
   * `rejected`, `failed`, `deleted`): `transfer.halted`, terminal. Its tombstone keeps the sequenceId
   * used, so nothing is ever sent under it again.
   */
  halt(data: EventData['transfer.halted']): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.HALTED,
      set: { haltedAs: data.state },
      stampOnce: [HALTED_SINCE],
      event: { type: 'transfer.halted', data },
    };
  },

  /** Tracking: the wallet-transaction lookup for a found txid failed, retried. */
  enrichFailed(tries: number): TransitionRequest {
    return { from: [TransferState.SUBMITTED], to: TransferState.SUBMITTED, set: { enrichFailures: tries } };
  },

  /**
   * Tracking: the txid was found but the wallet-transaction lookup must wait for the budget; the next
   * run goes straight to it (the found record is kept by Ledger.rememberFound) instead of polling again.
   */
  txidFound(found: { id: string; txid: string }): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.SUBMITTED,
      set: { txid: found.txid },
      unset: [POLL_FAILURES],
      claims: { recordIds: [found.id], txids: [found.txid] },
    };
  },

  broadcast(txid: string, at: number, data: EventData['transfer.broadcast']): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.BROADCAST,
      set: { txid, broadcastAt: at },
      claims: { recordIds: [data.transaction.id], txids: [txid] },
      event: { type: 'transfer.broadcast', data },
    };
  },

  /** Tracking: TRACK_DEADLINE passed without a txid. */
  expireTracking(data: EventData['transfer.expired']): TransitionRequest {
    return {
      from: [TransferState.SUBMITTED],
      to: TransferState.EXPIRED,
      set: { [EXPIRED_CODE]: data.code },
      event: { type: 'transfer.expired', data },
    };
  },
};
