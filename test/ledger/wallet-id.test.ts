import { afterAll, describe, expect, it } from 'vitest';
import { parseStreamEntry } from '../../packages/producer/src/events.ts';
import { parseSubmitPayload } from '../../packages/producer/src/payload.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, type GateDecision } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { storedPayload } from '../../src/jobs/submit-transaction/steps/context.ts';
import { newSequenceId, samplePayload } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * BitGo's wallet id (32 lowercase hex, docs/contract.md section 3) is text, not a number: it must come
 * through the ledger record, the stored payload and the events exactly as enqueued, as a digit
 * wallet id does as its decimal text.
 */
const redis = newRedis();
afterAll(async () => {
  await closeAllRedis();
});

const BLOCKED: GateDecision & { setting: NonNullable<GateDecision['setting']> } = {
  setting: { outgoingTxn: 0, mandatory: true, blockTxn: true },
  settingFetchedAt: '2026-11-23T10:15:02.120Z',
  checkedAt: '2026-11-23T10:15:02.120Z',
  applies: true,
  reference: false,
  outcome: 'blocked',
};

describe('a walletId through the ledger', () => {
  it.each([
    ['a BitGo 32-hex id', '59cd72485007a239fb00282ed480da1f', '59cd72485007a239fb00282ed480da1f'],
    ['a string of digits', '00310', '310'],
  ])("%s is the record's, the stored payload's and the events' walletId", async (_name, given, text) => {
    const prefix = uniquePrefix('wallet-id');
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000, tombstoneRetentionMs: 3_600_000 });
    await ledger.epoch.init();
    const sequenceId = newSequenceId();
    const parsed = parseSubmitPayload(samplePayload({ sequenceId, walletId: given }));
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    expect((await ledger.transition(sequenceId, op.create('job-1', parsed.payload))).ok).toBe(true);
    const record = await ledger.get(sequenceId);
    expect(record?.walletId).toBe(text);
    // What the send step and reconciliation read back: the payload as parsed at the edge.
    expect(storedPayload(record!).walletId).toBe(parsed.payload.walletId);
    expect((await ledger.transition(sequenceId, op.block(BLOCKED))).ok).toBe(true);
    const entries = await redis.xrange(keys.events, '-', '+');
    const events = entries.map((entry) => parseStreamEntry(entry as [string, string[]])).filter((e) => e.sequenceId === sequenceId);
    expect(events.map((event) => [event.event, event.walletId])).toEqual([['transfer.blocked', text]]);
  });
});
