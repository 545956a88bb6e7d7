import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, TransferState, type GateDecision, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { op } from '../../src/ledger/operations.ts';
import { PASSED_DECISION } from '../helpers/gate-decision.ts';
import { mustTransition, payloadOf } from '../helpers/ledger-steps.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * What most records would hold is left out of the ledger hash and read back as it was (operations.ts
 * gateFields, record.ts COMMON_GATE_SETTING, the poll failures' reset): a record is about 100 bytes
 * of Redis smaller, and reads the same.
 */
const redis = newRedis();
let keys: Keys;
let ledger: Ledger;
let n = 0;
const id = () => `defaults-${++n}-5d1c`;

beforeEach(async () => {
  const prefix = uniquePrefix('defaults', { hashTag: true });
  keys = createKeys(prefix, `${prefix}:events`);
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 3_600_000 });
  await ledger.epoch.start();
});
afterAll(async () => {
  await closeAllRedis();
});

const must = (sequenceId: string, request: TransitionRequest) => mustTransition(ledger, sequenceId, request);

describe("the ledger record's defaults", () => {
  it('leaves out a gate decision with the common setting, applying nothing, and reads it back whole', async () => {
    const s = id();
    await must(s, op.createAndTakeSend(`job-${s}`, payloadOf(s), PASSED_DECISION, 'runner', 30_000));
    const fields = await redis.hkeys(keys.transfer(s));
    expect(fields).toEqual(expect.arrayContaining(['gateOutcome', 'gateFetchedAt', 'gateCheckedAt']));
    expect(fields).not.toEqual(expect.arrayContaining(['gateSetting']));
    expect(fields).not.toEqual(expect.arrayContaining(['gateApplies']));
    expect(fields).not.toEqual(expect.arrayContaining(['gateReference']));
    expect((await ledger.get(s))!.gate).toEqual(PASSED_DECISION);
  });

  it('writes out every other decision, and reads it back whole', async () => {
    const decisions: GateDecision[] = [
      { ...PASSED_DECISION, setting: { outgoingTxn: 1, mandatory: true, blockTxn: false }, applies: true, reference: true },
      { ...PASSED_DECISION, setting: null },
      { ...PASSED_DECISION, setting: { outgoingTxn: 1, mandatory: false, blockTxn: true }, applies: false, reference: true },
    ];
    for (const decision of decisions) {
      const s = id();
      await must(s, op.create(`job-${s}`, payloadOf(s)));
      await must(s, op.pass(decision));
      expect(await redis.hget(keys.transfer(s), 'gateSetting')).toBe(JSON.stringify(decision.setting));
      expect((await ledger.get(s))!.gate).toEqual(decision);
    }
    const blocked = id();
    const decision = {
      ...PASSED_DECISION,
      setting: { outgoingTxn: 1, mandatory: true, blockTxn: true },
      applies: true,
      outcome: 'blocked' as const,
    };
    await must(blocked, op.create(`job-${blocked}`, payloadOf(blocked)));
    await must(blocked, op.block(decision));
    expect(await redis.hmget(keys.transfer(blocked), 'gateApplies', 'gateReference')).toEqual(['1', null]);
    expect((await ledger.get(blocked))!.gate).toEqual(decision);
  });

  it('reads a record written out in full, as workers before this version wrote it, the same', async () => {
    const s = id();
    await must(s, op.createAndTakeSend(`job-${s}`, payloadOf(s), PASSED_DECISION, 'runner', 30_000));
    await redis.hset(keys.transfer(s), 'gateSetting', JSON.stringify(PASSED_DECISION.setting), 'gateApplies', '0', 'gateReference', '0');
    expect((await ledger.get(s))!.gate).toEqual(PASSED_DECISION);
  });

  it('keeps no poll failure count once a poll answered', async () => {
    const s = id();
    await must(s, op.createAndTakeSend(`job-${s}`, payloadOf(s), PASSED_DECISION, 'runner', 30_000));
    await must(s, op.markSubmitted('runner', { transfer: null, recoveredBy: 'duplicate' }, {}, 0));
    await must(s, op.pollFailed(2));
    expect((await ledger.get(s))!.pollFailures).toBe(2);
    for (const answered of [op.pollAnswered(), op.identified({ transactionId: '4242' }), op.unmatched(1), op.haltedForNow('removed')]) {
      await must(s, op.pollFailed(3));
      await must(s, answered);
      expect(await redis.hexists(keys.transfer(s), 'pollFailures')).toBe(0);
      expect((await ledger.get(s))!.pollFailures).toBe(0);
      expect((await ledger.get(s))!.state).toBe(TransferState.SUBMITTED);
    }
  });
});
