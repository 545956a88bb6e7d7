import type { Queue } from 'bullmq';
import type { Config } from '../config/config.ts';
import type { RequestBudget } from '../custody/budget.ts';
import type { CustodyPort } from '../custody/port.ts';
import type { Keys } from '../ledger/keys.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { QueueName } from '../queues/names.ts';
import type { Trackers } from '../queues/trackers.ts';
import type { QueueWorkers } from '../queues/workers.ts';
import type { RedisClient } from '../redis.ts';

/**
 * A part of the worker with a life of its own, composed by src/app.ts: `start` begins taking work,
 * `close` stops taking it and waits for what it has in flight (its BullMQ worker drained). The app
 * closes its subsystems together, so none waits on another's drain.
 */
export interface Subsystem {
  start(): Promise<void>;
  close(): Promise<void>;
}

/** What the app gives each custody subsystem: the clients, the queues and the process's workers. */
export interface SubsystemDeps {
  config: Readonly<Config>;
  redis: RedisClient;
  keys: Keys;
  ledger: Ledger;
  custody: CustodyPort;
  /** The provider's request budget, shared in Redis. */
  budget: RequestBudget;
  queues: Record<QueueName, Queue>;
  trackers: Trackers;
  workers: QueueWorkers;
  logger: Logger;
  metrics: Metrics;
}
