/**
 * Per-test Redis access: the URL chosen by global setup, unique key prefixes
 * (so tests never collide and never flush), and tracked ioredis clients.
 */
import { randomBytes } from 'node:crypto';
import { closeRedis, type RedisClient } from '../../src/redis.ts';
import { Redis, type RedisOptions } from 'ioredis';
import { inject } from 'vitest';
import './provided-context.ts';

/** The Redis URL provided by test/helpers/global-setup.ts (never the shared 6379 unless REDIS_URL says so). */
export function testRedisUrl(): string {
  const url = inject('redisUrl');
  if (!url) throw new Error('redisUrl was not provided: is test/helpers/global-setup.ts in vitest.config.ts globalSetup?');
  return url;
}

/**
 * A fresh key prefix per call: `t-<name>-<random>`; with `{ hashTag: true }`
 * it is wrapped as `{t-<name>-<random>}` so all keys land in one cluster slot
 * (what BullMQ needs on Redis Cluster). Characters outside [A-Za-z0-9_-] in
 * `name` become `_` (BullMQ forbids `:` in queue names).
 */
export function uniquePrefix(name: string, opts: { hashTag?: boolean } = {}): string {
  const clean = name.replace(/[^A-Za-z0-9_-]+/g, '_').slice(0, 40) || 'x';
  const prefix = `t-${clean}-${randomBytes(5).toString('hex')}`;
  return opts.hashTag ? `{${prefix}}` : prefix;
}

const tracked = new Set<RedisClient>();

/** Register any ioredis client (Redis or Cluster) to be closed by closeAllRedis(). Returns it. */
export function trackRedis<T extends RedisClient>(client: T): T {
  tracked.add(client);
  return client;
}

/**
 * A tracked ioredis client with maxRetriesPerRequest: null.
 * `url` defaults to testRedisUrl(); other options are passed through.
 */
export function newRedis(opts: RedisOptions & { url?: string } = {}): Redis {
  const { url = testRedisUrl(), ...options } = opts;
  const client = new Redis(url, { maxRetriesPerRequest: null, ...options });
  return trackRedis(client);
}

/** Close every client from newRedis()/trackRedis() (QUIT, falling back to disconnect). Use in afterEach/afterAll. */
export async function closeAllRedis(): Promise<void> {
  const clients = [...tracked];
  tracked.clear();
  await Promise.all(clients.map((client) => closeRedis(client)));
}
