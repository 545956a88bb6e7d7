/**
 * Start-up refuses a Redis that would forget what the worker sent (src/startup.ts checkRedisSettings):
 * one that keeps nothing on disk or only RDB snapshots (after a restart it comes back empty, or as it
 * was at the last snapshot), or one whose maxmemory-policy may evict tombstones and ended records. The
 * real worker process against real redis-server processes:
 * - no AOF, no RDB saves: exit 78 and one line naming the risk and REDIS_ALLOW_VOLATILE;
 * - the same with REDIS_ALLOW_VOLATILE=1: starts (one warn line) and stops cleanly;
 * - RDB saves and no AOF (snapshot-only): exit 78, one line; with REDIS_ALLOW_VOLATILE=1 one warn line;
 * - AOF on: starts, no warning;
 * - CONFIG disabled (as managed services do) and AOF off: unknown, one warn line, starts;
 * - maxmemory-policy allkeys-lru: exit 78 and one line naming REDIS_ALLOW_EVICTION (also with CONFIG
 *   disabled: INFO memory tells); with REDIS_ALLOW_EVICTION=1 one warn line.
 * And the check itself in this process for a Cluster (a volatile, snapshot-only or evicting master
 * refuses) and for Sentinel (a volatile, snapshot-only or evicting replica is a warn line, not a refusal).
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { EX_CONFIG, type Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { checkRedisSettings, EVICTION_REFUSAL, SNAPSHOT_ONLY_REFUSAL, VOLATILE_REFUSAL } from '../../src/startup.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { workerEnv } from '../helpers/harness.ts';
import { startRedisCluster, type RedisClusterHandle } from '../helpers/redis-cluster.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { startSentinel } from '../helpers/sentinel.ts';
import { until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';

let sim: Simulator | undefined;
const servers: RedisServerHandle[] = [];
const stoppers: (() => Promise<void>)[] = [];

async function server(options: Parameters<typeof startRedisServer>[0]): Promise<RedisServerHandle> {
  const handle = await startRedisServer(options);
  servers.push(handle);
  return handle;
}

async function env(redisUrl: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  sim ??= await startSimulator({ port: 0 });
  return { ...workerEnv(sim, uniquePrefix('persistence'), { REDIS_URL: redisUrl }), LOG_LEVEL: 'info', ...extra };
}

interface Line {
  level: string;
  msg: string;
  [field: string]: unknown;
}

/**
 * BullMQ's own warning, printed (not as JSON) on each of its connections to a Redis whose policy is not
 * noeviction: only where the test runs the worker against one.
 */
const BULLMQ_EVICTION_WARNING = /^IMPORTANT! Eviction policy is [a-z-]+\. It should be "noeviction"$/;

/** Every JSON log line the worker printed (anything else fails the parse, and the test). */
function lines(worker: WorkerProcess, { bullmqEvictionWarnings = false } = {}): Line[] {
  return worker
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '' && !(bullmqEvictionWarnings && BULLMQ_EVICTION_WARNING.test(line)))
    .map((line) => JSON.parse(line) as Line);
}

/** Lines at warn or above. */
const warnings = (all: Line[]) => all.filter((line) => ['warn', 'error', 'fatal'].includes(line.level));

/**
 * Exits 78 before 'worker started'; exactly one line names `variable`, a fatal one, and it is the last.
 * Returns that line.
 */
async function refuses(worker: WorkerProcess, variable: string): Promise<Line> {
  const exit = await worker.waitForExit(30_000);
  expect(exit.code, worker.output()).toBe(EX_CONFIG);
  const all = lines(worker);
  const naming = all.filter((line) => JSON.stringify(line).includes(variable));
  expect(naming).toHaveLength(1);
  expect(naming[0]).toMatchObject({ level: 'fatal' });
  expect(all.at(-1)).toBe(naming[0]);
  expect(all.some((line) => line.msg === 'worker started')).toBe(false);
  return naming[0]!;
}

/** Starts, is sent SIGTERM once 'worker started', exits 0; returns its log lines. */
async function startsAndStops(worker: WorkerProcess, options: Parameters<typeof lines>[1] = {}): Promise<Line[]> {
  await worker.waitForLog('worker started', 30_000);
  worker.kill('SIGTERM');
  const exit = await worker.waitForExit(20_000);
  expect(exit.code, worker.output()).toBe(0);
  return lines(worker, options);
}

afterEach(killAllWorkers);
afterAll(async () => {
  await sim?.close();
  for (const stop of stoppers) await stop();
  for (const handle of servers) await handle.stop();
});

describe('the worker process, its Redis persistence and eviction policy', () => {
  it('no AOF and no RDB saves: exit 78, one fatal line naming the risk and REDIS_ALLOW_VOLATILE', async () => {
    const volatile = await server({ appendonly: false });
    const worker = spawnWorker(await env(volatile.url), { name: 'persistence-refused' });
    const refusal = await refuses(worker, 'REDIS_ALLOW_VOLATILE');
    expect(refusal.msg).toMatch(/no data on disk/);
    expect(refusal.msg).toMatch(/sent again/);
  }, 60_000);

  it('the same Redis with REDIS_ALLOW_VOLATILE=1: starts with one warn line, SIGTERM exits 0', async () => {
    const volatile = await server({ appendonly: false });
    const worker = spawnWorker(await env(volatile.url, { REDIS_ALLOW_VOLATILE: '1' }), { name: 'persistence-allowed' });
    const all = await startsAndStops(worker);
    const warned = warnings(all);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(/no data on disk.*REDIS_ALLOW_VOLATILE/);
  }, 60_000);

  it('AOF on: starts with no warning', async () => {
    const persistent = await server({ appendonly: true });
    const worker = spawnWorker(await env(persistent.url), { name: 'persistence-aof' });
    expect(warnings(await startsAndStops(worker))).toEqual([]);
  }, 60_000);

  it('the default private redis-server is persistent (the tests, demo and benchmark use it)', async () => {
    const byDefault = await server({});
    const worker = spawnWorker(await env(byDefault.url), { name: 'persistence-default' });
    expect(warnings(await startsAndStops(worker))).toEqual([]);
  }, 60_000);

  it('CONFIG disabled (a managed service) and AOF off: unknown, one warn line, starts', async () => {
    const hidden = await server({ appendonly: false, extraArgs: ['--rename-command', 'CONFIG', ''] });
    const probe = new Redis(hidden.url);
    try {
      await expect(probe.config('GET', 'save')).rejects.toThrow(/unknown command/i);
    } finally {
      probe.disconnect();
    }
    const worker = spawnWorker(await env(hidden.url), { name: 'persistence-unknown' });
    const warned = warnings(await startsAndStops(worker));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.msg).toMatch(/could not tell/);
    expect(JSON.stringify(warned[0])).toMatch(/CONFIG GET save/);
  }, 60_000);

  it('RDB saves but no AOF (snapshot-only): exit 78, one fatal line saying why and naming REDIS_ALLOW_VOLATILE', async () => {
    const snapshots = await server({ appendonly: false, extraArgs: ['--save', '60 1'] });
    const worker = spawnWorker(await env(snapshots.url), { name: 'persistence-snapshot-only' });
    const refusal = await refuses(worker, 'REDIS_ALLOW_VOLATILE');
    expect(refusal).toMatchObject({ msg: SNAPSHOT_ONLY_REFUSAL, snapshotOnly: [`127.0.0.1:${snapshots.port}`] });
    expect(refusal.msg).toMatch(/snapshot-only loses the writes since the last snapshot/);
    expect(refusal.msg).toMatch(/enable appendonly/);
  }, 60_000);

  it('the same snapshot-only Redis with REDIS_ALLOW_VOLATILE=1: starts with one warn line', async () => {
    const snapshots = await server({ appendonly: false, extraArgs: ['--save', '60 1'] });
    const worker = spawnWorker(await env(snapshots.url, { REDIS_ALLOW_VOLATILE: '1' }), { name: 'persistence-snapshot-allowed' });
    const warned = warnings(await startsAndStops(worker));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn' });
    expect(warned[0]!.msg).toMatch(/RDB snapshots but no AOF.*REDIS_ALLOW_VOLATILE/);
  }, 60_000);

  it('maxmemory-policy allkeys-lru: exit 78, one fatal line naming the risk and REDIS_ALLOW_EVICTION', async () => {
    const evicting = await server({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] });
    const worker = spawnWorker(await env(evicting.url), { name: 'eviction-refused' });
    const refusal = await refuses(worker, 'REDIS_ALLOW_EVICTION');
    expect(refusal).toMatchObject({ msg: EVICTION_REFUSAL, evicting: [{ node: `127.0.0.1:${evicting.port}`, policy: 'allkeys-lru' }] });
    expect(refusal.msg).toMatch(/tombstone/);
  }, 60_000);

  it('an evicting policy with CONFIG disabled is still read (INFO memory) and refused', async () => {
    const hidden = await server({ extraArgs: ['--maxmemory-policy', 'volatile-lru', '--rename-command', 'CONFIG', ''] });
    const worker = spawnWorker(await env(hidden.url), { name: 'eviction-hidden-config' });
    const exit = await worker.waitForExit(30_000);
    expect(exit.code, worker.output()).toBe(EX_CONFIG);
    const fatal = lines(worker).filter((line) => line.level === 'fatal');
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatchObject({ msg: EVICTION_REFUSAL, evicting: [{ node: `127.0.0.1:${hidden.port}`, policy: 'volatile-lru' }] });
  }, 60_000);

  it('the same evicting Redis with REDIS_ALLOW_EVICTION=1: starts with one warn line', async () => {
    const evicting = await server({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] });
    const worker = spawnWorker(await env(evicting.url, { REDIS_ALLOW_EVICTION: '1' }), { name: 'eviction-allowed' });
    const warned = warnings(await startsAndStops(worker, { bullmqEvictionWarnings: true }));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', evicting: [{ node: `127.0.0.1:${evicting.port}`, policy: 'allkeys-lru' }] });
    expect(warned[0]!.msg).toMatch(/may evict keys.*REDIS_ALLOW_EVICTION/);
  }, 60_000);

  it('no AOF and an evicting policy: both are said (two fatal lines) before exit 78', async () => {
    const both = await server({ appendonly: false, extraArgs: ['--save', '60 1', '--maxmemory-policy', 'allkeys-lfu'] });
    const worker = spawnWorker(await env(both.url), { name: 'persistence-and-eviction' });
    const exit = await worker.waitForExit(30_000);
    expect(exit.code, worker.output()).toBe(EX_CONFIG);
    const fatal = lines(worker, { bullmqEvictionWarnings: true }).filter((line) => line.level === 'fatal');
    expect(fatal.map((line) => line.msg).sort()).toEqual([SNAPSHOT_ONLY_REFUSAL, EVICTION_REFUSAL].sort());
  }, 60_000);
});

/** A logger writing to memory, and its lines parsed. */
function memoryLogger() {
  const text: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text.push(chunk.toString());
      callback();
    },
  });
  const logger = createLogger({ level: 'debug' }, stream);
  return {
    logger,
    lines: () =>
      text
        .join('')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Line),
  };
}

function redisConfig(overrides: Partial<Config['redis']>): Config['redis'] {
  return {
    url: 'redis://127.0.0.1:6379',
    clusterNodes: undefined,
    sentinel: undefined,
    minReplicas: 0,
    replicaTimeoutMs: 1_000,
    connectTimeoutMs: 60_000,
    allowVolatile: false,
    allowEviction: false,
    ...overrides,
  };
}

describe('checkRedisSettings on a Cluster and through Sentinel', () => {
  let cluster: RedisClusterHandle | undefined;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('a Cluster is judged by every master: nothing on disk, snapshot-only and evicting each refuse', async () => {
    cluster = await startRedisCluster({ extraArgs: ['--appendonly', 'no'] });
    const clusterNodes = cluster.nodes.map(({ host, port }) => ({ host, port }));
    const [, second, third] = cluster.servers.map((node) => `127.0.0.1:${node.port}`);
    const configSet = async (index: number, name: string, value: string) => {
      const client = new Redis(cluster!.servers[index]!.url);
      try {
        await client.config('SET', name, value);
      } finally {
        client.disconnect();
      }
    };
    const check = async (overrides: Partial<Config['redis']> = {}) => {
      const log = memoryLogger();
      const result = await checkRedisSettings(redisConfig({ clusterNodes, ...overrides }), log.logger);
      return { result, fatal: log.lines().filter((line) => line.level === 'fatal'), warned: warnings(log.lines()) };
    };

    const allVolatile = await check();
    expect(allVolatile.result.persistence).toBe('refused');
    expect(allVolatile.fatal).toHaveLength(1);
    expect(allVolatile.fatal[0]!.msg).toBe(VOLATILE_REFUSAL);
    expect(allVolatile.fatal[0]!.volatile).toHaveLength(3);

    // One master persistent is not enough: every master must be. Only masters count; the three
    // servers are the three masters (no replicas).
    await configSet(0, 'appendonly', 'yes');
    await configSet(1, 'save', '60 1');
    const mixed = await check();
    expect(mixed.result.persistence).toBe('refused');
    expect(mixed.fatal).toHaveLength(1);
    expect(mixed.fatal[0]).toMatchObject({ msg: VOLATILE_REFUSAL, volatile: [third], snapshotOnly: [second] });

    await configSet(2, 'appendonly', 'yes');
    const snapshotOnly = await check();
    expect(snapshotOnly.result.persistence).toBe('refused');
    expect(snapshotOnly.fatal).toEqual([expect.objectContaining({ msg: SNAPSHOT_ONLY_REFUSAL, snapshotOnly: [second] })]);

    await configSet(1, 'appendonly', 'yes');
    const persistent = await check();
    expect(persistent.result).toEqual({ persistence: 'persistent', eviction: 'noeviction' });
    expect(persistent.warned).toEqual([]);

    await configSet(1, 'maxmemory-policy', 'volatile-ttl');
    const evicting = await check();
    expect(evicting.result).toEqual({ persistence: 'persistent', eviction: 'refused' });
    expect(evicting.fatal).toEqual([
      expect.objectContaining({ msg: EVICTION_REFUSAL, evicting: [{ node: second, policy: 'volatile-ttl' }] }),
    ]);
    const allowed = await check({ allowEviction: true });
    expect(allowed.result.eviction).toBe('eviction-allowed');
    expect(allowed.warned).toHaveLength(1);
    expect(allowed.warned[0]!.msg).toMatch(/REDIS_ALLOW_EVICTION/);
  }, 60_000);

  it('Sentinel: a persistent master starts, a replica it lists that keeps too little or evicts is a warn line', async () => {
    const primary = await server({ appendonly: true });
    const replica = await server({ appendonly: false, extraArgs: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const sentinel = await startSentinel(primary.port);
    stoppers.push(() => sentinel.stop());
    const ask = new Redis({ port: sentinel.port });
    try {
      await until(
        'the Sentinel lists the replica',
        15_000,
        async () => {
          const replicas = (await ask.call('SENTINEL', 'REPLICAS', 'mymaster')) as string[][];
          return replicas.some((fields) => fields.includes(String(replica.port)) && !fields.join(' ').includes('disconnected'))
            ? true
            : undefined;
        },
        100,
      );
    } finally {
      ask.disconnect();
    }
    const sentinelConfig = {
      nodes: [{ host: '127.0.0.1', port: sentinel.port }],
      master: 'mymaster',
      sentinelPassword: undefined,
      password: undefined,
    };
    const log = memoryLogger();
    expect(await checkRedisSettings(redisConfig({ sentinel: sentinelConfig }), log.logger)).toEqual({
      persistence: 'persistent',
      eviction: 'noeviction',
    });
    const warned = warnings(log.lines());
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', replica: `127.0.0.1:${replica.port}` });
    expect(warned[0]!.msg).toMatch(/replica keeps no data on disk/);

    // The replica snapshot-only and evicting: two warn lines, still no refusal.
    const admin = new Redis(replica.url);
    try {
      await admin.config('SET', 'save', '60 1');
      await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    } finally {
      admin.disconnect();
    }
    const again = memoryLogger();
    expect(await checkRedisSettings(redisConfig({ sentinel: sentinelConfig }), again.logger)).toEqual({
      persistence: 'persistent',
      eviction: 'noeviction',
    });
    const replicaWarnings = warnings(again.lines());
    expect(replicaWarnings.map((line) => line.msg)).toEqual([
      expect.stringMatching(/replica keeps RDB snapshots but no AOF/),
      expect.stringMatching(/replica may evict keys/),
    ]);
    expect(replicaWarnings[1]).toMatchObject({ replica: `127.0.0.1:${replica.port}`, policy: 'allkeys-lru' });
  }, 60_000);
});
