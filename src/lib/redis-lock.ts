import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis.ts';

const RELEASE_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const RENEW_LOCK_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

/**
 * A named lock for one holder at a time across processes: SET NX PX with a random owner token, renewed
 * every `renewMs` while `task` runs, released only by its owner. Should renewals fail for longer than
 * the TTL, a second holder may start: callers make their work safe to overlap.
 */
export async function withRedisLock<T>(
  redis: RedisClient,
  key: string,
  ttlMs: number,
  renewMs: number,
  task: () => Promise<T>,
): Promise<T | undefined> {
  const token = randomUUID();
  const locked = await redis.set(key, token, 'PX', ttlMs, 'NX');
  if (!locked) return undefined;
  const renewal =
    renewMs > 0
      ? setInterval(() => {
          redis.eval(RENEW_LOCK_LUA, 1, key, token, ttlMs).catch(() => undefined);
        }, renewMs)
      : undefined;
  renewal?.unref();
  try {
    return await task();
  } finally {
    clearInterval(renewal);
    await redis.eval(RELEASE_LOCK_LUA, 1, key, token);
  }
}
