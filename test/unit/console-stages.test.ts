import { describe, expect, it } from 'vitest';
import { stages } from '../../src/console/pages.ts';
import { toRecord } from '../../src/ledger/record.ts';
import { TERMINAL_STATES, TransferState } from '../../src/ledger/states.ts';

/**
 * The console's stage view (src/console/pages.ts `stages`): the current stage is the record's state,
 * whatever else the record holds (a send whose outcome is unknown, an approval the provider waits for).
 */
const T = 1_795_000_000_000;

/** The fields a transfer in `state` has, as far as it got on the way to the chain. */
function recordIn(state: TransferState, extra: Record<string, string> = {}) {
  const fields: Record<string, string> = { state, createdAt: String(T), updatedAt: String(T + 9) };
  const gated = state !== TransferState.RECEIVED && state !== TransferState.CANCELLED && state !== TransferState.BLOCKED;
  if (gated || state === TransferState.BLOCKED)
    Object.assign(fields, { gateOutcome: 'passed', gateCheckedAt: new Date(T + 1).toISOString() });
  const sent = [TransferState.SUBMITTING, TransferState.SUBMITTED, TransferState.BROADCAST, TransferState.HALTED, TransferState.EXPIRED];
  if (sent.includes(state as (typeof sent)[number])) Object.assign(fields, { sends: '1', firstSentAt: String(T + 2) });
  if (state === TransferState.SUBMITTED || state === TransferState.BROADCAST || state === TransferState.HALTED)
    fields.submittedAt = String(T + 3);
  if (state === TransferState.BROADCAST) Object.assign(fields, { broadcastAt: String(T + 4), txid: 'ab12' });
  return toRecord('seq-1', { ...fields, ...extra });
}

const ORDER = ['received', 'gated', 'submitting', 'submitted', 'broadcast'];

describe('stages', () => {
  for (const state of Object.values(TransferState)) {
    it(`marks the stage of the state as current, exactly: ${state}`, () => {
      const list = stages(recordIn(state));
      const current = list.filter((stage) => stage.status === 'current').map((stage) => stage.name);
      if (TERMINAL_STATES.has(state)) {
        expect(current).toEqual([]);
        if (state === TransferState.BROADCAST) expect(list.every((stage) => stage.status === 'done')).toBe(true);
        else expect(list.at(-1)).toMatchObject({ name: state, status: 'branch' });
        return;
      }
      expect(current).toEqual([state]);
      // Every stage before it is done, every one after it pending.
      const main = list.filter((stage) => ORDER.includes(stage.name));
      const at = ORDER.indexOf(state);
      expect(main.map((stage) => stage.status)).toEqual(ORDER.map((_, i) => (i < at ? 'done' : i === at ? 'current' : 'pending')));
    });
  }

  it('keeps submitting current after the unresolved branch and while the outcome is unknown', () => {
    const extras: Array<Record<string, string>> = [
      { unknownSince: String(T + 5), unresolvedAt: String(T + 6) },
      { unknownSince: String(T + 5) },
      { inUseSince: String(T + 5), unresolvedAt: String(T + 6) },
    ];
    for (const extra of extras) {
      const list = stages(recordIn(TransferState.SUBMITTING, extra));
      expect(list.filter((stage) => stage.status === 'current').map((stage) => stage.name)).toEqual(['submitting']);
      expect(list.find((stage) => stage.name === 'submitted')?.status).toBe('pending');
      expect(list.some((stage) => stage.status === 'branch')).toBe(true);
    }
  });

  it('shows a pending approval as a branch of submitted, which stays current', () => {
    const list = stages(recordIn(TransferState.SUBMITTED, { approvalSince: String(T + 7) }));
    expect(list.filter((stage) => stage.status === 'current').map((stage) => stage.name)).toEqual(['submitted']);
    expect(list.find((stage) => stage.name === 'pending approval')).toMatchObject({ status: 'branch', at: new Date(T + 7).toISOString() });
  });

  it('shows how far a transfer got before an end other than broadcast', () => {
    const failed = stages(recordIn(TransferState.FAILED, { sends: '1', firstSentAt: String(T + 2), lastError: 'CUSTODY_REJECTED' }));
    expect(failed.map((stage) => `${stage.name}:${stage.status}`)).toEqual([
      'received:done',
      'gated:done',
      'submitting:done',
      'submitted:pending',
      'broadcast:pending',
      'failed:branch',
    ]);
  });
});
