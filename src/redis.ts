import { Cluster, Redis } from 'ioredis';
import type { Config } from './config/config.ts';

export type RedisClient = Redis | Cluster;

/**
 * One connection per call. BullMQ workers need `maxRetriesPerRequest: null` (blocking commands must
 * wait out a Redis restart instead of failing); the same suits our own commands, which sit in jobs.
 */
export function createRedis(config: Pick<Config['redis'], 'url' | 'clusterNodes'>, name = 'custody-worker'): RedisClient {
  if (config.clusterNodes) {
    const url = new URL(config.url);
    return new Cluster(config.clusterNodes, {
      redisOptions: {
        maxRetriesPerRequest: null,
        connectionName: name,
        username: url.username || undefined,
        password: url.password ? decodeURIComponent(url.password) : undefined,
        tls: url.protocol === 'rediss:' ? {} : undefined,
      },
      enableReadyCheck: true,
    });
  }
  return new Redis(config.url, { maxRetriesPerRequest: null, connectionName: name, enableReadyCheck: true });
}
