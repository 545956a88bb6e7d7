import { FailureCode } from '../../events/events.ts';
import { gateFields, matchFields, NO_RECORD, TERMINAL_STATES, TransferState, type GateDecision, type Ledger, type TransferRecord, type TransitionResult } from '../../ledger/ledger.ts';
import { decimalFromNumber } from '../../lib/decimal.ts';
import { RateLimited, RetryLater } from '../../queues/outcomes.ts';
import { backoffDelay, type BackoffProfile } from '../../queues/profiles.ts';
import type { JobContext } from '../../queues/processor.ts';
import { travelRuleApplies, type CustodyClient } from '../../upstream/client.ts';
import { CustodyError, CustodyErrorCode } from '../../upstream/errors.ts';
import type { SubmittedTransfer } from '../../upstream/schemas.ts';
import { findTransfer, type TransferMatch } from '../track-transfer/match.ts';
import { describeInvalidPayload, parseSubmitPayload, SEQUENCE_ID, type SubmitPayload } from './payload.ts';
import type { GateSetting } from './travel-rule.ts';

export interface SubmitDeps {
  ledger: Ledger;
  travelRule: { setting(): Promise<GateSetting> };
  custody: Pick<CustodyClient, 'sendTransaction' | 'getTransfersBySequenceId'>;
  /** Idempotent: adds the transfer's one tracking job unless it exists. */
  enqueueTracker(sequenceId: string): Promise<void>;
  /** SUBMIT_ATTEMPTS: retryable failures of a transfer before `transfer.failed`. */
  attempts: number;
  retry: BackoffProfile;
  /** How long a send may be in flight: the custody time-out plus margins. */
  sendLeaseMs: number;
  now?: () => number;
}

export type SubmitResult =
  | { outcome: 'rejected' | 'blocked' | 'failed' | 'submitted' | 'broadcast' | 'expired'; sequenceId: string }
  | { outcome: 'duplicate'; sequenceId: string; of: string };

/**
 * The `submit-transaction` job. The ledger is the source of truth and every step is a guarded state
 * transition, so the handler can be cut off at any line and run again (by a retry, a stalled-job
 * recovery or reconciliation) without sending twice or publishing twice:
 *
 *   received --gate--> gated --lease+send--> submitting --answer--> submitted --tracker--> (track job)
 *        \--> blocked            \--> failed (refused)      \--> (unknown: resolve first)
 *
 * A fresh transfer whose gate passes takes the first three steps in one transition (startFresh).
 */
export function createSubmitHandler(deps: SubmitDeps) {
  const now = deps.now ?? Date.now;

  return async ({ job, log }: JobContext): Promise<SubmitResult> => {
    const jobId = String(job.id);
    const parsed = parseSubmitPayload(job.data);
    if (!parsed.ok) return reject(jobId, job.data, parsed.issues);

    const payload = parsed.payload;
    const sequenceId = payload.halfSigned.sequenceId;
    const started = await startFresh(jobId, payload, log);
    if (started) return drive(started, payload, log);
    const record = await claim(jobId, payload);
    if (record.jobId !== jobId) {
      // Another job owns this sequenceId: one transfer per sequenceId, so this one does nothing.
      log.info({ owner: record.jobId, state: record.state }, 'duplicate submission ignored');
      return { outcome: 'duplicate', sequenceId, of: record.jobId };
    }
    return drive(record, payload, log);
  };

  /** Invalid payload: `transfer.rejected` once, nothing upstream, no retry. */
  async function reject(jobId: string, data: unknown, issues: Array<{ path: string; message: string }>): Promise<SubmitResult> {
    const described = describeInvalidPayload(data);
    const event = { type: 'transfer.rejected' as const, data: { code: FailureCode.INVALID_PAYLOAD, issues } };
    if (SEQUENCE_ID.test(described.sequenceId)) {
      // Keyed by sequenceId: if a transfer with it exists already, this invalid duplicate publishes nothing.
      await deps.ledger.transition(described.sequenceId, {
        from: [NO_RECORD],
        to: TransferState.REJECTED,
        set: { jobId, walletId: described.walletId, coin: described.coin, metadata: described.metadata, createdAt: now() },
        event,
      });
    } else {
      // No usable sequenceId: exactly once per job id instead.
      await deps.ledger.rejectJob(jobId, described, event.data);
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
      createdAt: now(),
      // Kept until submitted, so reconciliation can recreate a lost job from the ledger alone.
      payload: JSON.stringify(payload),
    };
  }

  /**
   * The common case in one step: a transfer with no record yet whose gate passes goes straight to
   * `submitting` (record, gate decision and send lease in one transition), then sends. It is as safe
   * as the step-by-step path: a crash after the transition leaves `submitting` with a lease, which
   * the next runner resolves by looking first. Anything else (a record exists, the rule blocks, the
   * setting cannot be fetched) returns undefined and takes the step-by-step path.
   */
  async function startFresh(jobId: string, payload: SubmitPayload, log: JobContext['log']): Promise<TransferRecord | undefined> {
    let setting: GateSetting;
    try {
      setting = await deps.travelRule.setting();
    } catch {
      return undefined; // the gate step retries, with the failure counted on the record
    }
    const decision = decide(setting, payload);
    if (decision.outcome !== 'passed') return undefined;
    const taken = await deps.ledger.transition(payload.halfSigned.sequenceId, {
      from: [NO_RECORD],
      to: TransferState.SUBMITTING,
      set: { ...newRecordFields(jobId, payload), ...gateFields(decision), leaseUntil: now() + deps.sendLeaseMs },
      increment: ['sends'],
    });
    if (!taken.ok) return undefined;
    return sendTaken(taken.record, payload, log);
  }

  /** Creates the ledger record unless one exists; the creating job owns the transfer. */
  async function claim(jobId: string, payload: SubmitPayload): Promise<TransferRecord> {
    const sequenceId = payload.halfSigned.sequenceId;
    // Guarded by "no record yet": of two concurrent jobs exactly one creates it, the other (and any
    // retry of either) finds it there and reads it.
    const created = await deps.ledger.transition(sequenceId, {
      from: [NO_RECORD],
      to: TransferState.RECEIVED,
      set: newRecordFields(jobId, payload),
    });
    return created.ok ? created.record : mustGet(sequenceId);
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
    const record = await deps.ledger.get(sequenceId);
    if (!record) throw new Error('ledger record vanished');
    return record;
  }

  /**
   * Runs the state machine from wherever the ledger says the transfer is. Each step returns the record
   * as its own transition left it, or undefined when it did not change it (someone else did): then the
   * ledger is read again.
   */
  async function drive(start: TransferRecord, payload: SubmitPayload, log: JobContext['log']): Promise<SubmitResult> {
    const sequenceId = start.sequenceId;
    let record = start;
    for (;;) {
      let next: TransferRecord | undefined;
      switch (record.state) {
        case TransferState.RECEIVED:
          next = await gate(record, payload, log);
          break;
        case TransferState.GATED:
          next = await send(record, payload, TransferState.GATED, log);
          break;
        case TransferState.SUBMITTING:
          next = await resolve(record, payload, log);
          break;
        case TransferState.SUBMITTED:
          // Repeats safely: the tracker job id is derived from the sequenceId, so a second add is a no-op.
          await deps.enqueueTracker(sequenceId);
          return { outcome: 'submitted', sequenceId };
        default:
          if (TERMINAL_STATES.has(record.state)) {
            return { outcome: record.state as 'blocked', sequenceId };
          }
          throw new Error(`unknown transfer state ${record.state}`);
      }
      record = next ?? (await mustGet(sequenceId));
    }
  }

  /** received → blocked | gated. Nothing is sent here; a crash leaves `received`, which gates again. */
  async function gate(record: TransferRecord, payload: SubmitPayload, log: JobContext['log']): Promise<TransferRecord | undefined> {
    let setting: GateSetting;
    try {
      setting = await deps.travelRule.setting();
    } catch (error) {
      return retryOrFail(record, error, { code: FailureCode.TRAVEL_RULE_UNAVAILABLE, attempts: record.failures + 1 }, log);
    }
    const decision = decide(setting, payload);
    if (decision.outcome === 'blocked') {
      const blocked = await deps.ledger.transition(record.sequenceId, {
        from: [TransferState.RECEIVED],
        to: TransferState.BLOCKED,
        set: gateFields(decision),
        unset: ['payload'],
        event: { type: 'transfer.blocked', data: { code: FailureCode.TRAVEL_RULE_REQUIRED, setting: decision.setting } },
      });
      log.info({ setting: decision.setting }, 'transfer blocked by the travel rule');
      return changed(blocked);
    }
    return changed(
      await deps.ledger.transition(record.sequenceId, {
        from: [TransferState.RECEIVED],
        to: TransferState.GATED,
        set: gateFields(decision),
      }),
    );
  }

  /**
   * → submitting, then one sendTransaction. The lease taken with the state change keeps any other
   * runner of this job (a stalled copy) from resolving or sending while this request is in flight;
   * once `submitting` is written, every later runner looks before it sends again.
   */
  async function send(
    record: TransferRecord,
    payload: SubmitPayload,
    from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
    log: JobContext['log'],
  ): Promise<TransferRecord | undefined> {
    const sequenceId = record.sequenceId;
    const taken = await deps.ledger.transition(sequenceId, {
      from: [from],
      to: TransferState.SUBMITTING,
      requireNoLease: true,
      set: { leaseUntil: now() + deps.sendLeaseMs },
      increment: ['sends'],
    });
    if (!taken.ok) return waitForLease(taken);
    return sendTaken(taken.record, payload, log);
  }

  /** One sendTransaction, by the holder of the send lease on `record` (state `submitting`). */
  async function sendTaken(record: TransferRecord, payload: SubmitPayload, log: JobContext['log']): Promise<TransferRecord | undefined> {
    const sequenceId = record.sequenceId;
    let accepted: SubmittedTransfer;
    try {
      accepted = await deps.custody.sendTransaction(payload.walletId, {
        txHex: payload.txHex,
        halfSigned: payload.halfSigned,
      });
    } catch (error) {
      // A crash here leaves `submitting` with a lease: the next runner waits it out, then resolves.
      return sendFailed(await mustGet(sequenceId), error, log);
    }
    // A crash between the answer and this line leaves `submitting`: the next runner finds the transfer
    // by lookup or gets 409 on its resend, both of which lead here without a second accepted send.
    const submitted = await markSubmitted(sequenceId, { transfer: accepted }, {
      sequenceId,
      destinationAddress: accepted.destinationAddress,
      amount: decimalFromNumber(accepted.amount),
    });
    log.info({ recordId: accepted.id }, 'transfer submitted');
    return submitted;
  }

  /**
   * Found in `submitting`: an earlier send may have gone out. Look first (get-transfer by sequenceId);
   * found → submitted; not found → send again, where a 409 means "accepted earlier".
   */
  async function resolve(record: TransferRecord, payload: SubmitPayload, log: JobContext['log']): Promise<TransferRecord | undefined> {
    if (record.leaseUntil > now()) return waitForLease({ leaseUntil: record.leaseUntil });
    const sequenceId = record.sequenceId;
    let found;
    try {
      const list = await deps.custody.getTransfersBySequenceId({ walletId: payload.walletId, coin: payload.coin }, sequenceId);
      found = findTransfer(list, { sequenceId });
    } catch (error) {
      return retryOrFail(record, error, { code: errorCode(error), attempts: record.sends, uncertain: true }, log);
    }
    if (found.kind === 'found') {
      const submitted = await markSubmitted(
        sequenceId,
        { transfer: null, recoveredBy: 'get-transfer', transaction: found.transaction },
        { sequenceId, transactionId: found.transaction.id },
      );
      log.info({ transactionId: found.transaction.id }, 'earlier send found by lookup');
      return submitted;
    }
    // Not visibly there (or the answer is not narrowed to it): sending again is safe because upstream
    // refuses a second send of one sequenceId with 409, which we read as "accepted earlier".
    return send(record, payload, TransferState.SUBMITTING, log);
  }

  async function markSubmitted(sequenceId: string, data: object, match: TransferMatch): Promise<TransferRecord | undefined> {
    return changed(await deps.ledger.transition(sequenceId, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTED,
      set: { submittedAt: now(), leaseUntil: 0, ...matchFields(match) },
      unset: ['payload', 'lastError'],
      event: { type: 'transfer.submitted', data },
    }));
  }

  /** The one place that decides what a failed send means. */
  async function sendFailed(record: TransferRecord, error: unknown, log: JobContext['log']): Promise<TransferRecord | undefined> {
    const sequenceId = record.sequenceId;
    const custody = error instanceof CustodyError ? error : undefined;
    if (custody?.code === CustodyErrorCode.DUPLICATE) {
      const submitted = await markSubmitted(sequenceId, { transfer: null, recoveredBy: 'duplicate' }, { sequenceId });
      log.warn('send answered 409: accepted earlier, treated as submitted');
      return submitted;
    }
    if (custody?.code === CustodyErrorCode.RATE_LIMITED) {
      // 429: upstream did not take it. Back to gated (lease released) and the queue waits Retry-After.
      await deps.ledger.transition(sequenceId, { from: [TransferState.SUBMITTING], to: TransferState.GATED, set: { leaseUntil: 0 } });
      throw new RateLimited(custody.retryAfterMs ?? 1_000);
    }
    if (custody && !custody.retryable && !custody.maybeProcessed) {
      // 401 after a token renewal, 404, other 4xx, success:false: refused for good, nothing accepted.
      const failed = await deps.ledger.transition(sequenceId, {
        from: [TransferState.SUBMITTING],
        to: TransferState.FAILED,
        set: { leaseUntil: 0 },
        unset: ['payload'],
        event: {
          type: 'transfer.failed',
          data: { code: custody.code, httpStatus: custody.httpStatus ?? null, message: custody.message, attempts: record.sends },
        },
      });
      log.warn({ code: custody.code, httpStatus: custody.httpStatus }, 'transfer refused by upstream');
      return changed(failed);
    }
    const uncertain = custody ? custody.maybeProcessed : true;
    return retryOrFail(record, error, { code: errorCode(error), attempts: record.sends, uncertain }, log);
  }

  /**
   * A retryable failure: count it, release any lease we hold, and retry with backoff; when SUBMIT_ATTEMPTS
   * are used up, `transfer.failed`. Except when a send may have gone out (`uncertain`): then failing
   * could be a lie about money that moved, so the transfer keeps being resolved at the capped delay
   * until upstream gives a definite answer.
   */
  async function retryOrFail(
    record: TransferRecord,
    error: unknown,
    failure: { code: string; attempts: number; uncertain?: boolean },
    log: JobContext['log'],
  ): Promise<TransferRecord | undefined> {
    const sequenceId = record.sequenceId;
    const failures = record.failures + 1;
    const custody = error instanceof CustodyError ? error : undefined;
    if (failures >= deps.attempts && !failure.uncertain) {
      const failed = await deps.ledger.transition(sequenceId, {
        from: [record.state],
        to: TransferState.FAILED,
        set: { leaseUntil: 0, failures },
        unset: ['payload'],
        event: {
          type: 'transfer.failed',
          data: {
            code: failure.code,
            httpStatus: custody?.httpStatus ?? null,
            message: custody?.message ?? 'retries exhausted',
            attempts: failure.attempts,
          },
        },
      });
      if (failed.ok) log.warn({ code: failure.code, attempts: failure.attempts }, 'retries exhausted, transfer failed');
      return changed(failed); // the caller finds the terminal state
    }
    const delayMs = backoffDelay(deps.retry, failures);
    await deps.ledger.transition(sequenceId, {
      from: [record.state],
      to: record.state,
      set: { leaseUntil: 0, failures, lastError: failure.code },
    });
    log.warn(
      { err: error, code: failure.code, failures, delayMs, uncertain: failure.uncertain ?? false },
      failure.uncertain && failures >= deps.attempts ? 'send outcome still unknown, resolving again later' : 'step failed, retrying later',
    );
    throw new RetryLater(delayMs, failure.code);
  }

  function waitForLease(taken: { leaseUntil?: number }): never {
    // Someone else's send is in flight (a stalled copy of this job): come back when its lease ends.
    const delayMs = Math.max(50, (taken.leaseUntil ?? now()) - now() + 50);
    throw new RetryLater(delayMs, 'send lease held');
  }
}

/** The record a successful transition left, or undefined (the caller then reads the ledger). */
function changed(result: TransitionResult): TransferRecord | undefined {
  return result.ok ? result.record : undefined;
}

function errorCode(error: unknown): string {
  return error instanceof CustodyError ? error.code : 'INTERNAL_ERROR';
}
