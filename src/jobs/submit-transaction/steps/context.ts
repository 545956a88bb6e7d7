import { parseSubmitPayload, type SubmitPayload } from '../../../../packages/producer/src/payload.ts';
import type { Ledger, TransferRecord, TransitionResult } from '../../../ledger/ledger.ts';
import { RetryLater } from '../../../queues/outcomes.ts';
import type { JobContext } from '../../../queues/processor.ts';
import type { Trackers } from '../../../queues/trackers.ts';
import { LEASE_WAIT_SLACK_MS, type BackoffProfile } from '../../../timing.ts';
import type { CustodyPort } from '../../../custody/port.ts';
import type { GateSetting } from '../../../custody/travel-rule-cache.ts';

export interface SubmitDeps {
  ledger: Ledger;
  /** The gate's setting; `null` from a provider that does not gate (the port has no getTravelRuleSetting). */
  travelRule: { setting(): Promise<GateSetting | null> };
  custody: Pick<CustodyPort, 'sendTransaction' | 'findTransfer'> & Partial<Pick<CustodyPort, 'walletProblem' | 'wakeups'>>;
  /**
   * Adds the transfer's one tracking job unless it exists and clears its tracker outbox entry
   * (Trackers.ensure); the `submitted` transition records the entry, so a crash in between leaves it
   * for reconciliation's sweep.
   */
  trackers: Pick<Trackers, 'ensure'>;
  /** SUBMIT_ATTEMPTS: sendTransaction requests (and failed gate lookups) before `transfer.failed`. */
  attempts: number;
  /**
   * LOOKUP_BEFORE_FIRST_SEND: every transfer is looked up by sequenceId before its first send (recover.ts:
   * lookFirst), not only while the ledger recovers from a loss.
   */
  lookupBeforeFirstSend?: boolean;
  retry: BackoffProfile;
  /** The overall deadline of one sendTransaction call or one lookup (timing.ts: sendDeadlineMs). */
  sendDeadlineMs: number;
  /** The send lease: the deadline plus a margin (timing.ts: sendLeaseMs). Must exceed sendDeadlineMs. */
  sendLeaseMs: number;
  /** UNRESOLVED_AFTER: a send whose outcome stays unknown this long gets `transfer.unresolved`. */
  unresolvedAfterMs: number;
  /**
   * TRACK_DEADLINE: a send whose outcome stays unknown this long ends `transfer.expired`
   * (SEND_OUTCOME_UNKNOWN); a sequenceId found in use by another transaction, SEQUENCE_ID_IN_USE.
   */
  deadlineMs: number;
  /** Process clock, for the text of the gate decision only: leases and time guards use the ledger's. */
  now?: () => number;
  /**
   * A monotonic clock, ms (default performance.now): where a runner counts its lease from, before the
   * command that takes it is issued (timing.ts: sendWriteWindowMs). Tests that explore schedules pass
   * their virtual clock.
   */
  monotonic?: () => number;
  /** A send was not written because its lease may have ended (a late lease reply, a frozen process). */
  onSendWindowShut?: () => void;
  /** A job of another id brought another payload for a sequenceId whose record holds a payload hash: ignored. */
  onPayloadConflict?: () => void;
  /** A transfer was looked up by sequenceId while the ledger recovers from a loss (epoch.ts): what was found. */
  onRecoveryLookup?: (found: 'found' | 'absent' | 'ambiguous') => void;
  /** A fresh token per run of the handler (tests pass their own). */
  newRunner?: () => string;
  /** Several records matched one transfer in a lookup (no guess was made). */
  onAmbiguous?: (step: 'resolve') => void;
  /**
   * REDIS_MIN_REPLICAS ≥ 1: resolves true once every replica the master lists online, and at least
   * that many, acknowledged the transition that records the send in flight (Redis WAIT within
   * REDIS_REPLICA_TIMEOUT) on the connection `session` (ledger.session()) named before that
   * transition; false if it closed since. Asked before any byte of a sendTransaction request is
   * written; false means nothing is sent and the step retries later.
   */
  replicasAcknowledged?: (session: string) => Promise<boolean>;
}

/** One run of the handler: the dependencies, its lease owner token and its log. */
export interface Run {
  deps: SubmitDeps;
  owner: string;
  log: JobContext['log'];
  /** The job this run drives and its payload: what the record is made again from, should it vanish (a ledger gone back). */
  job?: { jobId: string; payload: SubmitPayload };
}

/** A step's result when it moved the transfer to `submitted` (all the next step needs to know). */
export const SUBMITTED = Symbol('submitted');

/** A step's result when it did not change the transfer (someone else did): the ledger is read again. */
export const REREAD = Symbol('read the ledger again');

/**
 * What a step leaves: the record as its transition left it, SUBMITTED, or REREAD. Never undefined: a
 * path that forgets to say is a compile error, not a silent "someone else changed it".
 */
export type Step = TransferRecord | typeof SUBMITTED | typeof REREAD;

/** The payload stored with the record: what every runner sends, whichever job it came from. */
export function storedPayload(record: TransferRecord): SubmitPayload {
  const parsed = record.payload === undefined ? undefined : parseSubmitPayload(JSON.parse(record.payload));
  if (!parsed?.ok) throw new Error(`ledger record in ${record.state} holds no valid payload`);
  return parsed.payload;
}

/**
 * A refused transition: another runner's live lease means "come back when it ends" (both times are the
 * ledger's); anything else means the transfer moved on, and the caller reads it again.
 */
export function refused(result: Extract<TransitionResult, { ok: false }>): typeof REREAD {
  if (result.reason === 'lease') {
    // Someone else's send is in flight (a stalled copy of this job, a concurrent runner): wait for it.
    throw new RetryLater(Math.max(LEASE_WAIT_SLACK_MS, result.leaseUntil - result.now + LEASE_WAIT_SLACK_MS), 'send lease held');
  }
  return REREAD;
}

/** The record a successful transition left, or REREAD (the caller then reads the ledger). */
export function changed(result: TransitionResult): TransferRecord | typeof REREAD {
  return result.ok ? result.record : REREAD;
}
