/**
 * A transfer left stuck in `submitting` (or `gated`) the way the worker would leave it, written through
 * the ledger's own transitions: for the tests of what an operator does about it (resolve, the audit).
 */
import type { SubmitPayload } from '../../packages/producer/src/payload.ts';
import { TransferState, type Ledger } from '../../src/ledger/ledger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { sleep } from './wait.ts';

export interface Strand {
  /** Where the transfer is left (default submitting). */
  state?: 'gated' | 'submitting';
  /** A runner took over the dead one's pending send (outcome unknown) and published transfer.unresolved. */
  unresolved?: boolean;
  /** A runner holds a live send lease for this long. */
  liveLeaseMs?: number;
  /** The transfer's payload (default: a new sample payload). */
  payload?: SubmitPayload;
}

/**
 * Leaves a transfer as the worker would: created, gated, then sent by a runner that died with its send
 * pending (lease of 1 ms, long run out). Optionally a later runner took the lease over (which records
 * the unknown outcome), found nothing and published `transfer.unresolved`; or holds the lease now.
 */
export async function strandTransfer(ledger: Ledger, options: Strand = {}): Promise<string> {
  const payload = options.payload ?? samplePayload();
  const sequenceId = payload.halfSigned.sequenceId;
  const step = async (request: Parameters<Ledger['transition']>[1]) => {
    const result = await ledger.transition(sequenceId, request);
    if (!result.ok) throw new Error(`strand: ${request.from.join(',')} -> ${request.to} refused (${result.reason})`);
  };
  await step({
    from: ['-'],
    to: TransferState.RECEIVED,
    set: { jobId: 'job-that-died', walletId: '310', coin: 'eth', metadata: '', createdAt: Date.now(), payload: JSON.stringify(payload) },
  });
  await step({ from: [TransferState.RECEIVED], to: TransferState.GATED, set: { gate: '{}' } });
  if (options.state === 'gated') return sequenceId;
  await step({
    from: [TransferState.GATED],
    to: TransferState.SUBMITTING,
    lease: { mode: 'take', owner: 'runner-that-died', ms: 1 },
    set: { pending: 1 },
    increment: { sends: 1 },
  });
  await sleep(5);
  if (options.unresolved) {
    await step({ from: [TransferState.SUBMITTING], to: TransferState.SUBMITTING, lease: { mode: 'take', owner: 'runner-2', ms: 60_000 } });
    await step({
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'own', owner: 'runner-2' },
      set: { lastError: 'CUSTODY_TIMEOUT' },
      unset: ['leaseOwner', 'leaseUntil', 'pending'],
      increment: { failures: 1 },
      requireAbsent: ['unresolvedAt'],
      stamp: ['unresolvedAt'],
      event: { type: 'transfer.unresolved', data: { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1, lastError: 'CUSTODY_TIMEOUT' } },
    });
  }
  if (options.liveLeaseMs !== undefined) {
    await step({
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTING,
      lease: { mode: 'take', owner: 'runner-alive', ms: options.liveLeaseMs },
    });
  }
  return sequenceId;
}
