/**
 * A tracker's handling of other transfers listed in its answers (an answer that is not narrowed):
 * a tracked one listed with its txid is noted and woken once; the records of listed transfers with
 * nothing left to do (not ours, already noted or ended) are read once per process, not on every poll
 * that lists them again, and one listed first without a txid is still woken when its txid shows. Two
 * concurrent polls listing the same transfer wake it once.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { ListedTransfer, TransferFinding } from '../../src/custody/port.ts';
import { createTrackHandler } from '../../src/jobs/track-transfer/handler.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { newSequenceId } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

const redis = newRedis();
afterAll(async () => {
  await closeAllRedis();
});

const listed = (id: string, sequenceId: string, txid: string): ListedTransfer => ({ id, type: 'send', txid, sequenceId, outputs: [] });

describe('other transfers listed in a tracking answer', () => {
  it('wakes a tracked one once, and reads the records of listed transfers once, not on every poll', async () => {
    const prefix = uniquePrefix('found-for-other');
    const ledger = new Ledger(redis, createKeys(prefix, `${prefix}:events`), { eventsMaxLen: 1_000, retentionMs: 3_600_000 });
    const submitted = async (sequenceId: string) =>
      ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.SUBMITTED, set: { walletId: '310', coin: 'eth' } });
    const [polled, tracked, later, foreign] = [newSequenceId(), newSequenceId(), newSequenceId(), newSequenceId()];
    await submitted(polled);
    await submitted(tracked);
    await submitted(later);

    // Each poll of `polled` lists `tracked` with its txid, `foreign` (not ours) with one, and `later`
    // without one until the fourth poll.
    let polls = 0;
    const reads = new Map<string, number>();
    const read = ledger.read.bind(ledger);
    ledger.read = async (sequenceId, view) => {
      reads.set(sequenceId, (reads.get(sequenceId) ?? 0) + 1);
      return read(sequenceId, view);
    };
    const woken: string[] = [];
    const handler = createTrackHandler({
      ledger,
      custody: {
        findTransfer: async (): Promise<TransferFinding> => {
          polls++;
          const others = new Map([
            [tracked, listed('1', tracked, '0xaa')],
            [foreign, listed('2', foreign, '0xbb')],
            [later, listed('3', later, polls >= 4 ? '0xcc' : '')],
          ]);
          return { kind: 'absent', others, compared: [], sendsListed: 0 };
        },
        getWalletTransaction: async () => {
          throw new Error('not used');
        },
      },
      pollMinMs: 1_000,
      pollMaxMs: 1_000,
      pacedByBudget: false,
      deadlineMs: 3_600_000,
      wake: async (sequenceId) => {
        woken.push(sequenceId);
      },
    });
    const run = () =>
      handler({
        job: { id: 'track', name: 'track-transfer', data: { sequenceId: polled } },
        token: undefined,
        log: createLogger({ level: 'silent' }),
      } as unknown as JobContext).catch((error: unknown) => error);

    for (let i = 0; i < 6; i++) await run();

    expect(polls).toBe(6);
    expect(woken).toEqual([tracked, later]);
    expect((await ledger.read(tracked, { fields: ['txid'], build: (_, [txid]) => txid })) ?? null).toBe('0xaa');
    reads.clear();
    await run();
    // The polled transfer's own record is read on every run; the listed ones no more.
    expect([...reads.keys()]).toEqual([polled]);
  });

  it('wakes a transfer listed by two concurrent polls once', async () => {
    const prefix = uniquePrefix('found-for-other-twice');
    const ledger = new Ledger(redis, createKeys(prefix, `${prefix}:events`), { eventsMaxLen: 1_000, retentionMs: 3_600_000 });
    const [first, second, tracked] = [newSequenceId(), newSequenceId(), newSequenceId()];
    for (const sequenceId of [first, second, tracked]) {
      await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.SUBMITTED, set: { walletId: '310', coin: 'eth' } });
    }
    const woken: string[] = [];
    const handler = createTrackHandler({
      ledger,
      custody: {
        findTransfer: async (): Promise<TransferFinding> => ({
          kind: 'absent',
          others: new Map([[tracked, listed('1', tracked, '0xaa')]]),
          compared: [],
          sendsListed: 0,
        }),
        getWalletTransaction: async () => {
          throw new Error('not used');
        },
      },
      pollMinMs: 1_000,
      pollMaxMs: 1_000,
      pacedByBudget: false,
      deadlineMs: 3_600_000,
      wake: async (sequenceId) => {
        woken.push(sequenceId);
      },
    });
    const run = (sequenceId: string) =>
      handler({
        job: { id: 'track', name: 'track-transfer', data: { sequenceId } },
        token: undefined,
        log: createLogger({ level: 'silent' }),
      } as unknown as JobContext).catch((error: unknown) => error);
    await Promise.all([run(first), run(second)]);
    expect(woken).toEqual([tracked]);
  });
});
