import { Queue, type Worker } from 'bullmq';
import type { Config } from './config/config.ts';
import { LookupNarrowing } from './custody/lookup-narrowing.ts';
import { createKeys } from './ledger/keys.ts';
import { CALLS_FIELD, Ledger } from './ledger/ledger.ts';
import { SEQUENCE_ID } from '../packages/producer/src/payload.ts';
import type { Logger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { QueueName } from './queues/names.ts';
import { Trackers } from './queues/trackers.ts';
import { startWatchdog } from './queues/watchdog.ts';
import { QueueWorkers } from './queues/workers.ts';
import { LEDGER_CHECK_EVERY_MS, REDIS_ERROR_LOG_INTERVAL_MS } from './timing.ts';
import type { CustodyPort } from './custody/port.ts';
import { createCustodyPort } from './custody/provider.ts';
import { closeRedis, createRedis, type RedisClient } from './redis.ts';
import { CLOSE_GRACE_MS, withTimeout } from './queues/shutdown.ts';
import { providerPauseReporter, skippedRecordsReporter } from './custody/reporting.ts';
import { RedisErrors } from './redis-errors.ts';
import type { Tracing } from './telemetry.ts';
import { RequestBudget } from './custody/budget.ts';
import { reconciling } from './subsystems/reconciling.ts';
import { submitting } from './subsystems/submitting.ts';
import { tracking } from './subsystems/tracking.ts';
import { startWebhooks, type Webhooks } from './webhooks/subsystem.ts';

export interface App {
  readonly redis: RedisClient;
  readonly ledger: Ledger;
  readonly custody: CustodyPort;
  /** The provider's request budget, shared in Redis (and the pause a provider's 429 imposed). */
  readonly budget: RequestBudget;
  readonly queues: Record<QueueName, Queue>;
  /** The one Trackers of the process (on the track queue): the subsystems', the wake-ups' and the operator actions'. */
  readonly trackers: Trackers;
  readonly workers: Worker[];
  readonly metrics: Metrics;
  /** The error events of the workers, queues and Redis client, and the readiness write probe. */
  readonly redisErrors: RedisErrors;
  /** Outbound webhooks, when WEBHOOK_ENDPOINTS names any. */
  readonly webhooks: Webhooks | undefined;
  /** Whether every worker is running (for readiness). */
  running(): boolean;
  /** Stops taking jobs, waits for in-flight ones, closes every connection. */
  close(): Promise<void>;
}

/**
 * Builds the whole worker from a parsed config: Redis, custody port, ledger and queues, shared by its
 * subsystems (submitting, tracking, reconciling: src/subsystems/; webhooks), which it starts in that
 * order and closes together. Nothing here reads the environment; `src/worker.ts` does that and handles signals.
 */
export async function createApp(
  config: Readonly<Config>,
  logger: Logger,
  metrics: Metrics = createMetrics(),
  tracing?: Tracing,
): Promise<App> {
  const redis = createRedis(config.redis, 'custody-worker');
  const keys = createKeys(config.queue.prefix, config.queue.eventsStream);
  const ledger: Ledger = new Ledger(redis, keys, {
    eventsMaxLen: config.queue.eventsMaxLen,
    retentionMs: config.retention.transfersMs,
    tombstoneRetentionMs: config.retention.tombstonesMs,
    onEvent: (event) => {
      metrics.transferEvents.inc({ event });
      // Counted by the process whose cancel took effect (here: the HTTP route, through this ledger).
      if (event === 'transfer.cancelled') metrics.transfersCancelled.inc();
    },
    epoch: {
      init: config.ledger.init,
      recoveryWindowMs: config.ledger.recoveryWindowMs,
      // Each of this process's changes is marked, so that a Redis that comes back without one is
      // noticed however many changes other processes made since (epoch.ts).
      writer: true,
      onLost: ({ previous, state }) => {
        metrics.ledgerLost.inc();
        logger.error(
          { previousEpoch: previous, epoch: state.id, recoveryUntil: new Date(state.recoveryUntil).toISOString() },
          'ledger lost: redis no longer holds the epoch this worker knew; every transfer is looked up before its first send until the recovery window ends (runbook: redis lost its data)',
        );
      },
      onState: (state) => metrics.ledgerRecoveryUntil.set(state.recoveryUntil / 1000),
      // The epoch is written like a send in flight: acknowledged by the replicas before it counts.
      replicate: async () => {
        if (config.redis.minReplicas === 0) return;
        const { acknowledged, required } = await ledger.replicated(
          ledger.session(),
          config.redis.minReplicas,
          config.redis.replicaTimeoutMs,
        );
        if (acknowledged < required) logger.warn({ acknowledged, required }, 'redis replicas did not acknowledge the ledger epoch in time');
      },
    },
  });
  const epoch = await ledger.epoch.start();
  if (epoch.id === undefined) {
    logger.warn('the ledger has no epoch (LEDGER_INIT=manual): nothing is sent until an operator runs `npm run cli -- ledger init`');
  } else if (epoch.recoveryUntil > epoch.now) {
    logger.warn(
      { epoch: epoch.id, recoveryUntil: new Date(epoch.recoveryUntil).toISOString() },
      'the ledger is recovering from a loss: transfers are looked up before their first send',
    );
  }

  // What this worker's cancels write with, for the processes that cancel with their own copy of the
  // script (the producer package, the CLI): they refuse while theirs differ. Several workers record the
  // same; the last to start wins, so a rolling deploy moves the record to the new version as it goes
  // (and producers of the old one are refused from then on, not the other way round).
  const replaced = await ledger.recordSettings('replace');
  if (replaced.length > 0) {
    logger.warn(
      {
        fields: replaced.map((d) => d.field),
        before: Object.fromEntries(replaced.map((d) => [d.field, d.worker])),
        now: Object.fromEntries(replaced.map((d) => [d.field, d.mine])),
      },
      'another worker had recorded another transition script or other ledger settings (a rolling deploy, or workers configured differently): this worker recorded its own; producers and the cli with the others are refused cancels',
    );
  }
  // Redis may come back without the record (it lost its data): put it back, without overwriting another worker's.
  const recordAgain = (): void => {
    ledger
      .recordSettings('if-absent')
      .catch((err: unknown) => logger.warn({ err }, 'could not record the ledger settings again after reconnecting'));
  };
  redis.on('ready', recordAgain);

  // Redis errors are logged by their own listener; this says only that the check did not run (throttled).
  let checkWarnedAt = 0;
  const stopLedgerCheck = ledger.epoch.watch(LEDGER_CHECK_EVERY_MS, (err) => {
    if (Date.now() - checkWarnedAt < REDIS_ERROR_LOG_INTERVAL_MS) return;
    checkWarnedAt = Date.now();
    logger.warn({ err }, 'could not compare the ledger with what this worker saw, next try later');
  });

  metrics.reconcileInterval.set(config.reconcile.everyMs / 1000);
  const budget = new RequestBudget(redis, keys.rateLimit, config.custody.maxRps, {
    admitted: (klass, waitMs) => {
      metrics.budgetUsed.inc({ class: klass });
      metrics.budgetWait.observe({ class: klass }, waitMs / 1000);
    },
    refused: (klass) => metrics.budgetRefused.inc({ class: klass }),
    paused: () => metrics.budgetPauses.inc(),
  });
  const custody = createCustodyPort(config.custody, {
    budget: {
      // Every request takes its slot in the shared budget, by class (token requests go with sends).
      budget,
      // A member that is a sequenceId names the transfer the call is for: counted on its ledger record.
      countFor: (member) => (SEQUENCE_ID.test(member) ? { key: keys.transfer(member), field: CALLS_FIELD } : undefined),
      onPause: providerPauseReporter(logger),
    },
    metrics: (endpoint, status, code, durationMs) => {
      metrics.upstreamRequests.inc({ endpoint, status, code });
      metrics.upstreamDuration.observe({ endpoint, status }, durationMs / 1000);
    },
    tracing: tracing?.upstream,
    onSkippedRecords: skippedRecordsReporter(logger, metrics),
    narrowing: new LookupNarrowing(redis, (wallet) => keys.lookupNarrowing(wallet.walletId, wallet.coin)),
  });
  const connection = redis;
  const prefix = config.queue.prefix;
  const telemetry = tracing?.bullmq;
  const queues = {
    [QueueName.SUBMIT]: new Queue(QueueName.SUBMIT, { connection, prefix, telemetry }),
    [QueueName.TRACK]: new Queue(QueueName.TRACK, { connection, prefix, telemetry }),
    [QueueName.RECONCILE]: new Queue(QueueName.RECONCILE, { connection, prefix, telemetry }),
  } satisfies Record<QueueName, Queue>;
  const trackers = new Trackers(queues[QueueName.TRACK], ledger, config.track.pollMinMs);

  /*
   * Stalled-job policy. A job's lock lasts JOB_LOCK_DURATION (default 30 s) and is renewed at half of
   * it while the handler runs; a worker killed mid-job loses its lock and the job is recovered within
   * about one lock duration. Every step is safe to re-run (ledger transitions are guarded and a send
   * in flight holds a lease), so recovering a job is harmless, and JOB_MAX_STALLED (default 5) only
   * stops a job that kills its worker every time; reconciliation restores its transfer afterwards.
   */
  const workerOptions = {
    connection,
    prefix,
    telemetry,
    lockDuration: config.jobs.lockDurationMs,
    stalledInterval: config.jobs.lockDurationMs,
    maxStalledCount: config.jobs.maxStalledCount,
    // The ledger and the events are the record of a transfer; completed jobs are only there for
    // operators to look at, so few are kept (each completed submit job holds its ~2 KB payload).
    removeOnComplete: { age: Math.ceil(config.retention.jobsMs / 1000), count: config.retention.jobsCount },
    removeOnFail: { age: Math.ceil(config.retention.transfersMs / 1000) },
  };

  // Error events of the workers, queues and Redis client, and the readiness write probe (redis-errors.ts).
  const redisErrors = new RedisErrors({
    logger,
    redis,
    probeKey: keys.readyProbe,
    onRefused: (code) => metrics.redisRefusedWrites.inc({ code }),
  });

  // The custody subsystems, each with its queue's worker, started in this order.
  const workers = new QueueWorkers({ queues, workerOptions, logger, metrics, redisErrors });
  const deps = { config, redis, keys, ledger, custody, budget, queues, trackers, workers, logger, metrics };
  const subsystems = [submitting(deps), tracking(deps), reconciling(deps)];
  for (const subsystem of subsystems) await subsystem.start();

  const watchdog =
    config.jobs.workerStallMs > 0
      ? startWatchdog(workers.watched, {
          stallMs: config.jobs.workerStallMs,
          lockDurationMs: config.jobs.lockDurationMs,
          onReplaced: (queue, reason) => {
            metrics.workersReplaced.inc({ queue });
            logger.warn({ queue, reason }, 'worker started no job while its queue had work due: replaced it');
          },
          onError: (err) => logger.warn({ err }, 'could not check the workers, next try later'),
          writesRefused: (withinMs) => redisErrors.refusing(withinMs),
          onHeldOff: (queue, reason, code) =>
            logger.warn(
              { queue, reason, code },
              'worker started no job while its queue had work due, but redis refuses writes: no worker is replaced while it does (a new one could not move jobs either)',
            ),
        })
      : undefined;
  for (const queue of Object.values(queues)) queue.on('error', redisErrors.listener(`queue-${queue.name}`));
  redis.on('error', redisErrors.listener('redis'));

  // A subsystem of its own: it reads the stream apart from the workers and closes without waiting for an endpoint.
  const webhooks =
    config.webhooks.endpoints.length > 0
      ? startWebhooks({
          redis,
          prefix,
          eventsStream: config.queue.eventsStream,
          settings: config.webhooks,
          metadataKeys: config.http.dashboardMetadataKeys,
          logger,
          metrics,
        })
      : undefined;

  let closed = false;
  return {
    redis,
    ledger,
    custody,
    budget,
    queues,
    trackers,
    workers: workers.workers,
    metrics,
    redisErrors,
    webhooks,
    running: () => !closed && workers.running(),
    async close() {
      if (closed) return;
      closed = true;
      watchdog?.stop();
      stopLedgerCheck();
      redis.off('ready', recordAgain);
      // Every subsystem at once: its worker stops fetching and waits for its in-flight jobs, which still
      // need Redis and upstream. Webhooks abort their tries in flight (made again later), and no custody
      // worker's drain waits on theirs, nor theirs on one.
      await Promise.all([...subsystems.map((subsystem) => subsystem.close()), webhooks?.close()]);
      await Promise.all(Object.values(queues).map((queue) => withTimeout(queue.close(), CLOSE_GRACE_MS)));
      await custody.close();
      await closeRedis(redis, CLOSE_GRACE_MS);
    },
  };
}
