import type { GateDecision } from '../../src/ledger/ledger.ts';

/** A gate decision that passed (the provider's setting read, the travel rule not applying). */
export const PASSED_DECISION: GateDecision & { setting: NonNullable<GateDecision['setting']> } = {
  setting: { outgoingTxn: 0, mandatory: false, blockTxn: false },
  settingFetchedAt: '2026-11-23T10:15:02.120Z',
  checkedAt: '2026-11-23T10:15:02.120Z',
  applies: false,
  reference: false,
  outcome: 'passed',
};
