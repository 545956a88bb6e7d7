import type { SubmitPayload } from '../../../../packages/producer/src/payload.ts';
import { TransferState, type SendView, type TransferRecord } from '../../../ledger/ledger.ts';
import { op, type LookupFinding } from '../../../ledger/operations.ts';
import { RateLimited, RetryLater } from '../../../queues/outcomes.ts';
import { backoffDelay, sendWriteWindowMs } from '../../../timing.ts';
import { classifySendFailure } from '../../../transfers/classify-send.ts';
import { Deadline } from '../../../custody/deadline.ts';
import { EXACT_AMOUNT, type AcceptedSend } from '../../../custody/port.ts';
import { REREAD, refused, storedPayload, type Run, type Step } from './context.ts';
import { assertNever } from '../../../lib/assert-never.ts';
import { fail, inUse, lookupAttempt, markSubmitted, release, releaseAndRetry, sendAttempt, stillUnknown } from './settle.ts';
import { lookFirst } from './recover.ts';

/**
 * The moment before a lease command is issued, on this process's monotonic clock: the send it
 * allows is written, if at all, within sendWriteWindowMs of it (timing.ts).
 */
export type LeaseStart = number;

/** The runner's monotonic clock, ms (deps.monotonic, else performance.now). */
function monotonic(run: Run): number {
  return run.deps.monotonic ? run.deps.monotonic() : performance.now();
}

/** Reads the monotonic clock before a lease command is issued. */
export function leaseStart(run: Run): LeaseStart {
  return monotonic(run);
}

/** The send's write window had shut when its first byte was about to be written: nothing was. */
export class SendWindowShut extends Error {
  readonly lateByMs: number;
  constructor(lateByMs: number) {
    super(`the send lease may have ended ${Math.round(lateByMs)} ms ago: nothing written`);
    this.name = 'SendWindowShut';
    this.lateByMs = lateByMs;
  }
}

/**
 * Takes (or renews) the send lease and marks a send pending, then sends. From `gated` this is the first
 * send; from `submitting` a resend, made only by a runner that already holds the lease. A crash after
 * this transition leaves `pending`, which the next runner reads as "may have gone out". `lookedUpAt`:
 * the ledger's time before the transfer was looked up upstream, when it just was: what a ledger in
 * recovery (epoch.ts) requires of a send; without it, or with a lookup too early, the ledger's
 * refusal leads to a lookup first (lookFirst).
 */
export async function takeAndSend(
  run: Run,
  record: TransferRecord,
  from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
  lookedUpAt?: number,
  finding: LookupFinding = 'absent',
): Promise<Step> {
  const session = run.deps.ledger.session();
  const started = leaseStart(run);
  // A send after a lookup records what the lookup found, with the send in flight.
  const lookup = lookedUpAt === undefined ? undefined : lookupAttempt(finding);
  const taken = await run.deps.ledger.transition(record.sequenceId, op.takeSend(from, run.owner, run.deps.sendLeaseMs, lookedUpAt, lookup));
  if (!taken.ok) {
    if (taken.reason === 'recovery') {
      const looked = await lookFirst(run, record, from);
      return 'settled' in looked ? looked.settled : takeAndSend(run, looked.absent, TransferState.SUBMITTING, looked.absent.updatedAt);
    }
    if (taken.reason === 'epoch') return epochRefused(run);
    return refused(taken);
  }
  return sendTaken(run, taken.record, storedPayload(taken.record), session, started);
}

/**
 * LOOKUP_BEFORE_FIRST_SEND: the transfer is looked up before its first send (lookFirst, without the
 * marks of a loss), and sent only when the lookup finds nothing, the ledger told that it came first.
 */
export async function lookThenSend(
  run: Run,
  record: TransferRecord,
  from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
): Promise<Step> {
  const looked = await lookFirst(run, record, from, false);
  return 'settled' in looked ? looked.settled : takeAndSend(run, looked.absent, TransferState.SUBMITTING, looked.absent.updatedAt);
}

/**
 * The ledger refused a send in flight under this process's epoch and has dealt with it (Ledger: the
 * epoch adopted, or the loss recorded). With an epoch now known the step is tried again under it
 * (the record is read anew); with none (LEDGER_INIT=manual, not initialised) it waits.
 */
function epochRefused(run: Run): Step {
  if (run.deps.ledger.epoch.known !== '') return REREAD;
  run.log.warn('the ledger has no epoch: nothing is sent until an operator runs `ledger init` (LEDGER_INIT=manual)');
  throw new RetryLater(run.deps.retry.maxMs, 'ledger not initialised');
}

/**
 * One sendTransaction by the lease holder, under one deadline that covers the whole call (rate-limit
 * wait, token requests, a 401 and its retry), counted from `started` (before the lease command was
 * issued), so it ends SEND_LEASE_MARGIN_MS before the lease does, however late the lease's reply came.
 * The request is written only inside the write window (timing.ts: sendWriteWindowMs), checked
 * immediately before its first byte goes to the socket. `sends` was counted as one when the lease was
 * taken; the outcome transition adds the difference. `session` names the ledger's connection before
 * that transition (ledger.session()).
 */
export async function sendTaken(run: Run, record: SendView, payload: SubmitPayload, session: string, started: LeaseStart): Promise<Step> {
  const { deps } = run;
  const writeBy = started + sendWriteWindowMs(deps.sendDeadlineMs, deps.sendLeaseMs);
  const lateBy = () => monotonic(run) - writeBy;
  if (deps.replicasAcknowledged && !(await deps.replicasAcknowledged(session))) {
    // A failover now could promote a replica that never saw "send in flight" and let another runner
    // send again: send nothing, undo the send's count, give the lease back, and come back later.
    run.log.warn('redis replicas did not acknowledge the send in flight: nothing sent, retrying later');
    return releaseAndRetry(run, record, { lastError: 'REPLICAS_NOT_ACKNOWLEDGED', extraSends: -1 }, 'replicas did not acknowledge');
  }
  // The send is the one act outside Redis: Redis judges every ledger write by the lease, but cannot
  // refuse a request this process writes after its lease ended. So the send checks, here (a lease
  // reply that came late, a WAIT that outlived it) and again as its first byte is written.
  if (lateBy() >= 0) return windowShut(run, record, lateBy());
  const beforeWrite = () => {
    const late = lateBy();
    if (late >= 0) throw new SendWindowShut(late);
  };
  run.log.debug({ session, sends: record.sends }, 'send lease held, replicas acknowledged: sending');
  let requests = 0;
  let accepted: AcceptedSend;
  const deadline = new Deadline(Math.max(0, started + deps.sendDeadlineMs - monotonic(run)));
  try {
    accepted = await deps.custody.sendTransaction(
      { walletId: payload.walletId, coin: payload.coin },
      { txHex: payload.txHex, halfSigned: payload.halfSigned },
      { signal: deadline.signal, onRequest: () => requests++, beforeWrite, keepRaw: false },
    );
  } catch (error) {
    run.log.debug({ err: error, requests }, 'send answered with an error');
    if (error instanceof SendWindowShut) return windowShut(run, record, error.lateByMs);
    return sendFailed(run, record, error, requests - 1);
  } finally {
    deadline.clear();
  }
  // A crash between the answer and this line leaves `pending`: the next runner finds the transfer by
  // lookup or gets 409 on its resend, both of which lead here without a second accepted send.
  // `raw` echoes our own request (and a person): it stays here (docs/contract.md section 4). Asked
  // for without it (keepRaw: false); dropped here too, whatever a custody client returns.
  const { raw: _raw, ...transfer } = accepted;
  const match = { sequenceId: record.sequenceId, destinationAddress: accepted.destinationAddress, amount: accepted[EXACT_AMOUNT] };
  return markSubmitted(
    run,
    record,
    { transfer },
    match,
    requests - 1,
    { level: 'info', msg: 'transfer submitted', fields: { recordId: accepted.id } },
    { kind: 'send', outcome: 'accepted', proof: 'accepted' },
  );
}

/**
 * The lease may have ended before the send was written (its reply came late, or this process was
 * frozen): nothing was written, and the lease is not released, since it may be someone else's by now.
 * If nobody took it over, the ledger is told that the send in flight never left (unsent: only its
 * owner may); if somebody did, it read our `pending` as "may have gone out" and looks before any
 * send. Either way the record is read again and its holder, whoever that is, decides.
 */
async function windowShut(run: Run, record: SendView, lateByMs: number): Promise<Step> {
  run.deps.onSendWindowShut?.();
  run.log.warn({ lateByMs: Math.round(lateByMs) }, 'send lease may have ended before the send was written: nothing sent');
  await run.deps.ledger.transition(record.sequenceId, op.unsent(run.owner));
  return REREAD;
}

/** What a failed send means is decided by classifySendFailure (transfers/send-proof.ts); this carries it out. */
async function sendFailed(run: Run, record: SendView, error: unknown, extraSends: number): Promise<Step> {
  const failure = classifySendFailure(error, record);
  switch (failure.kind) {
    case 'in-use':
      return inUse(run, record, failure, extraSends);
    case 'accepted-earlier': {
      return markSubmitted(
        run,
        record,
        { transfer: null, recoveredBy: 'duplicate' },
        { sequenceId: record.sequenceId },
        extraSends,
        { level: 'warn', msg: 'send answered 409: accepted earlier, treated as submitted' },
        sendAttempt(failure),
      );
    }
    case 'rate-limited': {
      // Not taken: release the lease (the transfer stays in `submitting`) and the queue waits Retry-After.
      const released = await release(run, record, { lastError: failure.code, extraSends, attempt: sendAttempt(failure) });
      if (!released.ok) return refused(released);
      throw new RateLimited(failure.retryAfterMs ?? 1_000);
    }
    case 'refused':
      return fail(run, record, failure, extraSends);
    case 'retry': {
      // Attempts are HTTP sends; failures count calls that never got as far as a send (token trouble).
      if (record.sends + extraSends >= run.deps.attempts || record.failures + 1 >= run.deps.attempts)
        return fail(run, record, failure, extraSends);
      const released = await release(run, record, { lastError: failure.code, extraSends, failures: 1, attempt: sendAttempt(failure) });
      if (!released.ok) return refused(released);
      const delayMs = backoffDelay(run.deps.retry, released.record.failures);
      run.log.warn({ err: error, code: failure.code, sends: released.record.sends, delayMs }, 'send not taken, retrying later');
      throw new RetryLater(delayMs, failure.code);
    }
    case 'unknown':
      run.log.warn({ err: error, code: failure.code }, 'send outcome unknown: it may have gone out');
      return stillUnknown(run, record, failure.code, undefined, extraSends, sendAttempt(failure));
    default:
      return assertNever(failure.kind, 'send failure kind');
  }
}
