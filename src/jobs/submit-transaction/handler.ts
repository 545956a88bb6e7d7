import { randomUUID } from 'node:crypto';
import { FailureCode } from '../../../packages/producer/src/events.ts';
import { describeInvalidPayload, parseSubmitPayload, SEQUENCE_ID, type SubmitPayload } from '../../../packages/producer/src/payload.ts';
import { TERMINAL_STATES, TransferState, type TransferRecord, type Tombstone } from '../../ledger/ledger.ts';
import { op } from '../../ledger/operations.ts';
import { isHashOf, payloadHash } from '../../transfers/payload-hash.ts';
import type { JobContext } from '../../queues/processor.ts';
import { REREAD, SUBMITTED, type Run, type Step, type SubmitDeps } from './steps/context.ts';
import { gate, startFresh } from './steps/gate.ts';
import { resolve } from './steps/resolve.ts';
import { lookThenSend, takeAndSend } from './steps/send.ts';

export type { SubmitDeps } from './steps/context.ts';

export type SubmitResult =
  | { outcome: 'rejected' | 'blocked' | 'failed' | 'submitted' | 'broadcast' | 'expired' | 'cancelled' | 'halted'; sequenceId: string }
  | { outcome: 'duplicate'; sequenceId: string; of: string }
  /** The sequenceId's transfer ended before (its tombstone says how): nothing sent, nothing published. */
  | { outcome: 'ended'; sequenceId: string; ended: Tombstone };

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
 * This file drives; the steps live in steps/: gate.ts (travel rule, and the one-transition start of a
 * fresh transfer), send.ts (lease, send, what its failure means), resolve.ts (a transfer found in
 * `submitting`: look before any resend), settle.ts (the outcomes, each one named ledger operation).
 * Each run of the handler is a runner with its own lease token; the lease is judged by Redis's clock.
 */
export function createSubmitHandler(deps: SubmitDeps) {
  const newRunner = deps.newRunner ?? randomUUID;
  const { ledger } = deps;

  return async ({ job, log }: JobContext): Promise<SubmitResult> => {
    const jobId = String(job.id);
    const parsed = parseSubmitPayload(job.data);
    if (!parsed.ok) return reject(jobId, job.data, parsed.issues);
    // A wallet id of another provider's form (CUSTODY_PROVIDER): rejected like any invalid payload.
    const walletProblem = deps.custody.walletProblem?.({ walletId: parsed.payload.walletId, coin: parsed.payload.coin });
    if (walletProblem !== undefined) return reject(jobId, job.data, [{ path: 'walletId', message: walletProblem }]);

    const payload = parsed.payload;
    const run: Run = { deps, owner: newRunner(), log, job: { jobId, payload } };
    const sequenceId = payload.halfSigned.sequenceId;
    // The one-step start sends at once: with LOOKUP_BEFORE_FIRST_SEND every transfer goes step by step.
    const started = deps.lookupBeforeFirstSend ? null : await startFresh(run, jobId, payload);
    if (started !== null) return drive(run, started, sequenceId);
    const record = await claim(jobId, payload, log);
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
    return drive(run, record, sequenceId);
  };

  /** Invalid payload: `transfer.rejected` once, nothing upstream, no retry. */
  async function reject(jobId: string, data: unknown, issues: Array<{ path: string; message: string }>): Promise<SubmitResult> {
    const described = describeInvalidPayload(data);
    const rejection = { code: FailureCode.INVALID_PAYLOAD, issues };
    if (SEQUENCE_ID.test(described.sequenceId)) {
      // Keyed by sequenceId: if a transfer with it exists already, or ended before (its tombstone), this
      // invalid duplicate publishes nothing.
      const rejected = await ledger.transition(described.sequenceId, op.reject(jobId, described, rejection));
      if (!rejected.ok && rejected.ended) return { outcome: 'ended', sequenceId: described.sequenceId, ended: rejected.ended };
    } else {
      // No usable sequenceId: exactly once per job id instead.
      await ledger.rejectJob(jobId, described, rejection);
    }
    return { outcome: 'rejected', sequenceId: described.sequenceId };
  }

  /**
   * Creates the ledger record unless one exists; the creating job owns the transfer. A sequenceId whose
   * transfer ended before (its terminal record, or its tombstone once RETENTION removed the record;
   * `cancelled` included) gets no record: `{ ended }` instead, and nothing is sent or published.
   */
  async function claim(jobId: string, payload: SubmitPayload, log: JobContext['log']): Promise<TransferRecord | { ended: Tombstone }> {
    const sequenceId = payload.halfSigned.sequenceId;
    // Guarded by "no record yet": of two concurrent jobs exactly one creates it, the other (and any
    // retry of either) finds it there and reads it.
    const created = await ledger.transition(sequenceId, op.create(jobId, payload));
    if (created.ok) return created.record;
    if (created.ended) return { ended: created.ended };
    const record = await mustGet(sequenceId);
    // Another job's record: this job does nothing whatever its payload (the owner's, stored with the
    // record, is what any runner sends). One that differs is a producer's mistake worth a look. Only
    // a log line and a count: no transition, no event, nothing decided by it.
    if (record.jobId !== jobId && record.payloadHash !== undefined && !isHashOf(record.payloadHash, payloadHash(payload))) {
      log.warn({ owner: record.jobId, state: record.state }, 'submission with another payload for a used sequenceId ignored');
      deps.onPayloadConflict?.();
    }
    // Ended, its record still kept, and owned by another job or by none (a sequenceId cancelled before
    // any job of it ran: `cancelled`, jobId empty): ended for this job. The owner's own re-run drives
    // on and finds the terminal state there.
    if (record.jobId !== jobId && TERMINAL_STATES.has(record.state)) return { ended: { state: record.state, version: record.version } };
    return record;
  }

  async function mustGet(sequenceId: string): Promise<TransferRecord> {
    const record = await ledger.get(sequenceId);
    if (!record) throw new Error('ledger record vanished');
    return record;
  }

  /**
   * Runs the state machine from wherever the ledger says the transfer is. Each step returns the record
   * as its own transition left it (SUBMITTED once submitted), or REREAD when it did not change it
   * (someone else did): then the ledger is read again.
   */
  async function drive(run: Run, start: Step, sequenceId: string): Promise<SubmitResult> {
    let step = start;
    for (;;) {
      const record = step === REREAD ? await mustGet(sequenceId) : step;
      if (record === SUBMITTED || record.state === TransferState.SUBMITTED) {
        // Just submitted, or found submitted by a re-run. Repeats safely: the tracker job id is
        // derived from the sequenceId, so a second add is a no-op.
        await deps.trackers.ensure(sequenceId);
        return { outcome: 'submitted', sequenceId };
      }
      if (TERMINAL_STATES.has(record.state)) return { outcome: record.state as 'blocked', sequenceId };
      let next: Step;
      switch (record.state) {
        case TransferState.RECEIVED:
          next = await gate(run, record);
          break;
        case TransferState.GATED:
          next = deps.lookupBeforeFirstSend
            ? await lookThenSend(run, record, TransferState.GATED)
            : await takeAndSend(run, record, TransferState.GATED);
          break;
        case TransferState.SUBMITTING:
          next = await resolve(run, record);
          break;
        default:
          throw new Error(`unknown transfer state ${record.state}`);
      }
      step = next;
    }
  }
}
