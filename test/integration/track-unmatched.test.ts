import { afterAll, describe, expect, it } from 'vitest';
import { findInAnswer } from '../../src/custody/matching.ts';
import { LIST_AMOUNT_PLACES } from '../../src/lib/decimal.ts';
import { createTrackHandler } from '../../src/jobs/track-transfer/handler.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { RetryLater } from '../../src/queues/outcomes.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { UNMATCHED_POLLS_ALERT } from '../../src/timing.ts';
import type { Transaction } from '../../src/custody/wallet-service/schemas.ts';
import { newSequenceId } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

const redis = newRedis();
afterAll(async () => {
  await closeAllRedis();
});

/**
 * A transfer whose get-transfer answers list sends of its wallet that never match it (an amount or an
 * address upstream writes differently) must not poll silently until TRACK_DEADLINE: it is counted
 * (custody_track_unmatched_total) and logged once, at UNMATCHED_POLLS_ALERT polls in a row.
 */
describe('a tracked transfer that never matches', () => {
  it('is counted and logged once, with the field paths compared and no values of other transfers', async () => {
    const prefix = uniquePrefix('unmatched');
    const ledger = new Ledger(redis, createKeys(prefix, `${prefix}:events`), { eventsMaxLen: 1_000, retentionMs: 3_600_000 });
    const sequenceId = newSequenceId();
    await ledger.transition(sequenceId, {
      from: [NO_RECORD],
      to: TransferState.SUBMITTED,
      set: { walletId: '310', coin: 'eth', matchAddress: '0xaaaa', matchAmount: '1.5' },
      stamp: ['submittedAt'],
    });
    const other = {
      id: '7001',
      type: 'send',
      txid: '',
      wallet: 310,
      outputs: [{ address: '0xbbbb', amount: '2.00000000' }],
    } as unknown as Transaction;
    const receive = {
      ...other,
      id: '7002',
      type: 'receive',
      outputs: [{ address: '0xaaaa', amount: '1.50000000' }],
    } as unknown as Transaction;
    let unmatched = 0;
    const handler = createTrackHandler({
      ledger,
      custody: {
        // The first provider's matching rules (its adapter's findTransfer) over this answer.
        findTransfer: async (wallet, known) =>
          findInAnswer([other, receive], known, { amountPlaces: LIST_AMOUNT_PLACES, walletId: wallet.walletId }),
        getWalletTransaction: async () => {
          throw new Error('not used');
        },
      },
      pollMinMs: 10,
      pacedByBudget: false,
      pollMaxMs: 20,
      deadlineMs: 3_600_000,
      onUnmatched: () => unmatched++,
    });
    const warnings: Array<{ fields: Record<string, unknown>; msg: string }> = [];
    const log = {
      warn: (fields: Record<string, unknown>, msg: string) => warnings.push({ fields, msg }),
      info: () => undefined,
      error: () => undefined,
      debug: () => undefined,
    } as unknown as JobContext['log'];
    const counts: number[] = [];
    for (let poll = 1; poll <= UNMATCHED_POLLS_ALERT + 5; poll++) {
      await expect(
        handler({ job: { id: 't', data: { sequenceId }, attemptsStarted: poll }, log } as unknown as JobContext),
      ).rejects.toBeInstanceOf(RetryLater);
      counts.push(unmatched);
    }
    expect(counts.indexOf(1)).toBe(UNMATCHED_POLLS_ALERT - 1);
    expect(unmatched).toBe(1);
    const logged = warnings.filter((w) => w.msg === 'transfer not matched in get-transfer answers that list sends of its wallet');
    expect(logged).toHaveLength(1);
    expect(logged[0]!.fields).toMatchObject({ unmatchedPolls: UNMATCHED_POLLS_ALERT, sends: 1, matchAmount: '1.5' });
    expect(logged[0]!.fields.compared).toContain('outputs[].amount (at 8 fractional digits)');
    expect(JSON.stringify(logged[0]!.fields)).not.toContain('0xbbbb');
    // Counting stops at the alert: later polls write nothing, so the transfer can still show as stale.
    const record = (await ledger.get(sequenceId))!;
    expect(record.unmatchedPolls).toBe(UNMATCHED_POLLS_ALERT);
    await expect(
      handler({ job: { id: 't', data: { sequenceId }, attemptsStarted: 99 }, log } as unknown as JobContext),
    ).rejects.toBeInstanceOf(RetryLater);
    expect((await ledger.get(sequenceId))!.updatedAt).toBe(record.updatedAt);
  });
});
