/**
 * What the demo starts and stops: a Redis (REDIS_URL, else testcontainers, else a private
 * redis-server), the custody simulator (the BitGo one with --provider bitgo), the worker (in this process, composed as src/worker.ts does)
 * with its HTTP server and dashboard, and the demo's own producer connection.
 *
 * `stop()` stops whatever has been started so far, in a fixed order: the worker first (it still needs
 * Redis and the simulator to finish in-flight jobs), then the HTTP server, the demo's connection (after
 * deleting the run's keys from a Redis that is not ours), the simulator, and Redis last.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createApp, type App } from '../../src/app.ts';
import { isLoopback, loadConfig, loadQueueConfig, type Config, type CustodyProviderName } from '../../src/config/config.ts';
import { acquireRedis, redactRedisUrl, type PrivateRedis } from '../redis/private-redis.ts';
import { createHttpServer, DASHBOARD_PATH } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics } from '../../src/metrics.ts';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import {
  startSimulator,
  workerBitgoEnv,
  workerCustodyEnv,
  type Simulator,
  type SimulatorSettings,
  type DeepPartial,
} from '../../src/simulator/index.ts';
import { startBitgoSimulator, type BitgoSettings, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import type { DemoOptions } from './options.ts';

/** The worker's usual dashboard port, used when free and HTTP_PORT is unset. */
const PREFERRED_HTTP_PORT = 3000;
const SCAN_COUNT = 1_000;
const REDIS_PING_TIMEOUT_MS = 5_000;

/**
 * Worker settings for a run that ends in seconds: quick polls and retries. Everything else is the
 * worker's default, so the demo shows the worker as it runs in production.
 */
const DEMO_WORKER_ENV = {
  CUSTODY_TIMEOUT: '5s',
  CUSTODY_CONNECT_TIMEOUT: '2s',
  SUBMIT_RETRY_BASE: '100ms',
  SUBMIT_RETRY_MAX: '1s',
  TRACK_POLL_MIN: '100ms',
  TRACK_POLL_MAX: '1s',
  TRACK_DEADLINE: '10m',
  RETENTION: '1d',
  JOB_RETENTION: '1d',
  SHUTDOWN_TIMEOUT: '10s',
} as const;

export interface Started {
  redis: PrivateRedis;
  provider: CustodyProviderName;
  sim: Simulator | BitgoSimulator;
  /** The same simulator when it is BitGo's (its transfers' approval state), else undefined. */
  bitgo: BitgoSimulator | undefined;
  app: App;
  config: Readonly<Config>;
  /** The demo's own connection (producer, event reads), not the worker's. */
  client: Redis;
  producer: TransferProducer;
  dashboardUrl: string;
  generatedCredentials: { user: string; password: string } | undefined;
}

/** The simulator's pace: a transfer shows up upstream, then gets its txid, with some spread. */
export function simulatorSettings(paceMs: number): DeepPartial<SimulatorSettings> {
  return {
    // Answers vary as a real provider's would (nulls, extra keys, other records, 404 for "not found"):
    // the demo shows the worker as it meets a real API, not the spec's examples.
    profile: 'realistic',
    // Spec 4.4: the rule applies when outgoingTxn is 1 and mandatory is true.
    travelRule: { outgoingTxn: 1, mandatory: true },
    visibleAfterMs: Math.round(paceMs * 0.2),
    visibleJitterMs: Math.round(paceMs * 0.3),
    txidAfterMs: Math.round(paceMs * 0.3),
    txidJitterMs: Math.round(paceMs * 0.4),
  };
}

/**
 * The BitGo simulator's pace: an accepted send waits in `pendingApproval` (202, no txid) for 60% of the
 * pace, is then signed, and shows its txid 30% later (the simulator draws no spread).
 */
export function bitgoSimulatorSettings(paceMs: number): Partial<BitgoSettings> {
  return { approvalAfterMs: Math.round(paceMs * 0.6), txidAfterMs: Math.round(paceMs * 0.3) };
}

/** Sends the simulator accepted for this sequenceId (either simulator counts them the same way). */
export function acceptedSends(sim: Simulator | BitgoSimulator, sequenceId: string): number {
  return sim.stats().sends[sequenceId]?.accepted ?? 0;
}

export class DemoStack {
  readonly #options: DemoOptions;
  readonly #prefix: string;
  readonly #report: (line: string) => void;
  #redis: PrivateRedis | undefined;
  #sim: Simulator | BitgoSimulator | undefined;
  #app: App | undefined;
  #http: FastifyInstance | undefined;
  #client: Redis | undefined;
  #producer: TransferProducer | undefined;
  #stopping: Promise<void> | undefined;

  constructor(options: DemoOptions, prefix: string, report: (line: string) => void) {
    this.#options = options;
    this.#prefix = prefix;
    this.#report = report;
  }

  /** Starts everything; throws the signal's reason when aborted (what was started stays for stop()). */
  async start(signal: AbortSignal): Promise<Started> {
    const options = this.#options;
    const sentinel = options.sentinel;
    if (!options.redisUrl && !sentinel) this.#report('starting a Redis (testcontainers, else redis-server)…');
    // With Sentinels the worker finds the master itself; nothing is started here.
    const redis: PrivateRedis = sentinel
      ? {
          url: `sentinel://${sentinel.REDIS_SENTINELS}/${sentinel.REDIS_SENTINEL_MASTER ?? 'mymaster'}`,
          source: 'env',
          note: 'REDIS_SENTINELS',
          stop: async () => {},
        }
      : await acquireRedis({ url: options.redisUrl, noContainers: options.noContainers });
    this.#redis = redis;
    signal.throwIfAborted();
    const redisEnv: Record<string, string> = sentinel ?? { REDIS_URL: redis.url };
    // Checked before the worker starts: its connections wait for Redis forever, which would look like a hang.
    // A Redis, never a Cluster: the demo's environment names a URL or Sentinels, not REDIS_CLUSTER_NODES.
    const client = createRedis(loadQueueConfig(redisEnv).redis, 'custody-demo') as Redis;
    this.#client = client;
    // Errors show up as a failed command (the PING below, an enqueue): no 'Unhandled error event' noise.
    client.on('error', () => {});
    await pingWithin(client, REDIS_PING_TIMEOUT_MS, sentinel ? redis.url : redactRedisUrl(redis.url));
    signal.throwIfAborted();

    const bitgo =
      options.provider === 'bitgo' ? await startBitgoSimulator({ port: 0, settings: bitgoSimulatorSettings(options.paceMs) }) : undefined;
    const sim = bitgo ?? (await startSimulator({ port: 0, settings: simulatorSettings(options.paceMs) }));
    this.#sim = sim;
    signal.throwIfAborted();
    const custodyEnv: Record<string, string> = bitgo ? workerBitgoEnv(bitgo) : workerCustodyEnv(sim as Simulator);

    const credentials = dashboardCredentials(options);
    const httpPort = options.httpPort ?? ((await portIsFree(options.httpHost, PREFERRED_HTTP_PORT)) ? PREFERRED_HTTP_PORT : 0);
    const env: Record<string, string> = {
      ...redisEnv,
      QUEUE_PREFIX: this.#prefix,
      ...custodyEnv,
      HTTP_HOST: options.httpHost,
      HTTP_PORT: String(httpPort),
      LOG_LEVEL: options.logLevel,
      ...DEMO_WORKER_ENV,
      ...(credentials ? { DASHBOARD_USER: credentials.user, DASHBOARD_PASSWORD: credentials.password } : {}),
    };
    const config = loadConfig(env);
    // Logs go to stderr: stdout is the demo's own output (and JSON lines with --json).
    const logger = createLogger({ level: config.log.level, name: 'custody-demo' }, process.stderr);
    const metrics = createMetrics();
    const app = await createApp(config, logger, metrics);
    this.#app = app;
    signal.throwIfAborted();

    const http = await createHttpServer({ app, config, logger, metrics });
    this.#http = http;
    const address = await http.listen({ host: config.http.host, port: config.http.port });
    signal.throwIfAborted();

    const producer = new TransferProducer({ connection: client, prefix: config.queue.prefix, eventsStream: config.queue.eventsStream });
    this.#producer = producer;

    return {
      redis,
      provider: options.provider,
      sim,
      bitgo,
      app,
      config,
      client,
      producer,
      dashboardUrl: `${address}${DASHBOARD_PATH}`,
      generatedCredentials: credentials && !options.dashboardUser ? credentials : undefined,
    };
  }

  /** Idempotent; every step runs even when an earlier one failed. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const step = async (name: string, action: () => Promise<void>) => {
      try {
        await action();
        this.#report(`stopped ${name}`);
      } catch (error) {
        this.#report(`stopping ${name} failed: ${(error as Error).message}`);
      }
    };
    const app = this.#app;
    if (app) await step('worker', () => app.close());
    const http = this.#http;
    if (http) await step('http server', () => http.close());
    const client = this.#client;
    if (client) {
      await step('demo connection', async () => {
        await this.#producer?.close();
        if (client.status !== 'ready') {
          client.disconnect();
          return;
        }
        if (this.#redis?.source === 'env' && !this.#options.keepData) {
          const deleted = await deleteKeys(client, this.#prefix);
          const from = this.#options.sentinel ? "from the Sentinels' master" : 'from REDIS_URL';
          this.#report(`deleted ${deleted} keys under ${this.#prefix}: ${from} (DEMO_KEEP_DATA=1 keeps them)`);
        }
        await client.quit().catch(() => client.disconnect());
      });
    }
    const sim = this.#sim;
    if (sim) await step('simulator', () => sim.close());
    const redis = this.#redis;
    if (redis && redis.source !== 'env')
      await step(redis.source === 'testcontainers' ? 'redis container' : 'redis-server', () => redis.stop());
  }
}

export function describeRedis(redis: PrivateRedis): string {
  // Why no container was used is for the test suite's log, not a warning for a demo's reader.
  const note = redis.note.replace(/\s*\(testcontainers: [^)]*\)/, '');
  return `${redactRedisUrl(redis.url)} (${note})`;
}

/**
 * Loopback: none (as the worker), unless configured. Elsewhere the worker requires them: the
 * configured ones, else `demo` and a random password the demo prints once.
 */
function dashboardCredentials(options: DemoOptions): { user: string; password: string } | undefined {
  if (options.dashboardUser && options.dashboardPassword) return { user: options.dashboardUser, password: options.dashboardPassword };
  if (isLoopback(options.httpHost)) return undefined;
  return { user: 'demo', password: randomBytes(12).toString('base64url') };
}

async function pingWithin(client: Redis, timeoutMs: number, where: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis at ${where} did not answer PING within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([client.ping(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function portIsFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** UNLINKs every key under `<prefix>:` (the worker owns no other, docs/contract.md section 2). */
async function deleteKeys(client: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', SCAN_COUNT);
    cursor = next;
    if (keys.length > 0) deleted += await client.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}
