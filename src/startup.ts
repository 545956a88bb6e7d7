import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { LogController, type FastifyInstance } from 'fastify';
import { Cluster, Redis } from 'ioredis';
import type { Config } from './config/config.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './metrics.ts';
import { createRedis } from './redis.ts';

/** Between two attempts to reach Redis at start-up (one log line each). */
export const REDIS_CONNECT_RETRY_MS = 2_000;
/** One attempt: connect and PING, at most this long. */
const REDIS_PROBE_TIMEOUT_MS = 3_000;

/**
 * The HTTP server while the worker starts: `/healthz` 200 (the process is alive), `/readyz` 503 and
 * `/metrics` with `custody_worker_ready 0` and the process metrics, so probes and scrapes get an answer
 * while Redis is not reachable yet. Replaced by the full server (same port) once the worker runs.
 */
export function createStartingServer(metrics: Metrics): FastifyInstance {
  const server = Fastify({ logController: new LogController({ disableRequestLogging: true }) });
  server.get('/healthz', async () => ({ status: 'ok' }));
  server.get('/readyz', async (_request, reply) => reply.code(503).send({ status: 'starting', redis: false, workers: false }));
  server.get('/metrics', async (_request, reply) => {
    metrics.ready.set(0);
    return reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  return server;
}

/** Why the HTTP server could not listen, in an operator's words (undefined: not a listen failure we know). */
export function listenFailure(error: unknown, host: string, port: number): string | undefined {
  const code = (error as { code?: string } | null)?.code;
  if (code === 'EADDRINUSE') return `HTTP port ${port} on ${host} is already in use (HTTP_PORT, HTTP_HOST)`;
  if (code === 'EACCES') return `not allowed to listen on port ${port} (HTTP_PORT)`;
  if (code === 'EADDRNOTAVAIL') return `HTTP_HOST ${host} is not an address of this machine`;
  return undefined;
}

/** One connection attempt and PING; the error's message when it failed. */
async function probeRedis(redis: Config['redis']): Promise<string | undefined> {
  const client = createRedis(redis, 'custody-worker-probe', {
    maxRetriesPerRequest: 0,
    connectTimeout: REDIS_PROBE_TIMEOUT_MS,
    retryStrategy: () => null,
  });
  // Reported once per attempt by the caller, never as an unhandled 'error' event. The connection's own
  // error says why (ECONNREFUSED, ENOTFOUND, NOAUTH …); the PING's only says the connection closed.
  let cause: string | undefined;
  client.on('error', (error: Error) => {
    cause ??= error.message;
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.ping(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer to PING within ${REDIS_PROBE_TIMEOUT_MS} ms`)), REDIS_PROBE_TIMEOUT_MS);
      }),
    ]);
    return undefined;
  } catch (error) {
    return (cause ?? (error as Error).message).slice(0, 200);
  } finally {
    clearTimeout(timer);
    client.disconnect();
  }
}

/**
 * Waits until Redis answers, logging one line per attempt. Resolves true when it did; false once
 * REDIS_CONNECT_TIMEOUT passed without an answer (0: never gives up).
 */
export async function waitForRedis(redis: Config['redis'], logger: Logger): Promise<boolean> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    const error = await probeRedis(redis);
    if (error === undefined) {
      if (attempt > 1) logger.info({ attempts: attempt }, 'Redis reachable');
      return true;
    }
    const waitedMs = Date.now() - started;
    if (redis.connectTimeoutMs > 0 && waitedMs + REDIS_CONNECT_RETRY_MS > redis.connectTimeoutMs) {
      logger.fatal(
        { attempts: attempt, waitedMs, error },
        `Redis unreachable for REDIS_CONNECT_TIMEOUT (${redis.connectTimeoutMs} ms): exiting`,
      );
      return false;
    }
    logger.warn({ attempt, waitedMs, error }, 'waiting for Redis');
    await sleep(REDIS_CONNECT_RETRY_MS);
  }
}

/** Each step of the persistence check (connect, INFO, CONFIG GET, SENTINEL REPLICAS), at most this long. */
const PERSISTENCE_STEP_TIMEOUT_MS = 3_000;

/** What a node's own settings say about a restart: its data comes back, comes back empty, or cannot be told. */
export type Persistence = 'persistent' | 'volatile' | 'unknown';

/** What start-up makes of the primary (or the Cluster's masters). */
export type PersistenceCheck = 'persistent' | 'volatile-allowed' | 'unknown' | 'refused';

export interface PersistenceFacts {
  /** `aof_enabled` of `INFO persistence`; undefined when the field is missing. */
  aofEnabled: boolean | undefined;
  /** The value of `CONFIG GET save` ('' = no RDB saves); undefined when CONFIG is disabled or failed. */
  saveConfig: string | undefined;
}

/**
 * AOF on, or any RDB save point: the data survives a restart (up to the last fsync or save). Neither,
 * and both known: a restart empties it. Anything hidden (a managed service renames CONFIG or drops a
 * field) is unknown, never guessed to be volatile.
 */
export function judgePersistence({ aofEnabled, saveConfig }: PersistenceFacts): Persistence {
  if (aofEnabled === true) return 'persistent';
  if (saveConfig !== undefined && saveConfig.trim() !== '') return 'persistent';
  if (aofEnabled === false && saveConfig !== undefined) return 'volatile';
  return 'unknown';
}

/** `aof_enabled` from the text of `INFO persistence` (or `INFO`), undefined when absent. */
export function parseAofEnabled(info: string): boolean | undefined {
  const value = /^aof_enabled:(\d+)\r?$/m.exec(info)?.[1];
  return value === undefined ? undefined : value !== '0';
}

/** The line start-up logs (fatal) when it refuses a volatile primary. */
export const VOLATILE_REFUSAL =
  'redis keeps no data on disk (no AOF, no RDB saves): after a restart it comes back empty and transfers already sent could be sent again; enable persistence or set REDIS_ALLOW_VOLATILE=1';

interface NodePersistence {
  /** host:port, never a URL (it may carry a password). */
  node: string;
  persistence: Persistence;
  /** Why it is unknown. */
  reason?: string;
}

function within<T>(task: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    task,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer to ${what} within ${PERSISTENCE_STEP_TIMEOUT_MS} ms`)),
        PERSISTENCE_STEP_TIMEOUT_MS,
      );
    }),
  ]).finally(() => clearTimeout(timer));
}

const short = (error: unknown) => String((error as Error)?.message ?? error).slice(0, 200);

/** Reads one node's persistence settings; unknown (with the reason) when INFO or CONFIG does not answer. */
async function readNode(client: Redis, node: string): Promise<NodePersistence> {
  let aofEnabled: boolean | undefined;
  let saveConfig: string | undefined;
  const reasons: string[] = [];
  try {
    aofEnabled = parseAofEnabled(await within(client.info('persistence'), 'INFO persistence'));
    if (aofEnabled === undefined) reasons.push('INFO persistence has no aof_enabled');
  } catch (error) {
    reasons.push(`INFO persistence: ${short(error)}`);
  }
  if (aofEnabled !== true) {
    try {
      const reply = await within(client.config('GET', 'save') as Promise<unknown>, 'CONFIG GET save');
      if (Array.isArray(reply) && reply[0] === 'save' && typeof reply[1] === 'string') saveConfig = reply[1];
      else reasons.push('CONFIG GET save returned no value');
    } catch (error) {
      reasons.push(`CONFIG GET save: ${short(error)}`);
    }
  }
  const persistence = judgePersistence({ aofEnabled, saveConfig });
  return persistence === 'unknown' ? { node, persistence, reason: reasons.join('; ') || 'not told' } : { node, persistence };
}

const quickTuning = {
  maxRetriesPerRequest: 0,
  connectTimeout: PERSISTENCE_STEP_TIMEOUT_MS,
  retryStrategy: () => null,
} as const;

/** The primary's persistence, or each master's on a Cluster. */
async function readPrimaries(redis: Config['redis']): Promise<NodePersistence[]> {
  const client = createRedis(redis, 'custody-worker-persistence', quickTuning);
  client.on('error', () => undefined); // the command's own failure says what went wrong
  try {
    if (client instanceof Cluster) {
      await within(client.ping(), 'PING');
      const masters = client.nodes('master');
      if (masters.length === 0) throw new Error('the Cluster lists no master');
      return await Promise.all(masters.map((node) => readNode(node, `${node.options.host}:${node.options.port}`)));
    }
    await within(client.ping(), 'PING');
    const node = redis.sentinel ? `master ${redis.sentinel.master}` : new URL(redis.url).host;
    return [await readNode(client, node)];
  } finally {
    client.disconnect();
  }
}

/** The replicas a Sentinel lists for the master, as host:port (the first Sentinel that answers). */
async function sentinelReplicas(sentinel: NonNullable<Config['redis']['sentinel']>): Promise<{ host: string; port: number }[]> {
  let lastError: unknown;
  for (const { host, port } of sentinel.nodes) {
    const client = new Redis({
      host,
      port,
      ...(sentinel.sentinelPassword ? { password: sentinel.sentinelPassword } : {}),
      connectionName: 'custody-worker-persistence',
      ...quickTuning,
    });
    client.on('error', () => undefined);
    try {
      const reply = (await within(client.call('SENTINEL', 'REPLICAS', sentinel.master), 'SENTINEL REPLICAS')) as string[][];
      return reply
        .map(
          (fields) =>
            Object.fromEntries(fields.flatMap((value, i) => (i % 2 === 0 ? [[value, fields[i + 1]]] : []))) as Record<string, string>,
        )
        .filter((replica) => !/s_down|o_down|disconnected/.test(replica.flags ?? ''))
        .map((replica) => ({ host: replica.ip ?? '', port: Number(replica.port) }));
    } catch (error) {
      lastError = error;
    } finally {
      client.disconnect();
    }
  }
  throw new Error(`no Sentinel listed the replicas: ${short(lastError)}`);
}

async function readReplica(host: string, port: number, password: string | undefined): Promise<NodePersistence> {
  const node = `${host}:${port}`;
  const client = new Redis({ host, port, ...(password ? { password } : {}), connectionName: 'custody-worker-persistence', ...quickTuning });
  client.on('error', () => undefined);
  try {
    return await readNode(client, node);
  } finally {
    client.disconnect();
  }
}

/**
 * Start-up refuses a primary that keeps nothing on disk: after its restart it would come back empty,
 * with no record of the transfers already sent, and they could be sent again. Reads `INFO persistence`
 * (`aof_enabled`) and `CONFIG GET save` on the primary (on a Cluster: every master) over short-lived
 * connections. Volatile: one fatal line and 'refused', unless REDIS_ALLOW_VOLATILE (one warn line).
 * What cannot be read (CONFIG renamed by a managed service, a field missing, no answer) is 'unknown':
 * one warn line, and the worker starts. With Sentinels, each replica they list is read too: one warn
 * line per volatile replica (not a refusal: it holds nothing of its own while the primary lives, but
 * once promoted by a failover it is the primary that a restart would empty).
 */
export async function checkPersistence(redis: Config['redis'], logger: Logger): Promise<PersistenceCheck> {
  let primaries: NodePersistence[];
  try {
    primaries = await readPrimaries(redis);
  } catch (error) {
    primaries = [{ node: redis.clusterNodes ? 'cluster' : 'primary', persistence: 'unknown', reason: short(error) }];
  }
  const volatile = primaries.filter((node) => node.persistence === 'volatile').map((node) => node.node);
  const unknown = primaries.filter((node) => node.persistence === 'unknown');
  if (volatile.length > 0 && !redis.allowVolatile) {
    logger.fatal({ volatile }, VOLATILE_REFUSAL);
    return 'refused';
  }
  let result: PersistenceCheck;
  if (volatile.length > 0) {
    logger.warn(
      { volatile },
      'redis keeps no data on disk (no AOF, no RDB saves), starting anyway as REDIS_ALLOW_VOLATILE is set: after a restart transfers already sent could be sent again',
    );
    result = 'volatile-allowed';
  } else if (unknown.length > 0) {
    logger.warn(
      { unknown: unknown.map(({ node, reason }) => ({ node, reason })) },
      'could not tell whether redis keeps its data on disk (AOF or RDB saves), starting; make sure it does',
    );
    result = 'unknown';
  } else {
    logger.debug({ nodes: primaries.map((node) => node.node) }, 'redis keeps its data on disk');
    result = 'persistent';
  }
  if (redis.sentinel) await checkSentinelReplicas(redis.sentinel, logger);
  return result;
}

/** One warn line per volatile replica the Sentinels list; replicas that cannot be read, one info line each. */
async function checkSentinelReplicas(sentinel: NonNullable<Config['redis']['sentinel']>, logger: Logger): Promise<void> {
  let replicas: { host: string; port: number }[];
  try {
    replicas = await sentinelReplicas(sentinel);
  } catch (error) {
    logger.info({ error: short(error) }, "could not read the replicas' persistence");
    return;
  }
  const reports = await Promise.all(replicas.map(({ host, port }) => readReplica(host, port, sentinel.password)));
  for (const report of reports) {
    if (report.persistence === 'volatile') {
      logger.warn(
        { replica: report.node },
        'redis replica keeps no data on disk (no AOF, no RDB saves): promoted after a failover and then restarted, it would come back empty',
      );
    } else if (report.persistence === 'unknown') {
      logger.info({ replica: report.node, reason: report.reason }, 'could not tell whether this redis replica keeps its data on disk');
    }
  }
}

/** `task`, given at most `ms`; its failure or slowness is logged, never thrown (used on the way out). */
export async function bounded(what: string, task: () => Promise<unknown>, ms: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(resolve, ms, 'timeout');
  });
  try {
    const outcome = await Promise.race([task().then(() => 'done' as const), timeout]);
    if (outcome === 'timeout') logger.warn({ timeoutMs: ms }, `${what} did not finish in time, going on`);
  } catch (err) {
    logger.warn({ err }, `${what} failed, going on`);
  } finally {
    clearTimeout(timer);
  }
}
