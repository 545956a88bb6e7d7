import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { Keys } from '../../src/ledger/keys.ts';
import { prefixedKeys } from '../helpers/ledger-steps.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

/**
 * Claims (transition.lua, Keys.claims): an upstream record id or txid stored for one sequenceId is
 * never another's, for as long as the transfer has a record or a tombstone, and reconciliation's
 * retention (Ledger.forgetClaims) removes a claim only once both are gone.
 */
const redis = newRedis();
let keys: Keys;
let ledger: Ledger;
let seq = 0;
const id = () => `claims-${++seq}`;

beforeEach(() => {
  keys = prefixedKeys(uniquePrefix('claims'));
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000 });
});
afterAll(async () => {
  await closeAllRedis();
});

/** A new record that stores (and so claims) these ids. */
function create(sequenceId: string, claims: { recordIds?: string[]; txids?: string[] }) {
  return ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.GATED, set: { walletId: '1', coin: 'eth' }, claims });
}

describe('claims', () => {
  it('are fields of one hash, written with the change that stores them; another sequenceId is refused', async () => {
    const ours = id();
    expect((await create(ours, { recordIds: ['r-1'], txids: ['0xABCDEF'] })).ok).toBe(true);
    expect(await redis.hgetall(keys.claims)).toEqual({ 'record:r-1': ours, 'txid:0xabcdef': ours });
    // No key of their own: the claims hash is the only one.
    expect(await redis.exists(`${keys.claims.slice(0, -'claims'.length)}claim:record:r-1`)).toBe(0);

    const other = id();
    const refused = await create(other, { txids: ['0xAbCdEf'] });
    expect(refused).toMatchObject({ ok: false, reason: 'claimed' });
    expect(await redis.exists(keys.transfer(other))).toBe(0);
    // The same sequenceId may store them again (a later change of the same transfer).
    expect(
      (await ledger.transition(ours, { from: [TransferState.GATED], to: TransferState.GATED, claims: { recordIds: ['r-1', 'r-2'] } })).ok,
    ).toBe(true);
    expect(await redis.hget(keys.claims, 'record:r-2')).toBe(ours);

    // Read back by a provider's wake-up and by the matching, in either letter case of the txid.
    expect(await ledger.claimedBy({ recordId: 'r-2' })).toBe(ours);
    expect(await ledger.claimedBy({ txid: '0xABCDEF' })).toBe(ours);
    expect(await ledger.claimedBy({ recordId: 'r-9', txid: '0xAbCdEf' })).toBe(ours);
    expect(await ledger.claimedBy({ recordId: 'r-9' })).toBeUndefined();
    // An accepted send's hint answers for its record id when nothing claimed it.
    await ledger.rememberAcceptedRecord(other, 'r-9');
    expect(await ledger.claimedBy({ recordId: 'r-9', txid: '0xabcdef' })).toBe(other);
    expect(
      await ledger.heldByOthers(other, [
        { id: 'r-1', txid: '' },
        { id: 'r-3', txid: '0xABCDEF' },
        { id: 'r-4', txid: '' },
      ]),
    ).toEqual(new Set(['r-1', 'r-3']));
    expect(await ledger.heldByOthers(ours, [{ id: 'r-1', txid: '0xabcdef' }])).toEqual(new Set());
  });

  it('live while the transfer has a record or a tombstone; retention removes them once both are gone', async () => {
    const kept = id();
    const ended = id();
    const forgotten = id();
    for (const [sequenceId, n] of [
      [kept, 1],
      [ended, 2],
      [forgotten, 3],
    ] as const) {
      expect((await create(sequenceId, { recordIds: [`r-${n}`], txids: [`0x0${n}`] })).ok).toBe(true);
    }
    // `ended`: its record went (RETENTION), its tombstone stays; `forgotten`: both went.
    await redis.del(keys.transfer(ended), keys.transfer(forgotten));
    await redis.set(keys.tombstone(ended), 'broadcast:3');

    expect(await ledger.forgetClaims()).toBe(2);
    expect(await redis.hgetall(keys.claims)).toEqual({ 'record:r-1': kept, 'txid:0x01': kept, 'record:r-2': ended, 'txid:0x02': ended });
    // Its txid is free again: another transfer may store it.
    expect((await create(id(), { txids: ['0x03'] })).ok).toBe(true);

    await redis.del(keys.tombstone(ended));
    expect(await ledger.forgetClaims()).toBe(2);
    expect(Object.keys(await redis.hgetall(keys.claims)).sort()).toEqual(['record:r-1', 'txid:0x01', 'txid:0x03']);
  });

  it('retention goes on where its last run stopped, a bounded number of reads per run', async () => {
    // More claims than one HSCAN reads, of transfers that are gone (a hashtable, so HSCAN pages).
    const fields: string[] = [];
    for (let i = 0; i < 2_400; i++) fields.push(`record:gone-${i}`, `gone-${i}`);
    await redis.hset(keys.claims, ...fields);
    const ours = id();
    expect((await create(ours, { recordIds: ['r-ours'] })).ok).toBe(true);

    let removed = 0;
    let runs = 0;
    while ((await redis.hlen(keys.claims)) > 1) {
      const now = await ledger.forgetClaims(1);
      expect(now, 'one read removes at most what it read').toBeLessThan(2_400);
      removed += now;
      runs++;
      expect(runs, 'every run goes on from the cursor it left').toBeLessThan(50);
    }
    expect(runs).toBeGreaterThan(1);
    expect(removed).toBe(2_400);
    expect(await redis.hgetall(keys.claims)).toEqual({ 'record:r-ours': ours });
  });
});
