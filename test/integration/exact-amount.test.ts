import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decimalEquals } from '../../src/lib/decimal.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';

/**
 * An amount of 20 significant digits (large token amounts) from the 2.4 answer, where it is a JSON
 * number, to the match against the 2.1 outputs, where it is decimal text: exact all the way, or the
 * address+amount match would never succeed and the transfer would expire although it was broadcast.
 */
const AMOUNT = '12345678901234.567891';

let h: Harness;
beforeAll(async () => {
  // Not narrowed and without sequenceId in 2.1 records: the worker must match by address and amount.
  h = await startHarness({ name: 'exact-amount', sim: { settings: { fixedAmount: AMOUNT, narrowResults: false, includeSequenceIdInTransactions: false } } });
});
afterAll(async () => {
  await h.close();
});

describe('an amount with 20 significant digits', () => {
  it('is matched exactly, and the transfer is broadcast', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.submitted']));
    expect((await h.app!.ledger.get(sequenceId))!.match.amount).toBe(AMOUNT);
    h.sim.setTxid(sequenceId);
    const terminal = await h.producer.waitForTerminal(sequenceId, 15_000);
    expect(terminal.event).toBe('transfer.broadcast');
    const outputs = dataOf(terminal, 'transfer.broadcast').transaction.outputs;
    expect(outputs.some((output) => decimalEquals(output.amount, AMOUNT))).toBe(true);
  });
});
