/**
 * The in-process worker against a throwaway 3-master Redis Cluster (startRedisCluster), with an ioredis
 * Cluster client for the producer and for reading events, and a record of every log line the worker
 * writes and every 'error' its workers, queues and Redis client emit (to prove no CROSSSLOT anywhere).
 *
 * startHarness (harness.ts) reads with a plain Redis client, which a cluster answers with MOVED; this is
 * its cluster-aware sibling.
 */
import { Writable } from 'node:stream';
import type { Cluster } from 'ioredis';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { createLogger } from '../../src/logger.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { workerEnv } from './harness.ts';
import { parseCheckedEntry } from './json-schemas.ts';
import { newRedisCluster, startRedisCluster, type RedisClusterHandle, type StartRedisClusterOptions } from './redis-cluster.ts';
import { uniquePrefix } from './redis.ts';

export interface LogLine {
  level: string;
  msg?: string;
  [field: string]: unknown;
}

export interface EmittedError {
  source: string;
  error: Error;
}

export interface ClusterHarness {
  cluster: RedisClusterHandle;
  sim: Simulator;
  env: Record<string, string>;
  config: Readonly<Config>;
  prefix: string;
  /** Cluster client of the test (producer, event reads). */
  redis: Cluster;
  producer: TransferProducer;
  app: App;
  /** Every line the worker's logger wrote, parsed. */
  logLines: LogLine[];
  /** Every 'error' emitted by the app's workers, queues and Redis client. */
  emittedErrors: EmittedError[];
  events(): Promise<TransferEvent[]>;
  eventsOf(sequenceId: string): Promise<TransferEvent[]>;
  waitForEvents(predicate: (events: TransferEvent[]) => boolean, timeoutMs?: number): Promise<TransferEvent[]>;
  close(): Promise<void>;
}

export interface ClusterHarnessOptions {
  name: string;
  env?: Record<string, string>;
  sim?: SimulatorOptions;
  /** Log level of the worker's logger (default `debug`, so the record misses as little as possible). */
  logLevel?: string;
  /** The cluster's shape (default: 3 masters, no replicas). */
  cluster?: StartRedisClusterOptions;
}

export async function startClusterHarness(options: ClusterHarnessOptions): Promise<ClusterHarness> {
  // Each resource is closed in reverse order if a later step fails, so a failed start leaks nothing.
  const undo: Array<() => Promise<unknown>> = [];
  const unwind = async () => {
    for (const step of undo.splice(0).reverse()) await step().catch(() => undefined);
  };
  try {
    const cluster = await startRedisCluster(options.cluster);
    undo.push(() => cluster.stop());
    const sim = await startSimulator({ port: 0, ...options.sim });
    undo.push(() => sim.close());

    const prefix = uniquePrefix(options.name, { hashTag: true });
    const { REDIS_URL: _plainRedis, ...base } = workerEnv(sim, prefix);
    const env: Record<string, string> = {
      ...base,
      REDIS_CLUSTER_NODES: cluster.nodesEnv,
      LOG_LEVEL: options.logLevel ?? 'debug',
      ...options.env,
    };
    const config = loadConfig(env);

    const redis = newRedisCluster(cluster.nodes);
    undo.push(() => redis.quit().catch(() => redis.disconnect()));
    const producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });
    undo.push(() => producer.close());

    const logLines: LogLine[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (line.trim() === '') continue;
          try {
            logLines.push(JSON.parse(line) as LogLine);
          } catch {
            logLines.push({ level: 'unparsed', msg: line });
          }
        }
        callback();
      },
    });
    const logger = createLogger({ level: config.log.level }, destination);
    const app = await createApp(config, logger);
    undo.push(() => app.close());

    const emittedErrors: EmittedError[] = [];
    const record = (source: string) => (error: Error) => emittedErrors.push({ source, error });
    for (const worker of app.workers) worker.on('error', record(`worker ${worker.name}`));
    for (const queue of Object.values(app.queues)) queue.on('error', record(`queue ${queue.name}`));
    app.redis.on('error', record('redis'));

    const events = async (): Promise<TransferEvent[]> => {
      const entries = await redis.xrange(config.queue.eventsStream, '-', '+');
      return entries.map((entry) => parseCheckedEntry(entry as [string, string[]]));
    };

    return {
      cluster,
      sim,
      env,
      config,
      prefix,
      redis,
      producer,
      app,
      logLines,
      emittedErrors,
      events,
      async eventsOf(sequenceId) {
        return (await events()).filter((event) => event.sequenceId === sequenceId);
      },
      async waitForEvents(predicate, timeoutMs = 20_000) {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const all = await events();
          if (predicate(all)) return all;
          if (Date.now() > deadline) {
            throw new Error(
              `events did not reach the expected state in ${timeoutMs} ms; have: ${all.map((e) => `${e.event}@${e.sequenceId.slice(0, 8)}`).join(', ')}`,
            );
          }
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      },
      close: unwind,
    };
  } catch (error) {
    await unwind();
    throw error;
  }
}
