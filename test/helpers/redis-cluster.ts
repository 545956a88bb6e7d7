/**
 * A throwaway 3-master Redis Cluster on loopback, built from private redis-server processes.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions } from 'ioredis';
import { rawRedisCommand, startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { trackRedis } from './redis.ts';

const execFileAsync = promisify(execFile);

export const REDIS_CLI_BIN = process.env.REDIS_CLI_BIN ?? 'redis-cli';

export interface RedisClusterNode {
  host: string;
  port: number;
}

export interface RedisClusterHandle {
  nodes: RedisClusterNode[];
  /** `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3` (REDIS_CLUSTER_NODES format). */
  nodesEnv: string;
  /** The underlying servers (e.g. to kill/restart one node). */
  servers: RedisServerHandle[];
  stop(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function clusterInfoField(info: string, field: string): string | undefined {
  const m = new RegExp(`^${field}:(\\S+)`, 'm').exec(info);
  return m?.[1];
}

export async function startRedisCluster(opts: { masters?: number; timeoutMs?: number } = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const settled = await Promise.allSettled(Array.from({ length: masters }, () => startRedisServer({ clusterEnabled: true })));
  const servers = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stopAll = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stopAll();
    throw failed.reason;
  }

  try {
    const addrs = servers.map((s) => `${s.host}:${s.port}`);
    await execFileAsync(REDIS_CLI_BIN, ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes'], {
      timeout: timeoutMs,
    }).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`redis-cli --cluster create failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });

    // Every node must see the full slot map and every other node before clients connect.
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const infos = await Promise.all(servers.map((s) => rawRedisCommand(s.port, 'CLUSTER INFO').catch(() => '')));
      const ready = infos.every(
        (info) =>
          clusterInfoField(info, 'cluster_state') === 'ok' &&
          clusterInfoField(info, 'cluster_known_nodes') === String(masters) &&
          clusterInfoField(info, 'cluster_slots_ok') === '16384',
      );
      if (ready) break;
      if (Date.now() > deadline) {
        throw new Error(`cluster did not reach cluster_state:ok within ${timeoutMs} ms:\n${infos.join('\n---\n')}`);
      }
      await sleep(50);
    }
  } catch (err) {
    await stopAll();
    throw err;
  }

  const nodes = servers.map((s) => ({ host: s.host, port: s.port }));
  return {
    nodes,
    nodesEnv: nodes.map((n) => `${n.host}:${n.port}`).join(','),
    servers,
    stop: stopAll,
  };
}

/**
 * An ioredis Cluster client for `nodes`, tracked so closeAllRedis() closes it.
 * redisOptions.maxRetriesPerRequest defaults to null (as BullMQ requires).
 */
export function newRedisCluster(nodes: RedisClusterNode[], options: ClusterOptions = {}): Cluster {
  const cluster = new Cluster(nodes, {
    ...options,
    redisOptions: { maxRetriesPerRequest: null, ...options.redisOptions },
  });
  return trackRedis(cluster);
}
