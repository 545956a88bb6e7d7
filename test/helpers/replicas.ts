/** Replicas of a private primary on loopback, for tests of Redis replication (WAIT, failovers). */
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { until } from './wait.ts';

/**
 * Starts `count` replicas of `primary` and resolves once the primary lists them online, besides any it had.
 * Online, not only connected: a replica still loading its first sync acknowledges nothing.
 */
export async function startReplicas(primary: RedisServerHandle, count: number): Promise<RedisServerHandle[]> {
  const replicas: RedisServerHandle[] = [];
  const probe = new Redis(primary.url);
  const online = async () => (await probe.info('replication')).match(/slave\d+:[^\r\n]*state=online/g)?.length ?? 0;
  try {
    const before = await online();
    for (let i = 0; i < count; i++)
      replicas.push(await startRedisServer({ extraArgs: ['--replicaof', '127.0.0.1', String(primary.port)] }));
    await until(`${count} more replica(s) online`, 10_000, async () => ((await online()) === before + count ? true : undefined), 100);
  } finally {
    probe.disconnect();
  }
  return replicas;
}
