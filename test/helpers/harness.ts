import { Redis } from 'ioredis';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config/config.ts';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import type { DestinationStream } from 'pino';
import { createLogger } from '../../src/logger.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { startSimulator, workerCustodyEnv, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';
import { parseCheckedEntry } from './json-schemas.ts';
import { testRedisUrl, uniquePrefix } from './redis.ts';

/** Settings that make a test run in milliseconds instead of minutes. */
export const FAST_ENV: Record<string, string> = {
  CUSTODY_TIMEOUT: '1s',
  CUSTODY_CONNECT_TIMEOUT: '1s',
  SUBMIT_RETRY_BASE: '20ms',
  SUBMIT_RETRY_MAX: '200ms',
  TRACK_POLL_MIN: '50ms',
  TRACK_POLL_MAX: '200ms',
  TRAVEL_RULE_CACHE_TTL: '30s',
  JOB_LOCK_DURATION: '2s',
  RECONCILE_EVERY: '1h',
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
};

export interface Harness {
  sim: Simulator;
  env: Record<string, string>;
  config: Readonly<Config>;
  prefix: string;
  redis: Redis;
  producer: TransferProducer;
  /** The in-process worker (undefined when started with `worker: false`). */
  app: App | undefined;
  startWorker(): Promise<App>;
  /**
   * Every event on the stream, oldest first. Each one's data is checked against its committed JSON
   * Schema (packages/producer/schemas/events): an event that does not validate fails the test.
   */
  events(): Promise<TransferEvent[]>;
  eventsOf(sequenceId: string): Promise<TransferEvent[]>;
  /** Polls the stream until `predicate` holds for the events, or fails after `timeoutMs`. */
  waitForEvents(predicate: (events: TransferEvent[]) => boolean, timeoutMs?: number): Promise<TransferEvent[]>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  name: string;
  env?: Record<string, string>;
  sim?: SimulatorOptions;
  /** Start the worker in this process (default true). */
  worker?: boolean;
  /** An already running simulator to share. */
  simulator?: Simulator;
  /** Where the producer and the event reads connect (default: the tests' Redis), e.g. a Sentinel's master. */
  redisUrl?: string;
  /** Where the worker's log lines go (default stdout), e.g. a buffer a test prints when it fails. */
  logTo?: DestinationStream;
}

/** Environment for a worker against `sim` on the test Redis under `prefix`. */
export function workerEnv(sim: Simulator, prefix: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: prefix,
    ...workerCustodyEnv(sim),
    HTTP_PORT: '0',
    ...FAST_ENV,
    ...extra,
  };
}

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const sim = options.simulator ?? (await startSimulator({ port: 0, ...options.sim }));
  const prefix = uniquePrefix(options.name);
  const env = workerEnv(sim, prefix, options.env);
  const config = loadConfig(env);
  const redis = new Redis(options.redisUrl ?? testRedisUrl(), { maxRetriesPerRequest: null });
  const producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });

  const harness: Harness = {
    sim,
    env,
    config,
    prefix,
    redis,
    producer,
    app: undefined,
    async startWorker() {
      harness.app = await createApp(config, createLogger({ level: config.log.level }, options.logTo));
      return harness.app;
    },
    async events() {
      const entries = await redis.xrange(config.queue.eventsStream, '-', '+');
      return entries.map((entry) => parseCheckedEntry(entry as [string, string[]]));
    },
    async eventsOf(sequenceId) {
      return (await harness.events()).filter((event) => event.sequenceId === sequenceId);
    },
    async waitForEvents(predicate, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const events = await harness.events();
        if (predicate(events)) return events;
        if (Date.now() > deadline) {
          throw new Error(
            `events did not reach the expected state in ${timeoutMs} ms; have: ${events.map((e) => `${e.event}@${e.sequenceId.slice(0, 8)}`).join(', ')}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    async close() {
      await harness.app?.close();
      await producer.close();
      await redis.quit();
      if (!options.simulator) await sim.close();
    },
  };
  if (options.worker !== false) await harness.startWorker();
  return harness;
}

/** Count of events of `type` per sequenceId. */
export function countBy(events: TransferEvent[], type: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const event of events) if (event.event === type) counts.set(event.sequenceId, (counts.get(event.sequenceId) ?? 0) + 1);
  return counts;
}

/** Checks that every transfer's versions are exactly 1..n in stream order; returns the problems found. */
export function versionProblems(events: TransferEvent[]): string[] {
  const last = new Map<string, number>();
  const problems: string[] = [];
  for (const event of events) {
    if (event.event === 'reconcile.completed') continue;
    const key = event.sequenceId || `job:${event.id}`;
    const expected = (last.get(key) ?? 0) + 1;
    if (event.version !== expected) problems.push(`${key}: version ${event.version}, expected ${expected}`);
    last.set(key, event.version);
  }
  return problems;
}

/** The value of a metric of the in-process worker (one series: `labels` as `{a="b"}`, or none). */
export async function metricValue(h: Harness, name: string, labels = ''): Promise<number> {
  const text = await h.app!.metrics.registry.getSingleMetricAsString(name);
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || l.startsWith(`${name}${labels}{`));
  return Number(line?.split(' ').pop() ?? NaN);
}
