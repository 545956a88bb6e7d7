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

/** Each step of the start-up check of Redis (connect, INFO, CONFIG GET, SENTINEL REPLICAS), at most this long. */
const PERSISTENCE_STEP_TIMEOUT_MS = 3_000;

/**
 * What a node's own settings say about a restart: every acknowledged write comes back (AOF), only the
 * last RDB snapshot does, nothing does, or it cannot be told.
 */
export type Persistence = 'persistent' | 'snapshot-only' | 'volatile' | 'unknown';

/** What start-up makes of the primary's persistence (or the Cluster's masters'). */
export type PersistenceCheck = 'persistent' | 'volatile-allowed' | 'unknown' | 'refused';

export interface PersistenceFacts {
  /** `aof_enabled` of `INFO persistence`; undefined when the field is missing. */
  aofEnabled: boolean | undefined;
  /** The value of `CONFIG GET save` ('' = no RDB saves); undefined when CONFIG is disabled or failed. */
  saveConfig: string | undefined;
}

/**
 * AOF on: the data survives a restart (up to the last fsync). AOF off, and the save points known: with
 * RDB saves a restart brings back the last snapshot and loses every write since (up to a save
 * interval: an older ledger, in which a transfer already sent may look unsent again), with none it
 * comes back empty. Anything hidden (a managed service renames CONFIG or drops a field) is unknown,
 * never guessed: save points with AOF unknown may well have AOF on.
 */
export function judgePersistence({ aofEnabled, saveConfig }: PersistenceFacts): Persistence {
  if (aofEnabled === true) return 'persistent';
  if (aofEnabled === false && saveConfig !== undefined) return saveConfig.trim() === '' ? 'volatile' : 'snapshot-only';
  return 'unknown';
}

/** What `maxmemory-policy` says: no key is ever evicted, keys may be, or it cannot be told. */
export type Eviction = 'noeviction' | 'evicting' | 'unknown';

/** What start-up makes of the primary's eviction policy (or the Cluster's masters'). */
export type EvictionCheck = 'noeviction' | 'eviction-allowed' | 'unknown' | 'refused';

/**
 * `noeviction` alone never drops a key: at `maxmemory` Redis refuses writes instead (OOM, nothing
 * lost). Every other policy, the `volatile-*` ones too, may evict keys that carry a TTL, which is what
 * tombstones, ended records and cancel records are; the policy is judged, not `maxmemory`, which an
 * operator can set at run time. Hidden (undefined or empty): unknown.
 */
export function judgeEviction(policy: string | undefined): Eviction {
  if (policy === undefined || policy.trim() === '') return 'unknown';
  return policy.trim().toLowerCase() === 'noeviction' ? 'noeviction' : 'evicting';
}

/** A field of an `INFO` section's text (CRLF lines), undefined when absent. */
function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info)?.[1];
}

/** `aof_enabled` from the text of `INFO persistence` (or `INFO`), undefined when absent. */
export function parseAofEnabled(info: string): boolean | undefined {
  const value = infoField(info, 'aof_enabled');
  return value === undefined || !/^\d+$/.test(value) ? undefined : value !== '0';
}

/** `maxmemory_policy` from the text of `INFO memory` (or `INFO`), undefined when absent. */
export function parseMaxmemoryPolicy(info: string): string | undefined {
  return infoField(info, 'maxmemory_policy') || undefined;
}

/** The line start-up logs (fatal) when it refuses a primary that keeps nothing on disk. */
export const VOLATILE_REFUSAL =
  'redis keeps no data on disk (no AOF, no RDB saves): after a restart it comes back empty and transfers already sent could be sent again; enable persistence or set REDIS_ALLOW_VOLATILE=1';

/** The line start-up logs (fatal) when it refuses a primary that keeps RDB snapshots only. */
export const SNAPSHOT_ONLY_REFUSAL =
  'redis keeps RDB snapshots but no AOF: snapshot-only loses the writes since the last snapshot, so a restart brings back an older ledger and transfers already sent could be sent again; enable appendonly or set REDIS_ALLOW_VOLATILE=1';

/** The line start-up logs (fatal) when it refuses a primary whose policy may evict keys. */
export const EVICTION_REFUSAL =
  'redis may evict keys (maxmemory-policy is not noeviction): an evicted tombstone, ended record or cancel record makes an ended or cancelled transfer unknown again, and a job for it could be sent; set maxmemory-policy noeviction or REDIS_ALLOW_EVICTION=1';

interface NodeSettings {
  /** host:port, never a URL (it may carry a password). */
  node: string;
  persistence: Persistence;
  /** Why the persistence is unknown. */
  persistenceReason?: string;
  eviction: Eviction;
  /** `maxmemory-policy`, when it was read. */
  policy?: string;
  /** Why the eviction policy is unknown. */
  evictionReason?: string;
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

/** One `INFO <section>`; undefined, and why in `reasons`, when it fails. */
async function readInfo(client: Redis, section: string, reasons: string[]): Promise<string | undefined> {
  try {
    return await within(client.info(section), `INFO ${section}`);
  } catch (error) {
    reasons.push(`INFO ${section}: ${short(error)}`);
    return undefined;
  }
}

/** One `CONFIG GET <name>`; undefined, and why in `reasons`, when CONFIG is renamed, fails or has no value. */
async function configGet(client: Redis, name: string, reasons: string[]): Promise<string | undefined> {
  try {
    const reply = await within(client.config('GET', name) as Promise<unknown>, `CONFIG GET ${name}`);
    if (Array.isArray(reply) && reply[0] === name && typeof reply[1] === 'string') return reply[1];
    reasons.push(`CONFIG GET ${name} returned no value`);
  } catch (error) {
    reasons.push(`CONFIG GET ${name}: ${short(error)}`);
  }
  return undefined;
}

/** Reads one node's persistence and eviction policy; each unknown (with the reason) when not told. */
async function readNode(client: Redis, node: string): Promise<NodeSettings> {
  const persistenceReasons: string[] = [];
  const persistenceInfo = await readInfo(client, 'persistence', persistenceReasons);
  const aofEnabled = persistenceInfo === undefined ? undefined : parseAofEnabled(persistenceInfo);
  if (persistenceInfo !== undefined && aofEnabled === undefined) persistenceReasons.push('INFO persistence has no aof_enabled');
  const saveConfig = aofEnabled === true ? undefined : await configGet(client, 'save', persistenceReasons);
  const persistence = judgePersistence({ aofEnabled, saveConfig });

  const evictionReasons: string[] = [];
  let policy = await configGet(client, 'maxmemory-policy', evictionReasons);
  if (policy === undefined) {
    // A managed service that renames CONFIG still lists the policy in INFO memory.
    const memoryInfo = await readInfo(client, 'memory', evictionReasons);
    policy = memoryInfo === undefined ? undefined : parseMaxmemoryPolicy(memoryInfo);
    if (memoryInfo !== undefined && policy === undefined) evictionReasons.push('INFO memory has no maxmemory_policy');
  }
  const eviction = judgeEviction(policy);

  return {
    node,
    persistence,
    ...(persistence === 'unknown' ? { persistenceReason: persistenceReasons.join('; ') || 'not told' } : {}),
    eviction,
    ...(policy === undefined ? {} : { policy }),
    ...(eviction === 'unknown' ? { evictionReason: evictionReasons.join('; ') || 'not told' } : {}),
  };
}

const quickTuning = {
  maxRetriesPerRequest: 0,
  connectTimeout: PERSISTENCE_STEP_TIMEOUT_MS,
  retryStrategy: () => null,
} as const;

/** The primary's settings, or each master's on a Cluster. */
async function readPrimaries(redis: Config['redis']): Promise<NodeSettings[]> {
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

async function readReplica(host: string, port: number, password: string | undefined): Promise<NodeSettings> {
  const node = `${host}:${port}`;
  const client = new Redis({ host, port, ...(password ? { password } : {}), connectionName: 'custody-worker-persistence', ...quickTuning });
  client.on('error', () => undefined);
  try {
    return await readNode(client, node);
  } finally {
    client.disconnect();
  }
}

export interface RedisSettingsCheck {
  persistence: PersistenceCheck;
  eviction: EvictionCheck;
}

/**
 * Start-up checks what the guarantee needs of the primary (on a Cluster: every master), over
 * short-lived connections:
 * - that it keeps every write on disk (`INFO persistence`'s `aof_enabled`, `CONFIG GET save`). With
 *   nothing on disk a restart empties it; with RDB snapshots only it goes back to the last one. Either
 *   way the record of transfers already sent is gone and they could be sent again: one fatal line and
 *   'refused', unless REDIS_ALLOW_VOLATILE (one warn line);
 * - that it evicts nothing (`maxmemory-policy`, from `CONFIG GET`, else `INFO memory`): any other
 *   policy than `noeviction` may drop tombstones, ended and cancel records: one fatal line and
 *   'refused', unless REDIS_ALLOW_EVICTION (one warn line).
 * Both are reported before refusing, so one restart shows everything to fix. What cannot be read
 * (CONFIG renamed by a managed service, a field missing, no answer) is 'unknown': one warn line, and
 * the worker starts. With Sentinels, each replica they list is read too: one warn line per replica
 * that is volatile, snapshot-only or evicting (not a refusal: it holds nothing of its own while the
 * primary lives, but a failover makes it the primary).
 */
export async function checkRedisSettings(redis: Config['redis'], logger: Logger): Promise<RedisSettingsCheck> {
  let primaries: NodeSettings[];
  try {
    primaries = await readPrimaries(redis);
  } catch (error) {
    const reason = short(error);
    const node = redis.clusterNodes ? 'cluster' : 'primary';
    primaries = [{ node, persistence: 'unknown', persistenceReason: reason, eviction: 'unknown', evictionReason: reason }];
  }
  const check = {
    persistence: persistenceVerdict(primaries, redis.allowVolatile, logger),
    eviction: evictionVerdict(primaries, redis.allowEviction, logger),
  };
  if (check.persistence !== 'refused' && check.eviction !== 'refused' && redis.sentinel)
    await checkSentinelReplicas(redis.sentinel, logger);
  return check;
}

const named = (nodes: NodeSettings[], persistence: Persistence) =>
  nodes.filter((node) => node.persistence === persistence).map((node) => node.node);

function persistenceVerdict(primaries: NodeSettings[], allowVolatile: boolean, logger: Logger): PersistenceCheck {
  const volatile = named(primaries, 'volatile');
  const snapshotOnly = named(primaries, 'snapshot-only');
  if (volatile.length > 0 || snapshotOnly.length > 0) {
    // One line, for the worst of them: nothing on disk says more than an old snapshot.
    const fields = { ...(volatile.length > 0 ? { volatile } : {}), ...(snapshotOnly.length > 0 ? { snapshotOnly } : {}) };
    if (!allowVolatile) {
      logger.fatal(fields, volatile.length > 0 ? VOLATILE_REFUSAL : SNAPSHOT_ONLY_REFUSAL);
      return 'refused';
    }
    logger.warn(
      fields,
      volatile.length > 0
        ? 'redis keeps no data on disk (no AOF, no RDB saves), starting anyway as REDIS_ALLOW_VOLATILE is set: after a restart transfers already sent could be sent again'
        : 'redis keeps RDB snapshots but no AOF, starting anyway as REDIS_ALLOW_VOLATILE is set: a restart loses the writes since the last snapshot and transfers already sent could be sent again',
    );
    return 'volatile-allowed';
  }
  const unknown = primaries.filter((node) => node.persistence === 'unknown');
  if (unknown.length > 0) {
    logger.warn(
      { unknown: unknown.map(({ node, persistenceReason }) => ({ node, reason: persistenceReason })) },
      'could not tell whether redis keeps every write on disk (AOF), starting; make sure appendonly is on',
    );
    return 'unknown';
  }
  logger.debug({ nodes: primaries.map((node) => node.node) }, 'redis keeps its data on disk');
  return 'persistent';
}

function evictionVerdict(primaries: NodeSettings[], allowEviction: boolean, logger: Logger): EvictionCheck {
  const evicting = primaries.filter((node) => node.eviction === 'evicting').map(({ node, policy }) => ({ node, policy }));
  if (evicting.length > 0) {
    if (!allowEviction) {
      logger.fatal({ evicting }, EVICTION_REFUSAL);
      return 'refused';
    }
    logger.warn(
      { evicting },
      'redis may evict keys (maxmemory-policy is not noeviction), starting anyway as REDIS_ALLOW_EVICTION is set: an evicted tombstone, ended record or cancel record lets a job for an ended or cancelled transfer be sent',
    );
    return 'eviction-allowed';
  }
  const unknown = primaries.filter((node) => node.eviction === 'unknown');
  if (unknown.length > 0) {
    logger.warn(
      { unknown: unknown.map(({ node, evictionReason }) => ({ node, reason: evictionReason })) },
      'could not tell whether redis may evict keys (maxmemory-policy), starting; make sure it is noeviction',
    );
    return 'unknown';
  }
  logger.debug({ nodes: primaries.map((node) => node.node) }, 'redis evicts no keys');
  return 'noeviction';
}

/** One warn line per replica the Sentinels list that is volatile or evicts; what cannot be read, one info line each. */
async function checkSentinelReplicas(sentinel: NonNullable<Config['redis']['sentinel']>, logger: Logger): Promise<void> {
  let replicas: { host: string; port: number }[];
  try {
    replicas = await sentinelReplicas(sentinel);
  } catch (error) {
    logger.info({ error: short(error) }, "could not read the replicas' settings");
    return;
  }
  const reports = await Promise.all(replicas.map(({ host, port }) => readReplica(host, port, sentinel.password)));
  for (const report of reports) {
    if (report.persistence === 'volatile') {
      logger.warn(
        { replica: report.node },
        'redis replica keeps no data on disk (no AOF, no RDB saves): promoted after a failover and then restarted, it would come back empty',
      );
    } else if (report.persistence === 'snapshot-only') {
      logger.warn(
        { replica: report.node },
        'redis replica keeps RDB snapshots but no AOF: promoted after a failover and then restarted, it would lose the writes since its last snapshot',
      );
    } else if (report.persistence === 'unknown') {
      logger.info(
        { replica: report.node, reason: report.persistenceReason },
        'could not tell whether this redis replica keeps every write on disk',
      );
    }
    if (report.eviction === 'evicting') {
      logger.warn(
        { replica: report.node, policy: report.policy },
        'redis replica may evict keys (maxmemory-policy is not noeviction): promoted after a failover, it could drop tombstones, ended and cancel records',
      );
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
