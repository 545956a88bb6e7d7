import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisConnection } from './config/config.ts';

export type RedisClient = Redis | Cluster;

/**
 * ioredis writes each command to its socket as it is issued (Nagle off): one write system call per
 * command, which was a large part of the worker's time. Commands issued within one iteration of the
 * event loop (the jobs resumed by the replies and HTTP answers that arrived together) leave together
 * instead: the first corks the socket, and it is uncorked in the iteration's check phase
 * (setImmediate, after every I/O callback of the iteration and its continuations ran), in one writev.
 * Nothing else changes: the same commands, in the same order, on the same connection, each written
 * before the loop waits for I/O again. Duplicates (BullMQ's blocking connections) are plain clients.
 */
export class CoalescingRedis extends Redis {
  #corked = false;

  override sendCommand(command: Parameters<Redis['sendCommand']>[0], stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const socket = this.stream;
    if (!this.#corked && stream === undefined && this.status === 'ready' && socket?.writable) {
      this.#corked = true;
      socket.cork();
      setImmediate(() => {
        this.#corked = false;
        socket.uncork();
      });
    }
    return super.sendCommand(command, stream);
  }
}

/** What a caller may change of the worker's connection defaults (the CLI gives up instead of waiting). */
export interface RedisTuning {
  maxRetriesPerRequest?: number | null;
  connectTimeout?: number;
  /** Delay before reconnect attempt `times`, or null to give up. Also used between cluster refreshes. */
  retryStrategy?: (times: number) => number | null;
}

/**
 * One connection per call. BullMQ workers need `maxRetriesPerRequest: null` (blocking commands must
 * wait out a Redis restart instead of failing); the same suits our own commands, which sit in jobs.
 */
export function createRedis(
  config: Pick<RedisConnection, 'url' | 'clusterNodes'> & Partial<Pick<RedisConnection, 'sentinel'>>,
  name = 'custody-worker',
  tuning: RedisTuning = {},
): RedisClient {
  const options: RedisOptions & { replyMapping?: 'legacy' } = {
    maxRetriesPerRequest: null,
    connectionName: name,
    enableReadyCheck: true,
    reconnectOnError: reconnectWhenReadOnly,
    ...tuning,
  };
  if (config.clusterNodes) {
    const url = new URL(config.url);
    return new Cluster(config.clusterNodes, {
      redisOptions: {
        ...options,
        username: url.username || undefined,
        password: url.password ? decodeURIComponent(url.password) : undefined,
        tls: url.protocol === 'rediss:' ? {} : undefined,
      },
      enableReadyCheck: true,
      ...(tuning.retryStrategy ? { clusterRetryStrategy: tuning.retryStrategy } : {}),
    });
  }
  if (config.sentinel) {
    // ioredis asks the Sentinels for the master and reconnects to the new one after a failover; until
    // one is known, commands wait (and readiness says no).
    const { nodes, master, sentinelPassword, password } = config.sentinel;
    return new CoalescingRedis({
      ...options,
      sentinels: nodes,
      name: master,
      ...(sentinelPassword ? { sentinelPassword } : {}),
      ...(password ? { password } : {}),
      role: 'master',
      // A master that was only cut off (not crashed) keeps our connection open; without this, commands
      // would wait on it until it is told it is a replica. ioredis listens for the Sentinels'
      // +switch-master and reconnects to the new master at once.
      failoverDetector: true,
    });
  }
  return new CoalescingRedis(config.url, options);
}

/**
 * A master demoted to a replica (a failover behind a DNS name, or a stale master the Sentinels
 * reconfigured) answers writes with READONLY and keeps the connection: reconnect, which finds the
 * current master, and send the command again (ioredis's documented recipe; 2 = reconnect and resend).
 */
function reconnectWhenReadOnly(error: Error): 2 | false {
  return error.message.startsWith('READONLY') ? 2 : false;
}

/** QUIT, or a hard disconnect when the connection is not ready or QUIT does not answer in time. */
export async function closeRedis(client: RedisClient, timeoutMs = 2_000): Promise<void> {
  if (client.status === 'end') return;
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  const timer = setTimeout(() => client.disconnect(), timeoutMs);
  try {
    await client.quit();
  } catch {
    client.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
