import { existsSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, inject, it } from 'vitest';
import { closeAllRedis, newRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { pidIsAlive, rawRedisCommand, startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { newRedisCluster, startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.ts';

afterEach(async () => {
  await closeAllRedis();
});

describe('injected test Redis', () => {
  it('answers PING and is not the shared 6379 unless REDIS_URL asked for it', async () => {
    const url = testRedisUrl();
    const source = inject('redisSource');
    expect(['env', 'testcontainers', 'redis-server']).toContain(source);
    const u = new URL(url);
    if (source !== 'env') {
      expect(u.port).not.toBe('6379');
      expect(u.port).not.toBe('');
    }
    // the setup file pins REDIS_URL for code that reads process.env
    expect(process.env.REDIS_URL).toBe(url);

    const redis = newRedis();
    expect(await redis.ping()).toBe('PONG');
  });

  it('uniquePrefix gives fresh, safe prefixes', async () => {
    const a = uniquePrefix('my test: one');
    const b = uniquePrefix('my test: one');
    expect(a).not.toBe(b);
    expect(a).toMatch(/^t-my_test_one-[0-9a-f]+$/);
    expect(uniquePrefix('q', { hashTag: true })).toMatch(/^\{t-q-[0-9a-f]+\}$/);

    const redis = newRedis();
    const key = `${a}:k`;
    await redis.set(key, 'v', 'EX', 60);
    expect(await redis.get(key)).toBe('v');
    await redis.del(key);
  });
});

describe('startRedisServer', () => {
  let server: RedisServerHandle | undefined;
  afterAll(async () => {
    await server?.stop();
  });

  it('keeps data across restart() with AOF on, and stop() kills the process and removes the dir', async () => {
    server = await startRedisServer({ appendonly: true });
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    expect(server.port).not.toBe(6379);
    expect(pidIsAlive(server.pid)).toBe(true);
    expect(await rawRedisCommand(server.port, 'CONFIG GET appendonly')).toContain('yes');

    const c1 = newRedis({ url: server.url });
    await c1.set('survivor', 'still-here');
    await c1.quit();

    const firstPid = server.pid;
    await server.restart();
    expect(server.pid).not.toBe(firstPid);
    expect(pidIsAlive(firstPid)).toBe(false);

    const c2 = newRedis({ url: server.url });
    expect(await c2.get('survivor')).toBe('still-here');
    await c2.quit();

    const pid = server.pid;
    const dir = server.dir;
    await server.stop();
    expect(pidIsAlive(pid)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await expect(server.restart()).rejects.toThrow(/after stop/);
    server = undefined;
  });

  it('without AOF, data is gone after restart(); kill() simulates a crash', async () => {
    server = await startRedisServer({ appendonly: false });
    const c = newRedis({ url: server.url });
    await c.set('ephemeral', '1');
    await c.quit();
    const pid = server.pid;
    await server.kill();
    expect(pidIsAlive(pid)).toBe(false);
    await server.restart();
    const c2 = newRedis({ url: server.url });
    expect(await c2.get('ephemeral')).toBeNull();
    await c2.quit();
    await server.stop();
    server = undefined;
  });
});

describe('startRedisCluster', () => {
  let cluster: RedisClusterHandle | undefined;
  afterAll(async () => {
    await closeAllRedis();
    await cluster?.stop();
  });

  it('gives a working 3-master cluster for ioredis Cluster', async () => {
    const t0 = Date.now();
    cluster = await startRedisCluster();
    const startMs = Date.now() - t0;
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.nodesEnv).toBe(cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','));
    expect(cluster.nodesEnv).toMatch(/^127\.0\.0\.1:\d+,127\.0\.0\.1:\d+,127\.0\.0\.1:\d+$/);
    expect(cluster.nodes.map((n) => n.port)).not.toContain(6379);
    expect(startMs).toBeLessThan(15_000);

    const client = newRedisCluster(cluster.nodes);
    const prefix = uniquePrefix('cluster');

    // Keys spread over different slots owned by different masters.
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((k) => `${prefix}:${k}`);
    const slots = await Promise.all(keys.map((k) => client.cluster('KEYSLOT', k)));
    expect(new Set(slots).size).toBeGreaterThan(1);
    for (const k of keys) await client.set(k, `v-${k}`);
    for (const k of keys) expect(await client.get(k)).toBe(`v-${k}`);
    const owners = new Set<string>();
    const nodes = client.nodes('master');
    expect(nodes).toHaveLength(3);
    for (const node of nodes) {
      const n = await node.dbsize();
      if (n > 0) owners.add(`${node.options.host}:${node.options.port}`);
    }
    expect(owners.size).toBeGreaterThan(1);

    // MULTI across two keys sharing the {t} hash tag.
    const res = await client.multi().set('{t}:one', '1').set('{t}:two', '2').get('{t}:one').exec();
    expect(res?.map(([err, v]) => [err, v])).toEqual([
      [null, 'OK'],
      [null, 'OK'],
      [null, '1'],
    ]);
    expect(await client.mget('{t}:one', '{t}:two')).toEqual(['1', '2']);
  });

  it('stop() kills every node', async () => {
    if (!cluster) throw new Error('cluster not started');
    const pids = cluster.servers.map((s) => s.pid);
    await closeAllRedis();
    await cluster.stop();
    for (const pid of pids) expect(pidIsAlive(pid)).toBe(false);
    const dirs = cluster.servers.map((s) => s.dir);
    for (const dir of dirs) expect(existsSync(dir)).toBe(false);
    cluster = undefined;
  });
});
