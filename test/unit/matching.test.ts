/**
 * Which listed record is a transfer's (src/custody/matching.ts), as a table: what the worker knows,
 * what the answer lists, and the finding. The first provider's rules: amounts at 8 fractional digits,
 * records without a sequenceId, answers narrowed or not.
 */
import { describe, expect, it } from 'vitest';
import { findInAnswer } from '../../src/custody/matching.ts';
import type { KnownTransfer, ListedTransfer } from '../../src/custody/port.ts';
import { LIST_AMOUNT_PLACES } from '../../src/lib/decimal.ts';
import { RECORD_DATE_SLACK_MS } from '../../src/timing.ts';

const SEQ = 'ours-1';
const ADDRESS = '0xAbCdEf0123';
const AMOUNT = '0.015';
/** Our first send, on the ledger's clock. */
const SENT_AT = Date.parse('2025-03-01T12:00:00.000Z');

function send(id: string, options: { at?: number | null; txid?: string; sequenceId?: string; amount?: string } = {}): ListedTransfer {
  const at = options.at === undefined ? SENT_AT + 1_000 : options.at;
  return {
    id,
    type: 'send',
    txid: options.txid ?? '',
    ...(options.sequenceId === undefined ? {} : { sequenceId: options.sequenceId }),
    ...(at === null ? {} : { date: new Date(at).toISOString() }),
    outputs: [{ address: ADDRESS.toLowerCase(), amount: options.amount ?? '0.01500000' }],
  };
}

const BY_OUTPUTS: KnownTransfer = { sequenceId: SEQ, destinationAddress: ADDRESS, amount: AMOUNT, firstSentAt: SENT_AT };
/** The twin: sent earlier to the same address for the same amount, broadcast, claimed by its own transfer. */
const TWIN = send('7001', { at: SENT_AT - 60_000, txid: 'aa11' });
const OURS = send('7002');

type Row = [
  name: string,
  answer: ListedTransfer[],
  known: KnownTransfer,
  options: { narrowed?: boolean; held?: string[] },
  expected: { kind: string; id?: string; candidates?: number },
];

const TABLE: Row[] = [
  ['a record carrying our sequenceId', [send('7003', { sequenceId: SEQ })], { sequenceId: SEQ }, {}, { kind: 'found', id: '7003' }],
  ['a record carrying another sequenceId only', [send('7003', { sequenceId: 'other' })], BY_OUTPUTS, {}, { kind: 'absent' }],
  ['the record id seen before', [TWIN, OURS], { ...BY_OUTPUTS, transactionId: '7002' }, {}, { kind: 'found', id: '7002' }],
  ['one send to our address for our amount, dated after our first send', [OURS], BY_OUTPUTS, {}, { kind: 'found', id: '7002' }],
  ['two sends dated after our first send', [OURS, send('7004')], BY_OUTPUTS, {}, { kind: 'ambiguous', candidates: 2 }],
  // The twin case: today's rules took the twin's record (and later its txid) for ours.
  ['an earlier twin transfer listed, ours not yet', [TWIN], BY_OUTPUTS, {}, { kind: 'absent' }],
  ['an earlier twin transfer listed, and ours', [TWIN, OURS], BY_OUTPUTS, {}, { kind: 'found', id: '7002' }],
  [
    'a twin dated within the clocks’ slack, the ledger holding it for another transfer',
    [send('7001', { at: SENT_AT - RECORD_DATE_SLACK_MS / 2, txid: 'aa11' })],
    BY_OUTPUTS,
    { held: ['7001'] },
    { kind: 'absent' },
  ],
  [
    'a record the ledger holds for another transfer, and ours',
    [send('7001'), OURS],
    BY_OUTPUTS,
    { held: ['7001'] },
    { kind: 'found', id: '7002' },
  ],
  [
    'a record dated within the clocks’ slack before our first send',
    [send('7002', { at: SENT_AT - 500 })],
    BY_OUTPUTS,
    {},
    { kind: 'found', id: '7002' },
  ],
  [
    'an undated lone candidate, the answer not narrowed',
    [send('7002', { at: null })],
    BY_OUTPUTS,
    {},
    { kind: 'ambiguous', candidates: 1 },
  ],
  [
    'an undated lone candidate, the answer narrowed',
    [send('7002', { at: null })],
    BY_OUTPUTS,
    { narrowed: true },
    { kind: 'found', id: '7002' },
  ],
  [
    'an earlier twin, the record from before first sends were stamped (no date compared)',
    [TWIN],
    { ...BY_OUTPUTS, firstSentAt: undefined },
    {},
    { kind: 'found', id: '7001' },
  ],
  ['knowing nothing, a lone record, narrowed', [send('7002')], { sequenceId: SEQ }, { narrowed: true }, { kind: 'found', id: '7002' }],
  ['knowing nothing, a lone record, not narrowed', [send('7002')], { sequenceId: SEQ }, {}, { kind: 'ambiguous', candidates: 1 }],
  [
    'knowing nothing, an earlier twin alone in an answer believed narrowed',
    [TWIN],
    { sequenceId: SEQ, firstSentAt: SENT_AT },
    { narrowed: true },
    { kind: 'absent' },
  ],
  [
    'knowing nothing, a lone record the ledger holds for another transfer, narrowed',
    [send('7001')],
    { sequenceId: SEQ },
    { narrowed: true, held: ['7001'] },
    { kind: 'ambiguous', candidates: 1 },
  ],
];

describe('which listed record is ours', () => {
  it.each(TABLE)('%s', async (_name, answer, known, options, expected) => {
    const asked: string[][] = [];
    const withHeld: KnownTransfer = {
      ...known,
      heldByOthers: async (records) => {
        asked.push(records.map((record) => record.id));
        return new Set(records.map((record) => record.id).filter((id) => options.held?.includes(id)));
      },
    };
    const finding = await findInAnswer(answer, withHeld, {
      amountPlaces: LIST_AMOUNT_PLACES,
      narrows: async () => options.narrowed === true,
    });
    expect(finding.kind).toBe(expected.kind);
    if (finding.kind === 'found') expect(finding.transfer.id).toBe(expected.id);
    if (finding.kind === 'ambiguous') expect(finding.candidates).toBe(expected.candidates);
    // The ledger is asked only about records that would be picked without proof.
    if (known.transactionId !== undefined || answer.some((tx) => tx.sequenceId === SEQ)) expect(asked).toEqual([]);
  });
});
