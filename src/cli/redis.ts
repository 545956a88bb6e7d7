import type { Config } from '../config/config.ts';
import { closeRedis, createRedis, type RedisClient } from '../redis.ts';

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
  const client = createRedis(config, 'custody-worker-cli', {
    maxRetriesPerRequest: 1,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (times) => (times > RECONNECT_ATTEMPTS ? null : RECONNECT_DELAY_MS),
  });
  let last: Error | undefined;
  // Without a listener ioredis prints every reconnection error; the command's own failure says enough.
  client.on('error', (error: Error) => {
    last = error;
  });
  return { client, lastError: () => last, close: () => closeRedis(client) };
}

/** The Redis password, to scrub from any message (ioredis errors do not carry it, but a URL might). */
export function redisSecrets(config: Pick<Config['redis'], 'url'>): string[] {
  if (!URL.canParse(config.url)) return [];
  const url = new URL(config.url);
  return url.password ? [url.password, decodeURIComponent(url.password)] : [];
}
