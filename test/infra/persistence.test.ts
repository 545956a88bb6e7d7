/**
 * Start-up refuses a Redis that keeps nothing on disk (src/startup.ts checkPersistence): after its
 * restart it would come back empty, the worker would have forgotten the transfers it already sent and
 * could send them again. The real worker process against real redis-server processes:
 * - no AOF, no RDB saves: exit 78 and one line naming the risk and REDIS_ALLOW_VOLATILE;
 * - the same with REDIS_ALLOW_VOLATILE=1: starts (one warn line) and stops cleanly;
 * - AOF on: starts, no warning;
 * - CONFIG disabled (as managed services do) and AOF off: unknown, one warn line, starts.
 * And the check itself in this process for a Cluster (a volatile master refuses) and for Sentinel (a
 * volatile replica is one warn line, not a refusal).
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { EX_CONFIG, type Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { checkPersistence } from '../../src/startup.ts';
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

/** Every JSON log line the worker printed (anything else fails the parse, and the test). */
function lines(worker: WorkerProcess): Line[] {
  return worker
    .output()
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Line);
}

/** Lines at warn or above. */
const warnings = (all: Line[]) => all.filter((line) => ['warn', 'error', 'fatal'].includes(line.level));

/** Starts, is sent SIGTERM once 'worker started', exits 0; returns its log lines. */
async function startsAndStops(worker: WorkerProcess): Promise<Line[]> {
  await worker.waitForLog('worker started', 30_000);
  worker.kill('SIGTERM');
  const exit = await worker.waitForExit(20_000);
  expect(exit.code, worker.output()).toBe(0);
  return lines(worker);
}

afterEach(killAllWorkers);
afterAll(async () => {
  await sim?.close();
  for (const stop of stoppers) await stop();
  for (const handle of servers) await handle.stop();
});

describe('the worker process and its Redis persistence', () => {
  it('no AOF and no RDB saves: exit 78, one fatal line naming the risk and REDIS_ALLOW_VOLATILE', async () => {
    const volatile = await server({ appendonly: false });
    const worker = spawnWorker(await env(volatile.url), { name: 'persistence-refused' });
    const exit = await worker.waitForExit(30_000);
    expect(exit.code, worker.output()).toBe(EX_CONFIG);
    const all = lines(worker);
    const naming = all.filter((line) => JSON.stringify(line).includes('REDIS_ALLOW_VOLATILE'));
    expect(naming).toHaveLength(1);
    expect(naming[0]).toMatchObject({ level: 'fatal' });
    expect(naming[0]!.msg).toMatch(/no data on disk/);
    expect(naming[0]!.msg).toMatch(/sent again/);
    expect(all.at(-1)).toBe(naming[0]);
    expect(all.some((line) => line.msg === 'worker started')).toBe(false);
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
    ...overrides,
  };
}

describe('checkPersistence on a Cluster and through Sentinel', () => {
  let cluster: RedisClusterHandle | undefined;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('a Cluster whose masters keep nothing on disk is refused; with AOF it is persistent', async () => {
    cluster = await startRedisCluster({ extraArgs: ['--appendonly', 'no'] });
    const clusterNodes = cluster.nodes.map(({ host, port }) => ({ host, port }));
    const refused = memoryLogger();
    expect(await checkPersistence(redisConfig({ clusterNodes }), refused.logger)).toBe('refused');
    const fatal = refused.lines().filter((line) => line.level === 'fatal');
    expect(fatal).toHaveLength(1);
    expect(fatal[0]!.msg).toContain('REDIS_ALLOW_VOLATILE');
    expect(fatal[0]!.volatile).toHaveLength(3);

    // One master persistent is not enough: every master must be.
    const first = new Redis(cluster.servers[0]!.url);
    try {
      await first.config('SET', 'appendonly', 'yes');
    } finally {
      first.disconnect();
    }
    const oneLeft = memoryLogger();
    // Only masters count; the three servers are the three masters (no replicas).
    expect(await checkPersistence(redisConfig({ clusterNodes }), oneLeft.logger)).toBe('refused');
    expect(oneLeft.lines().find((line) => line.level === 'fatal')!.volatile).toHaveLength(2);

    for (const node of cluster.servers) {
      const client = new Redis(node.url);
      try {
        await client.config('SET', 'appendonly', 'yes');
      } finally {
        client.disconnect();
      }
    }
    const persistent = memoryLogger();
    expect(await checkPersistence(redisConfig({ clusterNodes }), persistent.logger)).toBe('persistent');
    expect(warnings(persistent.lines())).toEqual([]);
  }, 60_000);

  it('Sentinel: a persistent master starts, a volatile replica it lists is one warn line', async () => {
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
    expect(await checkPersistence(redisConfig({ sentinel: sentinelConfig }), log.logger)).toBe('persistent');
    const warned = warnings(log.lines());
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', replica: `127.0.0.1:${replica.port}` });
    expect(warned[0]!.msg).toMatch(/replica keeps no data on disk/);
  }, 60_000);
});
