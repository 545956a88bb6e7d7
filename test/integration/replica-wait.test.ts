/**
 * acknowledgingReplicas (packages/producer/src/replicas.ts), behind REDIS_MIN_REPLICAS and the
 * producer's minReplicas: it waits for every replica the master has online, not only for the minimum,
 * so with two replicas and a minimum of 1 the second one is not left behind while the first answers
 * (Sentinel may promote either). A primary and two replicas on loopback; one replica paused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acknowledgingReplicas, onlineReplicas } from '../../packages/producer/src/replicas.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { closeAllRedis, newRedis } from '../helpers/redis.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { sleep } from '../helpers/wait.ts';

describe('waiting for replicas', () => {
  let primary: RedisServerHandle;
  let replicas: RedisServerHandle[] = [];

  beforeAll(async () => {
    primary = await startRedisServer();
    replicas = await startReplicas(primary, 2);
  });
  afterAll(async () => {
    await closeAllRedis();
    for (const replica of replicas) await replica.stop();
    await primary?.stop();
  });

  it('counts the online replicas from ROLE', async () => {
    const client = newRedis({ url: primary.url });
    expect(onlineReplicas(await client.call('ROLE'))).toBe(2);
    expect(onlineReplicas(['slave', '127.0.0.1', 6379, 'connected', 1])).toBe(0);
    expect(onlineReplicas('garbage')).toBe(0);
  });

  it('with a minimum of 1, waits for the second replica too while it is within the timeout', async () => {
    const client = newRedis({ url: primary.url });
    const lagging = replicas[1]!;
    process.kill(lagging.pid, 'SIGSTOP');
    try {
      await client.set('replica-wait:x', '1');
      // The paused replica runs again well within the timeout: the wait sees it acknowledge. Returning
      // on the first acknowledgement would give 1.
      const waited = acknowledgingReplicas(client, 'replica-wait:x', 1, 5_000);
      await sleep(300);
      process.kill(lagging.pid, 'SIGCONT');
      expect(await waited).toBe(2);
    } finally {
      process.kill(lagging.pid, 'SIGCONT');
    }
  });

  it('with a replica paused past the timeout, gives the count that did acknowledge', async () => {
    const client = newRedis({ url: primary.url });
    const lagging = replicas[1]!;
    process.kill(lagging.pid, 'SIGSTOP');
    try {
      await client.set('replica-wait:y', '1');
      expect(await acknowledgingReplicas(client, 'replica-wait:y', 1, 200)).toBe(1);
    } finally {
      process.kill(lagging.pid, 'SIGCONT');
    }
  });
});
