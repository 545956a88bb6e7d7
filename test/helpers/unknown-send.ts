import { TransferState, type Ledger } from '../../src/ledger/ledger.ts';
import type { SamplePayload } from '../../tools/sample-payloads.ts';

/**
 * Records, as the worker would have, a transfer whose runner sent once and died before the answer
 * came: gated, then `submitting` with one send in flight under a lease (owner `dead`) that has already
 * run out. The next runner finds a send of unknown outcome.
 */
export async function recordUnknownSend(ledger: Ledger, payload: SamplePayload): Promise<void> {
  const sequenceId = payload.halfSigned.sequenceId;
  await ledger.transition(sequenceId, {
    from: ['-'],
    to: TransferState.GATED,
    set: { jobId: 'job-1', walletId: '310', coin: 'eth', payload: JSON.stringify(payload) },
  });
  await ledger.transition(sequenceId, {
    from: [TransferState.GATED],
    to: TransferState.SUBMITTING,
    lease: { mode: 'take', owner: 'dead', ms: 1 },
    set: { pending: 1 },
    increment: { sends: 1 },
  });
}
