import type { Socket } from 'node:net';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createRedis, type RedisClient } from '../../src/redis.ts';
import { closeAllRedis, testRedisUrl, trackRedis, uniquePrefix } from '../helpers/redis.ts';

afterAll(async () => {
  await closeAllRedis();
});

async function ready(): Promise<RedisClient & { stream: Socket }> {
  const redis = trackRedis(createRedis({ url: testRedisUrl(), clusterNodes: undefined }, 'coalescing-test'));
  await redis.ping();
  return redis as RedisClient & { stream: Socket };
}

/** Counts the writes that reach the socket (one per `_write`, one per `_writev` batch). */
function countWrites(socket: Socket): () => number {
  const write = vi.spyOn(socket as unknown as { _write: (...args: unknown[]) => void }, '_write');
  const writev = vi.spyOn(socket as unknown as { _writev: (...args: unknown[]) => void }, '_writev');
  return () => write.mock.calls.length + writev.mock.calls.length;
}

describe("the worker's Redis client", () => {
  it('writes the commands issued in one iteration of the event loop together, in order, with their own replies', async () => {
    const redis = await ready();
    const key = `${uniquePrefix('coalesce')}:n`;
    const writes = countWrites(redis.stream);
    const replies = await Promise.all(Array.from({ length: 20 }, () => redis.incr(key)));
    expect(replies).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(writes()).toBe(1);
  });

  it('commands resumed by one batch of replies leave together too', async () => {
    const redis = await ready();
    const key = `${uniquePrefix('coalesce')}:chain`;
    const writes = countWrites(redis.stream);
    // Ten chains of three dependent steps, as ten jobs each waiting for its previous reply.
    const chains = Array.from({ length: 10 }, async (_, i) => {
      await redis.hset(key, `f${i}`, '1');
      await redis.hincrby(key, `f${i}`, 1);
      return redis.hget(key, `f${i}`);
    });
    expect(await Promise.all(chains)).toEqual(Array.from({ length: 10 }, () => '2'));
    expect(writes()).toBeLessThanOrEqual(3);
  });

  it('commands issued by separate callbacks of one iteration (two immediates) leave together', async () => {
    // Two setImmediate callbacks run in one check phase, each a macrotask of its own; the uncork queued
    // by the first command runs in the next check phase, after both. (Two setTimeout(…, 0) are not
    // sure to share an iteration: each reads the clock when it is set, and a millisecond may pass
    // between them.)
    const redis = await ready();
    const key = `${uniquePrefix('coalesce')}:immediates`;
    const writes = countWrites(redis.stream);
    const issued = await new Promise<Array<Promise<number>>>((resolve) => {
      const promises: Array<Promise<number>> = [];
      setImmediate(() => promises.push(redis.incr(key)));
      setImmediate(() => {
        promises.push(redis.incr(key));
        resolve(promises);
      });
    });
    expect(await Promise.all(issued)).toEqual([1, 2]);
    expect(writes()).toBe(1);
  });
});
