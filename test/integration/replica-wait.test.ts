/**
 * replicaAcknowledgement (packages/producer/src/replicas.ts), behind REDIS_MIN_REPLICAS and the
 * producer's minReplicas: every replica the master lists online must acknowledge, not only the
 * minimum, so with two replicas and a minimum of 1 the second one is never left behind (Sentinel may
 * promote either). A replica the master no longer lists is not waited for. A primary and two replicas
 * on loopback; one replica paused, then stopped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionSession, onlineReplicas, replicaAcknowledgement } from '../../packages/producer/src/replicas.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { closeAllRedis, newRedis } from '../helpers/redis.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { sleep, until } from '../helpers/wait.ts';

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
      const session = connectionSession(client, 'replica-wait:x');
      await client.set('replica-wait:x', '1');
      // The paused replica runs again well within the timeout: the wait sees it acknowledge.
      const waited = replicaAcknowledgement(client, 'replica-wait:x', 1, 5_000, session);
      await sleep(300);
      process.kill(lagging.pid, 'SIGCONT');
      expect(await waited).toEqual({ acknowledged: 2, required: 2 });
    } finally {
      process.kill(lagging.pid, 'SIGCONT');
    }
  });

  it('with a minimum of 1, a listed replica that does not acknowledge in time makes it not enough', async () => {
    const client = newRedis({ url: primary.url });
    const lagging = replicas[1]!;
    process.kill(lagging.pid, 'SIGSTOP');
    try {
      const session = connectionSession(client, 'replica-wait:y');
      await client.set('replica-wait:y', '1');
      // One acknowledged, but the master still lists the paused one online: both were required.
      expect(await replicaAcknowledgement(client, 'replica-wait:y', 1, 200, session)).toEqual({ acknowledged: 1, required: 2 });
    } finally {
      process.kill(lagging.pid, 'SIGCONT');
    }
  });

  it('counts nothing when the WAIT is resent on a new connection, to a server that never took the write', async () => {
    // A failover in small: the write goes to a server with no replica, the WAIT blocks there, the
    // connection is replaced by one to a server with two replicas, and ioredis resends the WAIT, which
    // answers at once there with both replicas: they acknowledged nothing of the write.
    const lone = await startRedisServer();
    try {
      const client = newRedis({ url: lone.url });
      const session = connectionSession(client, 'replica-wait:moved');
      await client.set('replica-wait:moved', '1');
      const waited = replicaAcknowledgement(client, 'replica-wait:moved', 1, 5_000, session);
      await sleep(300);
      client.options.port = primary.port;
      client.disconnect(true);
      expect(await waited).toEqual({ acknowledged: 0, required: 1 });
      expect(await client.get('replica-wait:moved')).toBeNull(); // the client is on the other server now
    } finally {
      await lone.stop();
    }
  });

  it('does not wait for a replica the master no longer lists', async () => {
    const client = newRedis({ url: primary.url });
    await replicas[1]!.stop();
    await until('the master to list one replica', 10_000, async () => (onlineReplicas(await client.call('ROLE')) === 1 ? true : undefined));
    const session = connectionSession(client, 'replica-wait:z');
    await client.set('replica-wait:z', '1');
    expect(await replicaAcknowledgement(client, 'replica-wait:z', 1, 5_000, session)).toEqual({ acknowledged: 1, required: 1 });
    // The minimum still counts: two asked for, one there.
    expect(await replicaAcknowledgement(client, 'replica-wait:z', 2, 200, session)).toEqual({ acknowledged: 1, required: 2 });
  });
});
