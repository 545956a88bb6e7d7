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
  h = await startHarness({
    name: 'exact-amount',
    sim: { settings: { fixedAmount: AMOUNT, narrowResults: false, includeSequenceIdInTransactions: false } },
  });
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

/**
 * A provider that serialises the 2.4 amount as a binary double (64.079000000000008 for 64.079) while
 * its lists write 8 fractional digits: before the lists' precision was used for the comparison, such
 * a transfer was never matched (about 1 % of amounts) and polled until TRACK_DEADLINE.
 */
describe('a send answer whose amount is a binary double', () => {
  let hd: Harness;
  beforeAll(async () => {
    hd = await startHarness({
      name: 'double-amount',
      sim: { settings: { amountAsDouble: true, narrowResults: false, includeSequenceIdInTransactions: false } },
    });
  });
  afterAll(async () => {
    await hd.close();
  });

  it.each(['64.079', '2.228', '0.1', '1234567.12345678'])(
    '%s written with 17 significant digits is matched at 8 places and broadcast',
    async (amount) => {
      hd.sim.updateSettings({ fixedAmount: amount });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await hd.producer.submit(payload);
      const submitted = await hd.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.submitted']));
      const stored = (await hd.app!.ledger.get(sequenceId))!.match.amount!;
      // Kept (and published) exactly as upstream wrote it, the float noise included.
      expect(stored).toBe(String(Number(amount).toPrecision(17)).replace(/0+$/, '').replace(/\.$/, ''));
      expect(dataOf(submitted, 'transfer.submitted').transfer).not.toBeNull();
      hd.sim.setTxid(sequenceId);
      const terminal = await hd.producer.waitForTerminal(sequenceId, 15_000);
      expect(terminal.event).toBe('transfer.broadcast');
    },
  );
});
