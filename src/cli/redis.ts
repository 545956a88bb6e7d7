import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config/config.ts';
import type { RedisClient } from '../redis.ts';

/** Reconnection attempts before a command fails: a person is waiting, the worker's "wait forever" does not fit. */
const RECONNECT_ATTEMPTS = 3;
const RECONNECT_DELAY_MS = 250;
const CONNECT_TIMEOUT_MS = 5_000;

export interface CliRedis {
  client: RedisClient;
  /** The last connection error, for a message better than "Connection is closed". */
  lastError(): Error | undefined;
  /** QUIT, or a hard disconnect when that does not answer: the process must end on its own. */
  close(): Promise<void>;
}

/**
 * A connection for one CLI run. Unlike the worker's (src/redis.ts: `maxRetriesPerRequest: null`, retry
 * forever), it gives up after a few attempts so that a CLI pointed at a dead Redis fails with a
 * message instead of hanging.
 */
export function connectRedis(config: Pick<Config['redis'], 'url' | 'clusterNodes'>): CliRedis {
  const retryStrategy = (times: number) => (times > RECONNECT_ATTEMPTS ? null : RECONNECT_DELAY_MS);
  const options: RedisOptions = {
    maxRetriesPerRequest: 1,
    connectTimeout: CONNECT_TIMEOUT_MS,
    connectionName: 'custody-worker-cli',
    enableReadyCheck: true,
    retryStrategy,
  };
  let client: RedisClient;
  if (config.clusterNodes) {
    const url = new URL(config.url);
    client = new Cluster(config.clusterNodes, {
      redisOptions: {
        ...options,
        username: url.username || undefined,
        password: url.password ? decodeURIComponent(url.password) : undefined,
        tls: url.protocol === 'rediss:' ? {} : undefined,
      },
      clusterRetryStrategy: retryStrategy,
    });
  } else {
    client = new Redis(config.url, options);
  }
  let last: Error | undefined;
  // Without a listener ioredis prints every reconnection error; the command's own failure says enough.
  client.on('error', (error: Error) => {
    last = error;
  });
  return {
    client,
    lastError: () => last,
    async close() {
      if (client.status === 'end') return;
      if (client.status !== 'ready') {
        client.disconnect();
        return;
      }
      const timer = setTimeout(() => client.disconnect(), 2_000);
      try {
        await client.quit();
      } catch {
        client.disconnect();
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** The Redis password, to scrub from any message (ioredis errors do not carry it, but a URL might). */
export function redisSecrets(config: Pick<Config['redis'], 'url'>): string[] {
  if (!URL.canParse(config.url)) return [];
  const url = new URL(config.url);
  return url.password ? [url.password, decodeURIComponent(url.password)] : [];
}
