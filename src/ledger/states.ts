import { TERMINAL_STATES as CATALOG_TERMINAL_STATES, type TransferStateName } from '../../packages/producer/src/catalog.ts';

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
  /** Cancelled before any send may have been processed (op.cancel; docs/contract.md section 4). */
  CANCELLED: 'cancelled',
  /** The provider ended it for good before it reached the chain (op.halt; docs/contract.md section 4). */
  HALTED: 'halted',
} as const;
export type TransferState = (typeof TransferState)[keyof typeof TransferState];
// The names above are the catalog's, each once (a state added there and not here fails to compile).
const _sameStates: [TransferState, TransferStateName] extends [TransferStateName, TransferState] ? true : never = true;
void _sameStates;

/** From the contract's catalog (packages/producer/src/catalog.ts), as transition.lua gets it too. */
export const TERMINAL_STATES: ReadonlySet<TransferState> = new Set(CATALOG_TERMINAL_STATES);

export const NON_TERMINAL_STATES: readonly TransferState[] = Object.values(TransferState).filter((state) => !TERMINAL_STATES.has(state));

/** `-` in an expected-state list: the transfer has no record yet. */
export const NO_RECORD = '-';
