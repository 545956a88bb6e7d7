import type { Queue, Worker, WorkerOptions } from 'bullmq';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { RedisErrors } from '../redis-errors.ts';
import { InFlight } from './in-flight.ts';
import type { QueueName } from './names.ts';
import { createProcessor, TransferWorker, type Handler } from './processor.ts';
import { closeWorkers } from './shutdown.ts';
import { QueueActivity, type Watched } from './watchdog.ts';

export interface QueueWorkersOptions {
  queues: Record<QueueName, Queue>;
  /** What every worker is made with (connection, prefix, locks, retention); a queue's own options go over it. */
  workerOptions: WorkerOptions;
  logger: Logger;
  metrics: Metrics;
  redisErrors: RedisErrors;
}

/** One queue's worker in this process, as its subsystem holds it. */
export interface QueueWorker {
  /** Stops fetching and waits for the queue's jobs in flight (then drops its connections, as closeWorkers says). */
  close(): Promise<void>;
}

/**
 * The BullMQ workers of this process, one per queue, each behind the processor wrapper that classifies
 * outcomes. The watchdog (watchdog.ts) may replace one that stopped fetching: `workers` always holds
 * the current ones, in the order they were started, and `watched` is what the watchdog is given.
 */
export class QueueWorkers {
  readonly workers: Worker[] = [];
  readonly watched: Watched[] = [];
  // Every job of this process: a queue's close drops its connections only once none runs in any queue.
  readonly #inFlight = new InFlight();
  readonly #options: QueueWorkersOptions;

  constructor(options: QueueWorkersOptions) {
    this.#options = options;
  }

  start<R>(queue: QueueName, handler: Handler<R>, options: Partial<WorkerOptions> & { concurrency: number }): QueueWorker {
    const { queues, workerOptions, logger, metrics, redisErrors } = this.#options;
    const activity = new QueueActivity(this.#inFlight);
    const create = () => {
      const worker = new TransferWorker<R>(
        queue,
        createProcessor(handler, {
          queue,
          jobName: queue,
          logger,
          rateLimit: (ms) => queues[queue].rateLimit(ms),
          onFinished: (name, outcome, durationMs) => {
            metrics.jobs.inc({ queue: name, outcome });
            metrics.jobDuration.observe({ queue: name, outcome }, durationMs / 1000);
          },
          inFlight: activity,
          onRefused: (name, reason) => metrics.refusedJobs.inc({ queue: name, reason }),
        }),
        { ...workerOptions, name: `${queue}-${process.pid}`, ...options },
      );
      worker.on('error', redisErrors.listener(worker.name));
      return worker;
    };
    const index = this.workers.push(create()) - 1;
    const current = () => this.workers[index]!;
    this.watched.push({
      queue: queues[queue],
      activity,
      current,
      replace: () => {
        this.workers[index] = create();
      },
    });
    return { close: () => closeWorkers([current()], this.#inFlight) };
  }

  /** Whether every current worker is running. */
  running(): boolean {
    return this.workers.every((worker) => worker.isRunning());
  }
}
