import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashTag, keySlot } from '../../packages/producer/src/redis-slot.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';

describe('hash tags and slots as Redis computes them', () => {
  it.each([
    ['foo', undefined],
    ['{user1000}.following', 'user1000'],
    ['foo{}{bar}', undefined],
    ['foo{{bar}}zap', '{bar'],
    ['foo{bar}{zap}', 'bar'],
    ['{}{wtx}', undefined],
    ['{a}{wtx}:events', 'a'],
    ['wtx}{', undefined],
    ['x{wtx}:transfer:1', 'wtx'],
  ])('%s has the hash tag %s', (key, tag) => {
    expect(hashTag(key)).toBe(tag);
  });

  it('matches the slots Redis documents', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('foo{}{bar}')).toBe(keySlot('foo{}{bar}'));
    expect(keySlot('{a}{wtx}:events')).not.toBe(keySlot('{wtx}:transfer:x'));
  });

  describe('against a real redis-server (CLUSTER KEYSLOT)', () => {
    let server: RedisServerHandle;
    let redis: Redis;
    beforeAll(async () => {
      server = await startRedisServer({ extraArgs: ['--cluster-enabled', 'yes'] });
      redis = new Redis(server.url);
    });
    afterAll(async () => {
      redis?.disconnect();
      await server?.stop();
    });

    it('agrees on 300 generated keys, braces, empty tags and non-ASCII text included', async () => {
      const keyArb = fc
        .array(fc.oneof(fc.constantFrom('{', '}', '{}', ':', 'wtx', 'a'), fc.string({ maxLength: 6 }), fc.constantFrom('é', '€', '日本')), {
          maxLength: 8,
        })
        .map((parts) => parts.join(''));
      const keys = fc.sample(keyArb, { numRuns: 300, seed: 42 });
      const slots = await Promise.all(keys.map((key) => redis.call('CLUSTER', 'KEYSLOT', key)));
      const wrong = keys.filter((key, i) => keySlot(key) !== Number(slots[i]));
      expect(wrong).toEqual([]);
    });
  });
});
