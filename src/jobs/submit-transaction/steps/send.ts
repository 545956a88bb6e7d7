import type { SubmitPayload } from '../../../../packages/producer/src/payload.ts';
import type { SendView, TransferRecord, TransferState } from '../../../ledger/ledger.ts';
import { op } from '../../../ledger/operations.ts';
import { RateLimited, RetryLater } from '../../../queues/outcomes.ts';
import { backoffDelay } from '../../../timing.ts';
import { classifySendFailure } from '../../../transfers/classify-send.ts';
import { Deadline } from '../../../custody/deadline.ts';
import { EXACT_AMOUNT, type AcceptedSend } from '../../../custody/port.ts';
import { refused, storedPayload, type Run, type Step } from './context.ts';
import { fail, inUse, markSubmitted, release, releaseAndRetry, stillUnknown } from './settle.ts';

/**
 * Takes (or renews) the send lease and marks a send pending, then sends. From `gated` this is the first
 * send; from `submitting` a resend, made only by a runner that already holds the lease. A crash after
 * this transition leaves `pending`, which the next runner reads as "may have gone out".
 */
export async function takeAndSend(
  run: Run,
  record: TransferRecord,
  from: typeof TransferState.GATED | typeof TransferState.SUBMITTING,
): Promise<Step> {
  const session = run.deps.ledger.session();
  const taken = await run.deps.ledger.transition(record.sequenceId, op.takeSend(from, run.owner, run.deps.sendLeaseMs));
  if (!taken.ok) return refused(taken);
  return sendTaken(run, taken.record, storedPayload(taken.record), session);
}

/**
 * One sendTransaction by the lease holder, under one deadline that covers the whole call (rate-limit
 * wait, token requests, a 401 and its retry) and ends SEND_LEASE_MARGIN_MS before the lease does.
 * `sends` was counted as one when the lease was taken; the outcome transition adds the difference.
 * `session` names the ledger's connection before that transition (ledger.session()).
 */
export async function sendTaken(run: Run, record: SendView, payload: SubmitPayload, session: string): Promise<Step> {
  const { deps } = run;
  if (deps.replicasAcknowledged && !(await deps.replicasAcknowledged(session))) {
    // A failover now could promote a replica that never saw "send in flight" and let another runner
    // send again: send nothing, undo the send's count, give the lease back, and come back later.
    run.log.warn('redis replicas did not acknowledge the send in flight: nothing sent, retrying later');
    return releaseAndRetry(run, record, { lastError: 'REPLICAS_NOT_ACKNOWLEDGED', extraSends: -1 }, 'replicas did not acknowledge');
  }
  let requests = 0;
  let accepted: AcceptedSend;
  const deadline = new Deadline(deps.sendDeadlineMs);
  try {
    accepted = await deps.custody.sendTransaction(
      payload.walletId,
      { txHex: payload.txHex, halfSigned: payload.halfSigned },
      { signal: deadline.signal, onRequest: () => requests++, keepRaw: false },
    );
  } catch (error) {
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
  const submitted = await markSubmitted(run, record, { transfer }, match, requests - 1);
  if (submitted) run.log.info({ recordId: accepted.id }, 'transfer submitted');
  return submitted;
}

/** What a failed send means is decided by classifySendFailure (transfers/send-proof.ts); this carries it out. */
async function sendFailed(run: Run, record: SendView, error: unknown, extraSends: number): Promise<Step> {
  const failure = classifySendFailure(error, record);
  switch (failure.kind) {
    case 'in-use':
      return inUse(run, record, failure, extraSends);
    case 'accepted-earlier': {
      const submitted = await markSubmitted(
        run,
        record,
        { transfer: null, recoveredBy: 'duplicate' },
        { sequenceId: record.sequenceId },
        extraSends,
      );
      if (submitted) run.log.warn('send answered 409: accepted earlier, treated as submitted');
      return submitted;
    }
    case 'rate-limited': {
      // Not taken: release the lease (the transfer stays in `submitting`) and the queue waits Retry-After.
      const released = await release(run, record, { lastError: failure.code, extraSends });
      if (!released.ok) return refused(released);
      throw new RateLimited(failure.retryAfterMs ?? 1_000);
    }
    case 'refused':
      return fail(run, record, failure, extraSends);
    case 'retry': {
      // Attempts are HTTP sends; failures count calls that never got as far as a send (token trouble).
      if (record.sends + extraSends >= run.deps.attempts || record.failures + 1 >= run.deps.attempts)
        return fail(run, record, failure, extraSends);
      const released = await release(run, record, { lastError: failure.code, extraSends, failures: 1 });
      if (!released.ok) return refused(released);
      const delayMs = backoffDelay(run.deps.retry, released.record.failures);
      run.log.warn({ err: error, code: failure.code, sends: released.record.sends, delayMs }, 'send not taken, retrying later');
      throw new RetryLater(delayMs, failure.code);
    }
    case 'unknown':
      run.log.warn({ err: error, code: failure.code }, 'send outcome unknown: it may have gone out');
      return stillUnknown(run, record, failure.code, undefined, extraSends);
  }
}
