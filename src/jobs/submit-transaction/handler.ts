import { randomUUID } from 'node:crypto';
import { FailureCode, type EventData } from '../../../packages/producer/src/events.ts';
import {
  gateFields,
  matchFields,
  NO_RECORD,
  NO_VIEW,
  SEND_VIEW,
  TERMINAL_STATES,
  TransferState,
  type GateDecision,
  type Ledger,
  type SendView,
  type TransferRecord,
  type TransitionRequest,
  type TransitionResult,
  type Tombstone,
} from '../../ledger/ledger.ts';
import { RateLimited, RetryLater } from '../../queues/outcomes.ts';
import type { Trackers } from '../../queues/trackers.ts';
import type { JobContext } from '../../queues/processor.ts';
import { backoffDelay, LEASE_WAIT_SLACK_MS, type BackoffProfile } from '../../timing.ts';
import { classifySendFailure, type SendFailure } from '../../transfers/classify-send.ts';
import { findTransfer, type MatchResult, type TransferMatch } from '../../transfers/match.ts';
import { travelRuleApplies, type CustodyClient, type WalletRef } from '../../upstream/client.ts';
import { Deadline } from '../../upstream/deadline.ts';
import { CustodyError } from '../../upstream/errors.ts';
import { EXACT_AMOUNT, type SubmittedTransfer } from '../../upstream/schemas.ts';
import { describeInvalidPayload, parseSubmitPayload, SEQUENCE_ID, type SubmitPayload } from '../../../packages/producer/src/payload.ts';
import type { GateSetting } from './travel-rule.ts';

export interface SubmitDeps {
  ledger: Ledger;
  travelRule: { setting(): Promise<GateSetting> };
  custody: Pick<CustodyClient, 'sendTransaction' | 'getTransfersBySequenceId'>;
  /**
   * Whether a lookup by sequenceId answers only with that transfer, for a wallet (LookupNarrowing):
   * only then does a single `send` record without a sequenceId identify the transfer.
   */
  lookupNarrowing: { narrows(wallet: WalletRef, signal?: AbortSignal): Promise<boolean> };
  /**
   * Adds the transfer's one tracking job unless it exists and clears its tracker outbox entry
   * (Trackers.ensure); the `submitted` transition records the entry, so a crash in between leaves it
   * for reconciliation's sweep.
   */
  trackers: Pick<Trackers, 'ensure'>;
  /** SUBMIT_ATTEMPTS: sendTransaction requests (and failed gate lookups) before `transfer.failed`. */
  attempts: number;
  retry: BackoffProfile;
  /** The overall deadline of one sendTransaction call or one lookup (timing.ts: sendDeadlineMs). */
  sendDeadlineMs: number;
  /** The send lease: the deadline plus a margin (timing.ts: sendLeaseMs). Must exceed sendDeadlineMs. */
  sendLeaseMs: number;
  /** UNRESOLVED_AFTER: a send whose outcome stays unknown this long gets `transfer.unresolved`. */
  unresolvedAfterMs: number;
  /** TRACK_DEADLINE: a send whose outcome stays unknown this long ends `transfer.expired` (SEND_OUTCOME_UNKNOWN). */
  deadlineMs: number;
  /** Process clock, for the text of the gate decision only: leases and time guards use the ledger's. */
  now?: () => number;
  /** A fresh token per run of the handler (tests pass their own). */
  newRunner?: () => string;
  /** Several records matched one transfer in a lookup (no guess was made). */
  onAmbiguous?: (step: 'resolve') => void;
  /**
   * REDIS_MIN_REPLICAS ≥ 1: resolves true once that many replicas acknowledged the transition that
   * records the send in flight (Redis WAIT within REDIS_REPLICA_TIMEOUT). Asked before any byte of a
   * sendTransaction request is written; false means nothing is sent and the step retries later.
   */
  replicasAcknowledged?: () => Promise<boolean>;
}

export type SubmitResult =
  | { outcome: 'rejected' | 'blocked' | 'failed' | 'submitted' | 'broadcast' | 'expired'; sequenceId: string }
  | { outcome: 'duplicate'; sequenceId: string; of: string }
  /** The sequenceId's transfer ended before (its tombstone says how): nothing sent, nothing published. */
  | { outcome: 'ended'; sequenceId: string; ended: Tombstone };

/** One run of the handler: its lease owner token and its log. */
interface Runner {
  owner: string;
  log: JobContext['log'];
}

/** Fields that hold the send lease; a transition that releases it deletes them. */
const LEASE_FIELDS = ['leaseOwner', 'leaseUntil', 'pending'];

/** A step's result when it moved the transfer to `submitted` (all the next step needs to know). */
const SUBMITTED = Symbol('submitted');

/**
 * What a step leaves: the record as its transition left it, SUBMITTED, or
 * undefined when it did not change the transfer (someone else did) and the ledger must be read again.
 */
type Step = TransferRecord | typeof SUBMITTED | undefined;

/**
 * The `submit-transaction` job. The ledger is the source of truth and every step is a guarded state
 * transition, so the handler can be cut off at any line and run again (by a retry, a stalled-job
 * recovery or reconciliation) without sending twice or publishing twice:
 *
 *   received --gate--> gated --lease+send--> submitting --answer--> submitted --tracker--> (track job)
 *        \--> blocked                             |  \--> failed (refused, no send may have gone out)
 *                                                 \--> unknown outcome: sticky; lookup, bounded resends,
 *                                                      transfer.unresolved, expired, or an operator
 *
 * Each run of the handler is a runner with its own lease token. Sending, and every move out of
 * `submitting`, needs the send lease; the lease is judged by Redis's clock and owned by one runner, so a
 * runner that outlived its lease can change nothing once another took over. What a failed send means is
 * decided in one place (classifySendFailure). A fresh transfer whose gate passes takes the first three
 * steps in one transition (startFresh).
 */
export function createSubmitHandler(deps: SubmitDeps) {
  const now = deps.now ?? Date.now;
  const newRunner = deps.newRunner ?? randomUUID;
  const { ledger } = deps;

  return async ({ job, log }: JobContext): Promise<SubmitResult> => {
    const jobId = String(job.id);
    const parsed = parseSubmitPayload(job.data);
    if (!parsed.ok) return reject(jobId, job.data, parsed.issues);

    const runner: Runner = { owner: newRunner(), log };
    const payload = parsed.payload;
    const sequenceId = payload.halfSigned.sequenceId;
    const started = await startFresh(jobId, payload, runner);
    if (started) return drive(started, sequenceId, runner);
    const record = await claim(jobId, payload);
    if ('ended' in record) {
      // Ended before, and its record may be gone (RETENTION): one transfer per sequenceId, ever.
      log.info({ ended: record.ended.state, version: record.ended.version }, 'sequenceId ended before: nothing sent');
      return { outcome: 'ended', sequenceId, ended: record.ended };
    }
    if (record.jobId !== jobId) {
      // Another job owns this sequenceId: one transfer per sequenceId, so this one does nothing.
      log.info({ owner: record.jobId, state: record.state }, 'duplicate submission ignored');
      return { outcome: 'duplicate', sequenceId, of: record.jobId };
    }
    return drive(record, sequenceId, runner);
  };

  /** Invalid payload: `transfer.rejected` once, nothing upstream, no retry. */
  async function reject(jobId: string, data: unknown, issues: Array<{ path: string; message: string }>): Promise<SubmitResult> {
    const described = describeInvalidPayload(data);
    const event = { type: 'transfer.rejected' as const, data: { code: FailureCode.INVALID_PAYLOAD, issues } };
    if (SEQUENCE_ID.test(described.sequenceId)) {
      // Keyed by sequenceId: if a transfer with it exists already, or ended before (its tombstone), this
      // invalid duplicate publishes nothing.
      const rejected = await ledger.transition(described.sequenceId, {
        from: [NO_RECORD],
        to: TransferState.REJECTED,
        set: { jobId, walletId: described.walletId, coin: described.coin, metadata: described.metadata },
        stamp: ['createdAt'],
        event,
      });
      if (!rejected.ok && rejected.ended) return { outcome: 'ended', sequenceId: described.sequenceId, ended: rejected.ended };
    } else {
      // No usable sequenceId: exactly once per job id instead.
      await ledger.rejectJob(jobId, described, event.data);
    }
    return { outcome: 'rejected', sequenceId: described.sequenceId };
  }

  /** The fields of a new ledger record; the job that writes them owns the transfer. */
  function newRecordFields(jobId: string, payload: SubmitPayload): Record<string, string | number> {
    return {
      jobId,
      walletId: String(payload.walletId),
      coin: payload.coin,
      metadata: payload.metadata ? JSON.stringify(payload.metadata) : '',
      // Kept until submitted: it is what gets sent (by any runner), and what reconciliation recreates a
      // lost job from.
      payload: JSON.stringify(payload),
    };
  }

  /**
   * The common case in one step: a transfer with no record yet whose gate passes goes straight to
   * `submitting` (record, gate decision and send lease in one transition), then sends. It is as safe
   * as the step-by-step path: a crash after the transition leaves `submitting` with a pending send,
   * which the next runner treats as "may have gone out". Anything else (a record exists, the rule
   * blocks, the setting cannot be fetched) returns undefined and takes the step-by-step path.
   */
  async function startFresh(jobId: string, payload: SubmitPayload, runner: Runner): Promise<Step> {
    let setting: GateSetting;
    try {
      setting = await deps.travelRule.setting();
    } catch {
      return undefined; // the gate step retries, with the failure counted on the record
    }
    const decision = decide(setting, payload);
    if (decision.outcome !== 'passed') return undefined;
    const taken = await ledger.transitionReading(payload.halfSigned.sequenceId, {
      from: [NO_RECORD],
      to: TransferState.SUBMITTING,
      set: { ...newRecordFields(jobId, payload), ...gateFields(decision), pending: 1 },
      stamp: ['createdAt'],
      lease: { mode: 'take', owner: runner.owner, ms: deps.sendLeaseMs },
      increment: { sends: 1 },
    }, SEND_VIEW);
    if (!taken.ok) return undefined;
    return sendTaken(taken.record, payload, runner);
  }

  /**
   * Creates the ledger record unless one exists; the creating job owns the transfer. A sequenceId whose
   * transfer ended before (tombstone) gets no record: `{ ended }` instead.
   */
  async function claim(jobId: string, payload: SubmitPayload): Promise<TransferRecord | { ended: Tombstone }> {
    const sequenceId = payload.halfSigned.sequenceId;
    // Guarded by "no record yet": of two concurrent jobs exactly one creates it, the other (and any
    // retry of either) finds it there and reads it.
    const created = await ledger.transition(sequenceId, {
      from: [NO_RECORD],
      to: TransferState.RECEIVED,
      set: newRecordFields(jobId, payload),
      stamp: ['createdAt'],
    });
    if (created.ok) return created.record;
    if (created.ended) return { ended: created.ended };
    return mustGet(sequenceId);
  }

  function decide(setting: GateSetting, payload: SubmitPayload): GateDecision {
    const applies = travelRuleApplies(setting);
    const hasReference = payload.travelRule?.reference !== undefined;
    return {
      setting: { outgoingTxn: setting.outgoingTxn, mandatory: setting.mandatory, blockTxn: setting.blockTxn },
      settingFetchedAt: setting.fetchedAt,
      checkedAt: new Date(now()).toISOString(),
      applies,
      reference: hasReference,
      outcome: applies && !hasReference ? 'blocked' : 'passed',
    };
  }

  async function mustGet(sequenceId: string): Promise<TransferRecord> {
    const record = await ledger.get(sequenceId);
    if (!record) throw new Error('ledger record vanished');
    return record;
  }

  /** The payload stored with the record: what every runner sends, whichever job it came from. */
  function storedPayload(record: TransferRecord): SubmitPayload {
    const parsed = record.payload === undefined ? undefined : parseSubmitPayload(JSON.parse(record.payload));
    if (!parsed?.ok) throw new Error(`ledger record in ${record.state} holds no valid payload`);
    return parsed.payload;
  }

  /**
   * Runs the state machine from wherever the ledger says the transfer is. Each step returns the record
   * as its own transition left it (SUBMITTED once submitted), or undefined when it did not change it
   * (someone else did): then the ledger is read again.
   */
  async function drive(start: Exclude<Step, undefined>, sequenceId: string, runner: Runner): Promise<SubmitResult> {
    if (start === SUBMITTED) return submitted(sequenceId);
    let record = start;
    for (;;) {
      let next: Step;
      switch (record.state) {
        case TransferState.RECEIVED:
          next = await gate(record, runner);
          break;
        case TransferState.GATED:
          next = await takeAndSend(record, TransferState.GATED, runner);
          break;
        case TransferState.SUBMITTING:
          next = await resolve(record, runner);
          break;
        case TransferState.SUBMITTED:
          return submitted(sequenceId);
        default:
          if (TERMINAL_STATES.has(record.state)) {
            return { outcome: record.state as 'blocked', sequenceId };
          }
          throw new Error(`unknown transfer state ${record.state}`);
      }
      if (next === SUBMITTED) return submitted(sequenceId);
      record = next ?? (await mustGet(sequenceId));
    }
  }

  async function submitted(sequenceId: string): Promise<SubmitResult> {
    // Just submitted, or found submitted by a re-run. Repeats safely: the tracker job
    // id is derived from the sequenceId, so a second add is a no-op.
    await deps.trackers.ensure(sequenceId);
    return { outcome: 'submitted', sequenceId };
  }

  /** received → blocked | gated. Nothing is sent here; a crash leaves `received`, which gates again. */
  async function gate(record: TransferRecord, runner: Runner): Promise<Step> {
    const payload = storedPayload(record);
    let setting: GateSetting;
    try {
      setting = await deps.travelRule.setting();
    } catch (error) {
      const failures = record.failures + 1;
      const code = FailureCode.TRAVEL_RULE_UNAVAILABLE;
      if (failures >= deps.attempts) {
        const custody = error instanceof CustodyError ? error : undefined;
        return changed(await ledger.transition(record.sequenceId, {
          from: [TransferState.RECEIVED],
          to: TransferState.FAILED,
          set: { failures },
          unset: ['payload'],
          event: {
            type: 'transfer.failed',
            data: { code, httpStatus: custody?.httpStatus ?? null, message: custody?.message ?? 'retries exhausted', attempts: failures },
          },
        }));
      }
      await ledger.transition(record.sequenceId, { from: [TransferState.RECEIVED], to: TransferState.RECEIVED, set: { failures, lastError: code } });
      const delayMs = backoffDelay(deps.retry, failures);
      runner.log.warn({ err: error, code, failures, delayMs }, 'travel-rule lookup failed, retrying later');
      throw new RetryLater(delayMs, code);
    }
    const decision = decide(setting, payload);
    if (decision.outcome === 'blocked') {
      const blocked = await ledger.transition(record.sequenceId, {
        from: [TransferState.RECEIVED],
        to: TransferState.BLOCKED,
        set: gateFields(decision),
        unset: ['payload'],
        event: { type: 'transfer.blocked', data: { code: FailureCode.TRAVEL_RULE_REQUIRED, setting: decision.setting } },
      });
      runner.log.info({ setting: decision.setting }, 'transfer blocked by the travel rule');
      return changed(blocked);
    }
    return changed(
      await ledger.transition(record.sequenceId, {
        from: [TransferState.RECEIVED],
        to: TransferState.GATED,
        set: gateFields(decision),
      }),
    );
  }

  /**
   * Takes (or renews) the send lease and marks a send pending, then sends. From `gated` this is the first
   * send; from `submitting` a resend, made only by a runner that already holds the lease. A crash after
   * this transition leaves `pending`, which the next runner reads as "may have gone out".
   */
  async function takeAndSend(record: TransferRecord, from: typeof TransferState.GATED | typeof TransferState.SUBMITTING, runner: Runner): Promise<Step> {
    const taken = await ledger.transition(record.sequenceId, {
      from: [from],
      to: TransferState.SUBMITTING,
      lease: { mode: 'take', owner: runner.owner, ms: deps.sendLeaseMs },
      set: { pending: 1 },
      increment: { sends: 1 },
    });
    if (!taken.ok) return refused(taken);
    return sendTaken(taken.record, storedPayload(taken.record), runner);
  }

  /**
   * One sendTransaction by the lease holder, under one deadline that covers the whole call (rate-limit
   * wait, token requests, a 401 and its retry) and ends SEND_LEASE_MARGIN_MS before the lease does.
   * `sends` was counted as one when the lease was taken; the outcome transition adds the difference.
   */
  async function sendTaken(record: SendView, payload: SubmitPayload, runner: Runner): Promise<Step> {
    const sequenceId = record.sequenceId;
    if (deps.replicasAcknowledged && !(await deps.replicasAcknowledged())) {
      // A failover now could promote a replica that never saw "send in flight" and let another runner
      // send again: send nothing, undo the send's count, give the lease back, and come back later.
      const released = await release(record, runner, { lastError: 'REPLICAS_NOT_ACKNOWLEDGED' }, -1, 1);
      if (!released.ok) return refused(released);
      runner.log.warn('redis replicas did not acknowledge the send in flight: nothing sent, retrying later');
      throw new RetryLater(backoffDelay(deps.retry, released.record.failures), 'replicas did not acknowledge');
    }
    let requests = 0;
    let accepted: SubmittedTransfer;
    const deadline = new Deadline(deps.sendDeadlineMs);
    try {
      accepted = await deps.custody.sendTransaction(
        payload.walletId,
        { txHex: payload.txHex, halfSigned: payload.halfSigned },
        { signal: deadline.signal, onRequest: () => requests++, keepRaw: false },
      );
    } catch (error) {
      return sendFailed(record, error, requests - 1, runner);
    } finally {
      deadline.clear();
    }
    // A crash between the answer and this line leaves `pending`: the next runner finds the transfer by
    // lookup or gets 409 on its resend, both of which lead here without a second accepted send.
    // `raw` echoes our own request (and a person): it stays here (docs/contract.md section 4, v1.1). Asked for without
    // it (keepRaw: false); dropped here too, whatever a custody client returns.
    const { raw: _raw, ...transfer } = accepted;
    const submitted = await markSubmitted(record, runner, { transfer }, {
      sequenceId,
      destinationAddress: accepted.destinationAddress,
      amount: accepted[EXACT_AMOUNT],
    }, requests - 1);
    if (submitted) runner.log.info({ recordId: accepted.id }, 'transfer submitted');
    return submitted;
  }

  /**
   * Found in `submitting` (a send failed before, or a runner crashed or outlived its lease): take the
   * lease, then
   * - the sequenceId was found in use by another transaction (SEQUENCE_ID_IN_USE): send nothing, look
   *   nothing up, wait for an operator until TRACK_DEADLINE;
   * - no send was made yet: send;
   * - otherwise look before sending again (get-transfer by sequenceId), whatever the earlier answers
   *   said (a status code is a claim): found → submitted; an answer that cannot tell (several
   *   candidates) → never resend, never claim: the transfer stays unsettled (sticky), reaching
   *   `transfer.unresolved` at UNRESOLVED_AFTER; not found → resend while fewer than SUBMIT_ATTEMPTS
   *   sends were made, else keep looking at the capped backoff.
   */
  async function resolve(record: TransferRecord, runner: Runner): Promise<Step> {
    const sequenceId = record.sequenceId;
    const taken = await ledger.transition(sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'take', owner: runner.owner, ms: deps.sendLeaseMs },
    });
    if (!taken.ok) return refused(taken);
    const held = taken.record;
    // `updatedAt` is the ledger's clock at the take, so the time guards below never use this process's.
    const ledgerNow = held.updatedAt;
    if (held.inUseSince !== undefined) return parkInUse(held, ledgerNow, runner);
    if (held.unknownSince === undefined && held.sends === 0) return takeAndSend(held, TransferState.SUBMITTING, runner);

    const unknown = held.unknownSince !== undefined;
    const pastDeadline = unknown && ledgerNow - held.unknownSince! >= deps.deadlineMs;

    // A lookup comes first even past the deadline: a transfer upstream shows is submitted, not expired.
    let list;
    let found: MatchResult | undefined;
    const deadline = new Deadline(deps.sendDeadlineMs);
    try {
      const payload = storedPayload(held);
      const wallet = { walletId: payload.walletId, coin: payload.coin };
      list = await deps.custody.getTransfersBySequenceId(wallet, sequenceId, { signal: deadline.signal });
      if (unknown) {
        found = findTransfer(list, { sequenceId });
        // A record without our sequenceId identifies nothing unless this provider narrows its answers.
        if (found.kind === 'found' && found.transaction.sequenceId !== sequenceId && !(await deps.lookupNarrowing.narrows(wallet, deadline.signal))) {
          found = { kind: 'ambiguous', candidates: 1 };
        }
      }
    } catch (error) {
      const code = error instanceof CustodyError ? error.code : 'INTERNAL_ERROR';
      if (!unknown) {
        // Every send so far was answered "not taken": no resend without a look, so try again later
        // (failed once SUBMIT_ATTEMPTS runs could not look).
        runner.log.warn({ err: error, code }, 'lookup before a resend failed');
        return lookupFailed(held, code, runner);
      }
      runner.log.warn({ err: error, code }, 'lookup of a send with unknown outcome failed');
      if (pastDeadline) return expireUnknown(held, runner);
      return stillUnknown(held, code, ledgerNow, 0, runner);
    } finally {
      deadline.clear();
    }
    if (!unknown) {
      // Every send so far was proven "not taken", so no record upstream can be this transfer's: one
      // that carries our sequenceId is another transaction's (SEQUENCE_ID_IN_USE, as a 409 would be).
      // Records without a sequenceId prove nothing either way (the wallet's other transfers, when the
      // list is not narrowed): the resend's own answer decides, and a 409 to it means the same.
      if (list.some((tx) => tx.sequenceId === sequenceId)) {
        return inUse(held, { kind: 'in-use', code: 'SEQUENCE_ID_IN_USE', httpStatus: null, message: 'lookup shows the sequenceId in use', retryAfterMs: undefined }, 0, runner);
      }
      return takeAndSend(held, TransferState.SUBMITTING, runner);
    }
    found ??= findTransfer(list, { sequenceId });
    if (found.kind === 'ambiguous') deps.onAmbiguous?.('resolve');
    if (found.kind === 'found') {
      const submitted = await markSubmitted(
        held,
        runner,
        { transfer: null, recoveredBy: 'get-transfer', transaction: found.transaction },
        { sequenceId, transactionId: found.transaction.id },
        0,
      );
      if (submitted) runner.log.info({ transactionId: found.transaction.id }, 'earlier send found by lookup');
      return submitted;
    }
    if (pastDeadline) return expireUnknown(held, runner);
    if (found.kind === 'ambiguous') {
      // One of the candidates may be ours: a resend could be a second payment, a claim a wrong one.
      runner.log.warn({ candidates: found.candidates }, 'lookup cannot tell which record is ours: no resend');
      return stillUnknown(held, held.lastError ?? 'SEND_OUTCOME_UNKNOWN', ledgerNow, 0, runner);
    }
    if (held.sends < deps.attempts) return takeAndSend(held, TransferState.SUBMITTING, runner);
    return stillUnknown(held, held.lastError ?? 'SEND_OUTCOME_UNKNOWN', ledgerNow, 0, runner);
  }

  /** The lookup before a resend failed, and no send may have gone out: retry later, failed at SUBMIT_ATTEMPTS. */
  async function lookupFailed(record: TransferRecord, code: string, runner: Runner): Promise<Step> {
    if (record.failures + 1 >= deps.attempts) {
      return fail(record, { kind: 'refused', code: record.lastError ?? code, httpStatus: null, message: 'retries exhausted', retryAfterMs: undefined }, 0, runner);
    }
    const released = await release(record, runner, {}, 0, 1);
    if (!released.ok) return refused(released);
    throw new RetryLater(backoffDelay(deps.retry, released.record.failures), code);
  }

  /**
   * SEQUENCE_ID_IN_USE: nothing is sent or looked up again (the other transaction's records would be
   * read as ours); an operator settles it (README), else it expires at TRACK_DEADLINE.
   */
  async function parkInUse(record: TransferRecord, ledgerNow: number, runner: Runner): Promise<Step> {
    if (ledgerNow - record.inUseSince! >= deps.deadlineMs) return expireUnknown(record, runner, record.inUseSince);
    const released = await release(record, runner, {}, 0, 1);
    if (!released.ok) return refused(released);
    throw new RetryLater(backoffDelay(deps.retry, released.record.failures), 'sequenceId in use upstream');
  }

  /** What a failed send means is decided by classifySendFailure; this carries it out. */
  async function sendFailed(record: SendView, error: unknown, extraSends: number, runner: Runner): Promise<Step> {
    const failure = classifySendFailure(error, record);
    const log = runner.log;
    switch (failure.kind) {
      case 'in-use':
        return inUse(record, failure, extraSends, runner);
      case 'accepted-earlier': {
        const submitted = await markSubmitted(record, runner, { transfer: null, recoveredBy: 'duplicate' }, { sequenceId: record.sequenceId }, extraSends);
        if (submitted) log.warn('send answered 409: accepted earlier, treated as submitted');
        return submitted;
      }
      case 'rate-limited': {
        // Not taken: release the lease (the transfer stays in `submitting`) and the queue waits Retry-After.
        const released = await release(record, runner, { lastError: failure.code }, extraSends);
        if (!released.ok) return refused(released);
        throw new RateLimited(failure.retryAfterMs ?? 1_000);
      }
      case 'refused':
        return fail(record, failure, extraSends, runner);
      case 'retry': {
        // Attempts are HTTP sends; failures count calls that never got as far as a send (token trouble).
        if (record.sends + extraSends >= deps.attempts || record.failures + 1 >= deps.attempts) return fail(record, failure, extraSends, runner);
        const released = await release(record, runner, { lastError: failure.code }, extraSends, 1);
        if (!released.ok) return refused(released);
        const delayMs = backoffDelay(deps.retry, released.record.failures);
        log.warn({ err: error, code: failure.code, sends: released.record.sends, delayMs }, 'send not taken, retrying later');
        throw new RetryLater(delayMs, failure.code);
      }
      case 'unknown':
        log.warn({ err: error, code: failure.code }, 'send outcome unknown: it may have gone out');
        return stillUnknown(record, failure.code, undefined, extraSends, runner);
    }
  }

  /**
   * The send may have gone out and nothing settled it: record that (sticky), release the lease, publish
   * `transfer.unresolved` once when it has lasted UNRESOLVED_AFTER, and come back at the capped backoff.
   */
  async function stillUnknown(record: SendView, code: string, ledgerNow: number | undefined, extraSends: number, runner: Runner): Promise<never | undefined> {
    const since = record.unknownSince;
    const announce = since !== undefined && ledgerNow !== undefined && record.unresolvedAt === undefined && ledgerNow - since >= deps.unresolvedAfterMs;
    const request: Partial<TransitionRequest> = announce
      ? {
          requireAbsent: ['unresolvedAt'],
          stamp: ['unresolvedAt'],
          event: {
            type: 'transfer.unresolved',
            data: { code: FailureCode.SEND_OUTCOME_UNKNOWN, attempts: record.sends + extraSends, lastError: code },
          },
        }
      : {};
    const released = await release(record, runner, { lastError: code }, extraSends, 1, { stampOnce: ['unknownSince'], ...request });
    if (!released.ok) return refused(released);
    if (announce) runner.log.error({ attempts: released.record.sends, lastError: code }, 'send outcome still unknown: transfer.unresolved published, an operator may resolve it');
    const delayMs = backoffDelay(deps.retry, released.record.failures);
    throw new RetryLater(delayMs, 'send outcome unknown');
  }

  /**
   * A 409 that nothing we did explains (no earlier send of this transfer may have been processed): the
   * sequenceId is in use upstream by a transaction we cannot claim. `transfer.unresolved`
   * SEQUENCE_ID_IN_USE at once; no tracker, no match; the sticky `inUseSince` stops every later send.
   */
  async function inUse(record: SendView, failure: SendFailure, extraSends: number, runner: Runner): Promise<never | undefined> {
    const announce = record.unresolvedAt === undefined;
    const released = await release(record, runner, { lastError: failure.code }, extraSends, 1, {
      stampOnce: ['inUseSince'],
      ...(announce
        ? {
            stamp: ['unresolvedAt'],
            event: {
              type: 'transfer.unresolved',
              data: { code: FailureCode.SEQUENCE_ID_IN_USE, attempts: record.sends + extraSends, lastError: failure.code },
            },
          }
        : {}),
    });
    if (!released.ok) return refused(released);
    runner.log.error({ attempts: released.record.sends }, 'sequenceId in use upstream by another transaction: transfer.unresolved published, an operator must resolve it');
    throw new RetryLater(backoffDelay(deps.retry, released.record.failures), 'sequenceId in use upstream');
  }

  /** The lease owner gives the lease up; the transfer stays in `submitting`. */
  function release(
    record: SendView,
    runner: Runner,
    set: Record<string, string | number>,
    extraSends: number,
    failures = 0,
    more: Partial<TransitionRequest> = {},
  ): Promise<TransitionResult> {
    return ledger.transition(record.sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: runner.owner },
      set,
      unset: LEASE_FIELDS,
      increment: { sends: extraSends, failures },
      ...more,
    });
  }

  async function markSubmitted(record: SendView, runner: Runner, data: EventData['transfer.submitted'], match: TransferMatch, extraSends: number): Promise<Step> {
    const marked = await ledger.transitionReading(record.sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTED,
      lease: { mode: 'own', owner: runner.owner },
      set: matchFields(match),
      stamp: ['submittedAt'],
      unset: ['payload', 'lastError', ...LEASE_FIELDS],
      increment: { sends: extraSends },
      event: { type: 'transfer.submitted', data },
      trackerPending: true,
    }, NO_VIEW);
    if (!marked.ok) return undefined;
    return SUBMITTED;
  }

  /** `transfer.failed`: only by the lease owner, and the ledger refuses it while a send may have gone out. */
  async function fail(record: SendView, failure: SendFailure, extraSends: number, runner: Runner): Promise<Step> {
    const failed = await ledger.transition(record.sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.FAILED,
      lease: { mode: 'own', owner: runner.owner },
      unset: ['payload', ...LEASE_FIELDS],
      increment: { sends: extraSends },
      event: {
        type: 'transfer.failed',
        data: { code: failure.code, httpStatus: failure.httpStatus, message: failure.message, attempts: record.sends + extraSends },
      },
    });
    if (failed.ok) runner.log.warn({ code: failure.code, httpStatus: failure.httpStatus }, 'transfer failed: every send was refused');
    return changed(failed);
  }

  /** TRACK_DEADLINE passed since a send may have gone out, and nothing settled it. */
  async function expireUnknown(record: TransferRecord, runner: Runner, unresolvedSince = record.unknownSince): Promise<Step> {
    const since = unresolvedSince ?? record.updatedAt;
    const expired = await ledger.transition(record.sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.EXPIRED,
      lease: { mode: 'own', owner: runner.owner },
      unset: ['payload', ...LEASE_FIELDS],
      event: {
        type: 'transfer.expired',
        data: {
          code: FailureCode.SEND_OUTCOME_UNKNOWN,
          submittedAt: new Date(since).toISOString(),
          deadline: new Date(since + deps.deadlineMs).toISOString(),
        },
      },
    });
    if (expired.ok) runner.log.error({ sends: record.sends }, 'send outcome never settled: transfer expired');
    return changed(expired);
  }
}

/**
 * A refused transition: another runner's live lease means "come back when it ends" (both times are the
 * ledger's); anything else means the transfer moved on, and the caller reads it again.
 */
function refused(result: Extract<TransitionResult, { ok: false }>): undefined {
  if (result.reason === 'lease') {
    // Someone else's send is in flight (a stalled copy of this job, a concurrent runner): wait for it.
    throw new RetryLater(Math.max(LEASE_WAIT_SLACK_MS, result.leaseUntil - result.now + LEASE_WAIT_SLACK_MS), 'send lease held');
  }
  return undefined;
}

/** The record a successful transition left, or undefined (the caller then reads the ledger). */
function changed(result: TransitionResult): TransferRecord | undefined {
  return result.ok ? result.record : undefined;
}
