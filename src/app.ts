import { Queue, type Worker, type WorkerOptions } from 'bullmq';
import type { Config } from './config/config.ts';
import { createReconcileHandler } from './jobs/reconcile/handler.ts';
import { createSubmitHandler } from './jobs/submit-transaction/handler.ts';
import { createTrackHandler } from './jobs/track-transfer/handler.ts';
import { LookupNarrowing } from './jobs/submit-transaction/lookup-narrowing.ts';
import { TravelRuleCache } from './jobs/submit-transaction/travel-rule.ts';
import { createKeys } from './ledger/keys.ts';
import { CALLS_FIELD, Ledger } from './ledger/ledger.ts';
import { SEQUENCE_ID } from '../packages/producer/src/payload.ts';
import type { Logger } from './logger.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { QueueName, trackJobId } from './queues/names.ts';
import { Trackers } from './queues/trackers.ts';
import { InFlight } from './queues/in-flight.ts';
import { createProcessor, TransferWorker, type Handler } from './queues/processor.ts';
import { QueueActivity, startWatchdog, type Watched } from './queues/watchdog.ts';
import {
  POLL_FAILURES_ALERT,
  sendDeadlineMs,
  sendLeaseMs,
  SKIPPED_RECORD_LOG_INTERVAL_MS,
  SUBMIT_RETRY,
  trackLimiter,
  withBase,
} from './timing.ts';
import type { CustodyEndpoint } from './custody/errors.ts';
import type { CustodyPort } from './custody/port.ts';
import { createCustodyPort, type SkippedRecord } from './custody/provider.ts';
import { closeRedis, createRedis, type RedisClient } from './redis.ts';
import { RedisErrors } from './redis-errors.ts';
import type { Tracing } from './telemetry.ts';
import { RequestBudget } from './custody/budget.ts';

/**
 * Upstream list records that failed the schema: all counted; logged at most once per endpoint per
 * interval with the field paths (never values). A skipped record that carried the very sequenceId
 * looked for is an error every time: tracking that transfer cannot succeed until upstream changes.
 */
function skippedRecordsReporter(logger: Logger, metrics: Metrics) {
  const lastLogged = new Map<string, number>();
  const suppressed = new Map<string, number>();
  return (endpoint: CustodyEndpoint, skipped: readonly SkippedRecord[]) => {
    for (const record of skipped) metrics.skippedRecords.inc({ endpoint, ours: String(record.ours) });
    const ours = skipped.filter((record) => record.ours);
    if (ours.length > 0) {
      logger.error(
        { endpoint, paths: ours.flatMap((record) => record.paths) },
        'the upstream record of this transfer fails the schema and is skipped: it cannot be matched',
      );
    }
    const now = Date.now();
    if (now - (lastLogged.get(endpoint) ?? 0) < SKIPPED_RECORD_LOG_INTERVAL_MS) {
      suppressed.set(endpoint, (suppressed.get(endpoint) ?? 0) + skipped.length);
      return;
    }
    logger.warn(
      {
        endpoint,
        skipped: skipped.length,
        paths: [...new Set(skipped.flatMap((record) => record.paths))].slice(0, 10),
        suppressed: suppressed.get(endpoint) ?? 0,
      },
      'upstream records failing the schema skipped',
    );
    lastLogged.set(endpoint, now);
    suppressed.set(endpoint, 0);
  };
}

/** How long closing may take once no job runs any more, before connections are dropped. */
const CLOSE_GRACE_MS = 2_000;

/**
 * `Worker.close()` waits for in-flight jobs, then for its blocking connection to end; a connection
 * that is reconnecting (Redis restarted or away) never ends, and close never resolves (bullmq#4656).
 * Our processors count their running jobs: once none runs and close has had CLOSE_GRACE_MS more,
 * nothing can be lost by dropping the connections, so we do.
 */
async function closeWorkers(workers: Worker[], inFlight: InFlight): Promise<void> {
  const closing = Promise.all(workers.map((worker) => worker.close()));
  const drained = inFlight.idle().then(() => new Promise((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref()));
  const finished = await Promise.race([closing.then(() => true), drained.then(() => false)]);
  if (!finished)
    await Promise.all(
      workers.map((worker) =>
        withTimeout(
          worker.disconnect().catch(() => undefined),
          CLOSE_GRACE_MS,
        ),
      ),
    );
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);
}

export interface App {
  readonly redis: RedisClient;
  readonly ledger: Ledger;
  readonly custody: CustodyPort;
  /** The provider's request budget, shared in Redis (and the pause a provider's 429 imposed). */
  readonly budget: RequestBudget;
  readonly queues: Record<QueueName, Queue>;
  readonly workers: Worker[];
  readonly metrics: Metrics;
  /** The error events of the workers, queues and Redis client, and the readiness write probe. */
  readonly redisErrors: RedisErrors;
  /** Whether every worker is running (for readiness). */
  running(): boolean;
  /** Stops taking jobs, waits for in-flight ones, closes every connection. */
  close(): Promise<void>;
}

/**
 * Builds the whole worker from a parsed config: Redis, custody port, ledger, queues and their
 * processors. Nothing here reads the environment; `src/worker.ts` does that and handles signals.
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
      // One line per 429: the endpoint, the Retry-After it asked (as sent, at most 64 characters: the
      // provider's text, never ours) and the pause applied, at most CUSTODY_MAX_PAUSE.
      onPause: (pauseMs, { endpoint, retryAfter, askedMs }, outcome) => {
        const asked = { endpoint, retryAfter: retryAfter?.slice(0, 64), askedMs, pauseMs, capped: pauseMs < askedMs };
        if ('error' in outcome) {
          logger.warn({ err: outcome.error, ...asked }, 'provider answered 429 but the request budget could not be paused');
          return;
        }
        logger.warn(
          { ...asked, pausedUntil: new Date(outcome.until).toISOString() },
          asked.capped
            ? 'provider answered 429: every request class paused, Retry-After capped at CUSTODY_MAX_PAUSE'
            : 'provider answered 429: every request class paused for its Retry-After',
        );
      },
    },
    metrics: (endpoint, status, code, durationMs) => {
      metrics.upstreamRequests.inc({ endpoint, status, code });
      metrics.upstreamDuration.observe({ endpoint, status }, durationMs / 1000);
    },
    tracing: tracing?.upstream,
    onSkippedRecords: skippedRecordsReporter(logger, metrics),
  });
  const onFinished = (queue: string, outcome: string, durationMs: number) => {
    metrics.jobs.inc({ queue, outcome });
    metrics.jobDuration.observe({ queue, outcome }, durationMs / 1000);
  };

  const inFlight = new InFlight();
  const connection = redis;
  const prefix = config.queue.prefix;
  const telemetry = tracing?.bullmq;
  const queues = {
    [QueueName.SUBMIT]: new Queue(QueueName.SUBMIT, { connection, prefix, telemetry }),
    [QueueName.TRACK]: new Queue(QueueName.TRACK, { connection, prefix, telemetry }),
    [QueueName.RECONCILE]: new Queue(QueueName.RECONCILE, { connection, prefix, telemetry }),
  } satisfies Record<QueueName, Queue>;

  const travelRule = new TravelRuleCache(redis, custody, keys, {
    ttlMs: config.submit.travelRuleCacheTtlMs,
    refreshTimeoutMs: config.custody.timeoutMs + 1_000,
    onLookup: (source) => metrics.travelRuleLookups.inc({ source }),
  });

  const trackers = new Trackers(queues[QueueName.TRACK], ledger, config.track.pollMinMs);
  const submitHandler = createSubmitHandler({
    ledger,
    travelRule,
    custody,
    lookupNarrowing: new LookupNarrowing(redis, custody, (wallet) => keys.lookupNarrowing(wallet.walletId, wallet.coin)),
    trackers,
    attempts: config.submit.attempts,
    retry: withBase(SUBMIT_RETRY, config.submit.retryBaseMs, config.submit.retryMaxMs),
    sendDeadlineMs: sendDeadlineMs(config.custody.timeoutMs),
    sendLeaseMs: sendLeaseMs(config.custody.timeoutMs),
    unresolvedAfterMs: config.submit.unresolvedAfterMs,
    deadlineMs: config.track.deadlineMs,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onSendWindowShut: () => metrics.sendWindowShut.inc(),
    onRecoveryLookup: (found) => metrics.recoveryLookups.inc({ found }),
    ...(config.redis.minReplicas > 0
      ? {
          replicasAcknowledged: async (session: string) => {
            const { acknowledged, required } = await ledger.replicated(session, config.redis.minReplicas, config.redis.replicaTimeoutMs);
            if (acknowledged >= required) return true;
            metrics.replicaWaitFailures.inc();
            return false;
          },
        }
      : {}),
  });

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

  /**
   * One BullMQ worker per queue, each behind the processor wrapper that classifies outcomes. The
   * watchdog (queues/watchdog.ts) may replace one that stopped fetching: `workers` always holds the
   * current ones.
   */
  const workers: Worker[] = [];
  const watched: Watched[] = [];
  const startWorker = <R>(queue: QueueName, handler: Handler<R>, options: Partial<WorkerOptions> & { concurrency: number }) => {
    const activity = new QueueActivity(inFlight);
    const create = () => {
      const worker = new TransferWorker<R>(
        queue,
        createProcessor(handler, {
          queue,
          jobName: queue,
          logger,
          rateLimit: (ms) => queues[queue].rateLimit(ms),
          onFinished,
          inFlight: activity,
          onRefused: (name, reason) => metrics.refusedJobs.inc({ queue: name, reason }),
        }),
        { ...workerOptions, name: `${queue}-${process.pid}`, ...options },
      );
      worker.on('error', redisErrors.listener(worker.name));
      return worker;
    };
    const index = workers.push(create()) - 1;
    watched.push({
      queue: queues[queue],
      activity,
      current: () => workers[index]!,
      replace: () => {
        workers[index] = create();
      },
    });
  };

  startWorker(QueueName.SUBMIT, submitHandler, { concurrency: config.submit.concurrency });

  const trackHandler = createTrackHandler({
    ledger,
    custody,
    pollMinMs: config.track.pollMinMs,
    pollMaxMs: config.track.pollMaxMs,
    pacedByBudget: config.custody.maxRps > 0,
    countPollOnRead: config.custody.maxRps === 0,
    deadlineMs: config.track.deadlineMs,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onPollFailed: (streak) => {
      metrics.pollFailures.inc();
      if (streak === POLL_FAILURES_ALERT) metrics.pollFailureStreaks.inc();
    },
    onUnmatched: () => metrics.unmatchedTransfers.inc(),
    onPollStretched: (ms) => metrics.pollStretch.observe(ms / 1000),
    onBroadcast: (calls) => metrics.callsPerTransfer.observe(calls),
    onFoundForOther: () => metrics.foundForOther.inc(),
    wake: async (sequenceId) => {
      const job = await queues[QueueName.TRACK].getJob(trackJobId(sequenceId));
      // Only a tracker waiting for its next poll: an active one reads the ledger itself anyway.
      if (job && (await job.isDelayed())) await job.promote().catch(() => {});
    },
  });
  const limiter = trackLimiter(budget.params.intervalMs);
  startWorker(QueueName.TRACK, trackHandler, { concurrency: config.track.concurrency, ...(limiter ? { limiter } : {}) });

  // Aborted by close(), before the workers drain; a job fetched at that very moment sees it too.
  const shutdown = new AbortController();
  const reconcileHandler = createReconcileHandler({
    ledger,
    submitQueue: queues[QueueName.SUBMIT],
    trackers,
    custody,
    graceMs: config.reconcile.graceMs,
    retentionMs: config.retention.transfersMs,
    shutdown: shutdown.signal,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onRetry: (outcome) => metrics.reconcileRetries.inc({ outcome }),
  });
  startWorker(QueueName.RECONCILE, reconcileHandler, {
    concurrency: 1,
    removeOnComplete: { count: 100 },
    removeOnFail: { count: 100 },
  });
  // One scheduler for all worker processes: upserting the same id from each is idempotent (the next
  // run's job id is derived from its time slot). BullMQ adds a scheduler's next job only when the
  // current one is processed, so a job lost with a Redis failover (acknowledged by a primary that
  // died before its replica had it) would end the schedule for good: every process upserts it again
  // once per RECONCILE_EVERY, which puts back a missing next run and changes nothing otherwise.
  const scheduleReconcile = () =>
    queues[QueueName.RECONCILE].upsertJobScheduler(
      QueueName.RECONCILE,
      { every: config.reconcile.everyMs },
      { name: QueueName.RECONCILE, data: {}, opts: { removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } } },
    );
  await scheduleReconcile();
  const rescheduler = setInterval(() => {
    scheduleReconcile().catch((err: unknown) => logger.warn({ err }, 'could not renew the reconciliation schedule, next try later'));
  }, config.reconcile.everyMs);
  rescheduler.unref();

  const watchdog =
    config.jobs.workerStallMs > 0
      ? startWatchdog(watched, {
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

  let closed = false;
  return {
    redis,
    ledger,
    custody,
    budget,
    queues,
    workers,
    metrics,
    redisErrors,
    running: () => !closed && workers.every((worker) => worker.isRunning()),
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(rescheduler);
      watchdog?.stop();
      // Workers first: they stop fetching and wait for in-flight jobs, which still need Redis and upstream.
      // A reconciliation run can take long (it verifies many broadcasts): it is told to stop early,
      // which is safe since every run picks up where the last one left off.
      shutdown.abort();
      await closeWorkers(workers, inFlight);
      await Promise.all(Object.values(queues).map((queue) => withTimeout(queue.close(), CLOSE_GRACE_MS)));
      await custody.close();
      await closeRedis(redis, CLOSE_GRACE_MS);
    },
  };
}
