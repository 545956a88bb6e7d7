/**
 * Vitest global setup: pick ONE Redis for the whole run and provide its URL as `redisUrl`:
 * REDIS_URL when set (never flushed; tests keep to fresh random prefixes), else testcontainers,
 * else a private redis-server (tools/redis/private-redis.ts). TEST_REDIS_NO_CONTAINERS=1 skips
 * the testcontainers attempt.
 */
import type { TestProject } from 'vitest/node';
import { acquireRedis, redactRedisUrl } from '../../tools/redis/private-redis.ts';
import './provided-context.ts';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const redis = await acquireRedis({ url: process.env.REDIS_URL, noContainers: Boolean(process.env.TEST_REDIS_NO_CONTAINERS) });
  project.provide('redisUrl', redis.url);
  project.provide('redisSource', redis.source);
  console.log(`[global-setup] Redis for tests: ${redactRedisUrl(redis.url)} via ${redis.note}`);
  return () => redis.stop();
}
