/**
 * A throwaway Redis Cluster on loopback (3 masters, optionally with replicas), built from private
 * redis-server processes.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, type ClusterOptions } from 'ioredis';
import { keySlot } from '../../packages/producer/src/redis-slot.ts';
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
  /** The servers of the shard that holds `key`'s slot now, as the cluster answers CLUSTER SLOTS. */
  shardOf(key: string): Promise<{ master: RedisServerHandle; replicas: RedisServerHandle[] }>;
  stop(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function clusterInfoField(info: string, field: string): string | undefined {
  const m = new RegExp(`^${field}:(\\S+)`, 'm').exec(info);
  return m?.[1];
}

export interface StartRedisClusterOptions {
  masters?: number;
  /** Replicas per master (default 0): `redis-cli --cluster create --cluster-replicas N`. */
  replicas?: number;
  /** Extra redis-server arguments for every node (e.g. ['--cluster-node-timeout', '1000']). */
  extraArgs?: string[];
  timeoutMs?: number;
}

export async function startRedisCluster(opts: StartRedisClusterOptions = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicas ?? 0;
  const total = masters * (1 + replicas);
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const settled = await Promise.allSettled(
    Array.from({ length: total }, () =>
      startRedisServer({ clusterEnabled: true, ...(opts.extraArgs ? { extraArgs: opts.extraArgs } : {}) }),
    ),
  );
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
    await execFileAsync(REDIS_CLI_BIN, ['--cluster', 'create', ...addrs, '--cluster-replicas', String(replicas), '--cluster-yes'], {
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
          clusterInfoField(info, 'cluster_known_nodes') === String(total) &&
          clusterInfoField(info, 'cluster_slots_ok') === '16384',
      );
      // Replicas count once their first sync is done (a loading replica acknowledges nothing) and every
      // node knows them as replicas.
      const replication = await Promise.all(servers.map((s) => rawRedisCommand(s.port, 'INFO replication').catch(() => '')));
      const views = await Promise.all(servers.map((s) => rawRedisCommand(s.port, 'CLUSTER NODES').catch(() => '')));
      const synced =
        replicas === 0 ||
        (replication.filter((info) => /master_link_status:up/.test(info)).length === masters * replicas &&
          views.every((view) => view.split('\n').filter((line) => /\s(myself,)?slave\s/.test(line)).length === masters * replicas));
      if (ready && synced) break;
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
    async shardOf(key) {
      const slot = keySlot(key);
      for (const server of servers) {
        // CLUSTER NODES, not CLUSTER SLOTS: Redis 7.0 leaves a replica out of CLUSTER SLOTS until it has
        // reported a replication offset, seconds after it is in sync.
        const text = await rawRedisCommand(server.port, 'CLUSTER NODES').catch(() => '');
        const nodes = text.split('\n').flatMap((line) => {
          const [id, address, flags, masterId, , , , , ...slots] = line.trim().split(' ');
          if (!id || !address || !flags || !masterId) return [];
          const port = Number(/:(\d+)@/.exec(address)?.[1]);
          const serves = slots.some((range) => {
            const [from, to] = range.split('-').map(Number);
            return from !== undefined && slot >= from && slot <= (to ?? from);
          });
          return [{ id, port, master: /master/.test(flags) && !/fail/.test(flags), masterId, serves }];
        });
        const owner = nodes.find((n) => n.master && n.serves);
        const byPort = (port: number) => servers.find((s) => s.port === port);
        const master = owner && byPort(owner.port);
        if (owner && master) {
          return { master, replicas: nodes.filter((n) => n.masterId === owner.id).flatMap((n) => byPort(n.port) ?? []) };
        }
      }
      throw new Error(`no node of the cluster names a master for slot ${slot}`);
    },
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
