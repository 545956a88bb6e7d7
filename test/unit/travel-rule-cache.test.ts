import { afterAll, describe, expect, it, vi } from 'vitest';
import { TravelRuleCache } from '../../src/custody/travel-rule-cache.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

const redis = newRedis();
afterAll(async () => {
  await closeAllRedis();
});

function cacheWith(ttlMs: number) {
  const keys = createKeys(uniquePrefix('travel-rule'), 'events');
  let clock = 1_000;
  const custody = { getTravelRuleSetting: vi.fn(async () => ({ outgoingTxn: 0, mandatory: false, blockTxn: false })) };
  const lookups: string[] = [];
  const cache = new TravelRuleCache(redis, custody, keys, {
    ttlMs,
    refreshTimeoutMs: 1_000,
    onLookup: (source) => lookups.push(source),
    monotonicNow: () => clock,
  });
  return { cache, custody, keys, lookups, advance: (ms: number) => (clock += ms) };
}

describe('the travel-rule cache', () => {
  it('serves the answer from the process while Redis keeps it, without reading Redis again', async () => {
    const { cache, custody, lookups, advance } = cacheWith(60_000);
    const first = await cache.setting();
    const reads = [vi.spyOn(redis, 'multi'), vi.spyOn(redis, 'get')];
    advance(59_000);
    expect(await cache.setting()).toEqual(first);
    for (const read of reads) expect(read).not.toHaveBeenCalled();
    expect(custody.getTravelRuleSetting).toHaveBeenCalledTimes(1);
    expect(lookups).toEqual(['upstream', 'cache']);
    for (const read of reads) read.mockRestore();
  });

  it('keeps a copy read from Redis no longer than Redis keeps it', async () => {
    const { cache, custody, keys, advance } = cacheWith(60_000);
    const stored = { outgoingTxn: 1, mandatory: true, blockTxn: false, fetchedAt: '2026-01-01T00:00:00.000Z' };
    await redis.set(keys.travelRule, JSON.stringify(stored), 'PX', 5_000);
    expect(await cache.setting()).toEqual(stored);
    advance(4_000);
    expect(await cache.setting()).toEqual(stored); // from the process
    await redis.set(keys.travelRule, JSON.stringify({ ...stored, mandatory: false }), 'PX', 60_000);
    advance(1_500); // past the 5 s Redis gave it: read again
    expect((await cache.setting()).mandatory).toBe(false);
    expect(custody.getTravelRuleSetting).not.toHaveBeenCalled();
  });
});
