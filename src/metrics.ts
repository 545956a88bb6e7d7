import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { EVENT_TYPES } from '../packages/producer/src/catalog.ts';
import { QueueName } from './queues/names.ts';
import { BUDGET_CLASSES } from './custody/budget.ts';
import { CUSTODY_ENDPOINTS, NO_ANSWER_CODES } from './custody/errors.ts';
import { NO_ANSWER_STATUS, WAKEUP_OUTCOMES } from './custody/port.ts';
import { haltedStates, wakeupProviders } from './custody/providers.ts';
import { TRAVEL_RULE_SOURCES } from './custody/travel-rule-cache.ts';
import { JOB_OUTCOMES } from './queues/outcomes.ts';
import { knownActionOutcomes } from './operations/audit.ts';
import { REFUSED_WRITE_CODES } from './redis-errors.ts';
import { TRY_RESULTS } from './webhooks/answer.ts';

/** How a webhook delivery ends: delivered (a 2xx), or dead-lettered once its tries ran out. */
export const WEBHOOK_OUTCOMES = ['delivered', 'dead-lettered'] as const;

/** The steps that count ambiguous matches: tracking, resolving an unknown send, reconciliation. */
export const AMBIGUOUS_STEPS = ['track', 'resolve', 'reconcile'] as const;

/**
 * Every Prometheus metric of the worker, on its own registry (no global state, so tests and several
 * apps in one process do not collide). Names follow Prometheus conventions; labels are low-cardinality
 * (queue, outcome, endpoint, status, event), never a sequenceId.
 */
export function createMetrics() {
  const metrics = declareMetrics();
  zeroKnownSeries(metrics);
  return metrics;
}

function declareMetrics() {
  const registry = new Registry();
  // Node's defaults under their standard names (process_*, nodejs_*): the common Node.js dashboards read them.
  collectDefaultMetrics({ register: registry });

  const metrics = {
    registry,
    jobs: new Counter({
      name: 'custody_worker_jobs_total',
      help: `Jobs processed, by queue and outcome (${JOB_OUTCOMES.join(', ')}).`,
      labelNames: ['queue', 'outcome'] as const,
      registers: [registry],
    }),
    jobDuration: new Histogram({
      name: 'custody_worker_job_duration_seconds',
      help: 'Time one processing of a job took, by queue and outcome.',
      labelNames: ['queue', 'outcome'] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 30],
      registers: [registry],
    }),
    queueJobs: new Gauge({
      name: 'custody_worker_queue_jobs',
      help: 'Jobs in each queue by state, read from Redis when scraped. Queue-wide: the same value on every replica, aggregate with max, not sum.',
      labelNames: ['queue', 'state'] as const,
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: 'custody_upstream_requests_total',
      help: 'Custody API requests by endpoint (the port\'s operation, whichever provider: send, lookup, detail, gate, token), HTTP status ("none": no answer) and error code when no answer came ("none" when one did).',
      labelNames: ['endpoint', 'status', 'code'] as const,
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'custody_upstream_request_duration_seconds',
      help: 'Custody API request latency by endpoint and HTTP status ("none": no answer).',
      labelNames: ['endpoint', 'status'] as const,
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers: [registry],
    }),
    transferEvents: new Counter({
      name: 'custody_transfer_events_total',
      help: 'Events published by this process, by type (terminal states and transfer.submitted).',
      labelNames: ['event'] as const,
      registers: [registry],
    }),
    transfersCancelled: new Counter({
      name: 'custody_transfers_cancelled_total',
      help: 'Transfers this process cancelled before any send (transfer.cancelled, through HTTP POST /transfers/:sequenceId/cancel). A cancel made with the CLI is not counted here: the events stream has every transfer.cancelled.',
      registers: [registry],
    }),
    consoleActions: new Counter({
      name: 'custody_console_actions_total',
      help: 'Operator actions this process handled (cancel, resolve, recheck, accept-epoch, over HTTP), allowed or refused, by action and outcome: the outcome each audit entry names (forbidden: a viewer asked; not-replicated, error: decided but not confirmed). Actions run with the CLI are on the audit stream only.',
      labelNames: ['action', 'outcome'] as const,
      registers: [registry],
    }),
    providerWebhooks: new Counter({
      name: 'custody_provider_webhooks_total',
      help: `Calls of a provider's webhook (POST /providers/<provider>/webhook), a wake-up for tracking, by provider and outcome (${WAKEUP_OUTCOMES.join(', ')}): accepted woke a tracking poll; the others were answered and ignored (forged: 401).`,
      labelNames: ['provider', 'outcome'] as const,
      registers: [registry],
    }),
    refusedJobs: new Counter({
      name: 'custody_worker_refused_jobs_total',
      help: 'Jobs failed for good before their handler ran, by queue and reason (job_name: another job name; unparsable_data: data that is not JSON).',
      labelNames: ['queue', 'reason'] as const,
      registers: [registry],
    }),
    skippedRecords: new Counter({
      name: 'custody_upstream_skipped_records_total',
      help: 'Upstream list records that failed the schema and were skipped (matching ran among the others), by endpoint; ours="true" when the skipped record carried the sequenceId looked for.',
      labelNames: ['endpoint', 'ours'] as const,
      registers: [registry],
    }),
    ambiguousMatches: new Counter({
      name: 'custody_ambiguous_matches_total',
      help: 'Upstream answers in which several records matched one transfer (no guess was made), by step (track, resolve, reconcile).',
      labelNames: ['step'] as const,
      registers: [registry],
    }),
    staleTransfers: new Gauge({
      name: 'custody_transfers_stale',
      help: 'Non-terminal transfers unchanged for longer than STALE_TRANSFER_AGE (15 min), by state, read from the ledger when scraped. Ledger-wide: the same value on every replica, aggregate with max.',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    activeTransfers: new Gauge({
      name: 'custody_transfers_active',
      help: 'Transfers not yet in a terminal state, read from the ledger when scraped. Ledger-wide: aggregate with max.',
      registers: [registry],
    }),
    oldestActiveAge: new Gauge({
      name: 'custody_transfers_oldest_active_age_seconds',
      help: 'Age of the least recently changed non-terminal transfer (0 when none), read from the ledger when scraped. Ledger-wide: aggregate with max.',
      registers: [registry],
    }),
    queueOldestAge: new Gauge({
      name: 'custody_worker_queue_oldest_job_age_seconds',
      help: 'Age of the oldest waiting job per queue (0 when none), read from Redis when scraped. Queue-wide: aggregate with max.',
      labelNames: ['queue'] as const,
      registers: [registry],
    }),
    reconcileLastCompleted: new Gauge({
      name: 'custody_reconcile_last_completed_timestamp_seconds',
      help: 'When the last reconciliation run completed (any replica; 0 when none is kept), read from the reconcile queue when scraped. Queue-wide: aggregate with max.',
      registers: [registry],
    }),
    reconcileRetries: new Counter({
      name: 'custody_reconcile_retries_total',
      help: 'Failed submit jobs reconciliation retried (outcome="retried"), and those it left failed, once each, after RECONCILE_MAX_RETRIES (5) retries of its own (outcome="gave-up": retry by hand once the cause is fixed).',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    reconcileInterval: new Gauge({
      name: 'custody_reconcile_interval_seconds',
      help: 'RECONCILE_EVERY: the reconciliation schedule of this process.',
      registers: [registry],
    }),
    ready: new Gauge({
      name: 'custody_worker_ready',
      help: '1 when this process is ready (its workers run, Redis answered this scrape and took its write probe), else 0; as /readyz.',
      registers: [registry],
    }),
    pollFailures: new Counter({
      name: 'custody_track_poll_failures_total',
      help: 'get-transfer polls of a tracked transfer that failed (tracking continues).',
      registers: [registry],
    }),
    pollFailureStreaks: new Counter({
      name: 'custody_track_poll_failure_streaks_total',
      help: 'Tracked transfers whose get-transfer polls failed POLL_FAILURES_ALERT (10) times in a row.',
      registers: [registry],
    }),
    unmatchedTransfers: new Counter({
      name: 'custody_track_unmatched_total',
      help: 'Tracked transfers whose get-transfer answers listed sends of their wallet without a match for UNMATCHED_POLLS_ALERT (20) polls in a row (counted once per transfer).',
      registers: [registry],
    }),
    haltedTransfers: new Counter({
      name: 'custody_track_halted_total',
      help: "Tracked transfers the provider halted without a txid, by the provider's state. A final state (BitGo: rejected by an approver, failed, deleted) ends the transfer transfer.halted; one that is not (BitGo: removed by a re-org) leaves it tracked until the provider moves on, an operator acts or TRACK_DEADLINE. Counted once per transfer in a state that is not final, and once when a final state ends it.",
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    workersReplaced: new Counter({
      name: 'custody_worker_replaced_total',
      help: 'BullMQ workers of this process replaced because they started no job for WORKER_STALL_TIMEOUT while their queue had work due (a worker that stopped fetching, as after some Redis failovers).',
      labelNames: ['queue'] as const,
      registers: [registry],
    }),
    redisRefusedWrites: new Counter({
      name: 'custody_redis_refused_writes_total',
      help: 'Redis replies refusing a write, seen by this process (its workers, queues and readiness probe), by code: OOM (maxmemory reached), READONLY (a replica), MISCONF (a failed RDB save stops writes), NOREPLICAS (min-replicas-to-write not met). No job moves while they last.',
      labelNames: ['code'] as const,
      registers: [registry],
    }),
    replicaWaitFailures: new Counter({
      name: 'custody_redis_replica_wait_failures_total',
      help: 'Sends not made because not every online replica (or fewer than REDIS_MIN_REPLICAS) acknowledged the send in flight within REDIS_REPLICA_TIMEOUT (the step retries later).',
      registers: [registry],
    }),
    payloadConflicts: new Counter({
      name: 'custody_payload_conflicts_total',
      help: 'Submit jobs that came under another job id with another payload for a sequenceId whose transfer exists: never sent, no event of their own (the transfer keeps its first payload).',
      registers: [registry],
    }),
    sendWindowShut: new Counter({
      name: 'custody_send_window_shut_total',
      help: 'Sends not written because the send lease may have ended before the first byte (its reply came late, or the process was frozen): nothing sent, the transfer left to whoever holds it.',
      registers: [registry],
    }),
    ledgerLost: new Counter({
      name: 'custody_ledger_lost_total',
      help: 'Times this process found that Redis no longer holds the ledger epoch it knew (the ledger was lost: a node promoted empty, a flush) and started a recovery window.',
      registers: [registry],
    }),
    ledgerRecoveryUntil: new Gauge({
      name: 'custody_ledger_recovery_until_seconds',
      help: 'End of the ledger recovery window (Unix seconds; 0: none) read from Redis at each scrape (the same on every replica: aggregate with max): until then every transfer is looked up before its first send.',
      registers: [registry],
    }),
    recoveryLookups: new Counter({
      name: 'custody_ledger_recovery_lookups_total',
      help: 'Lookups by sequenceId made while the ledger recovers from a loss, by what they found (found: submitted without a send; absent: sent after the lookup; ambiguous: not sent, left to resolve).',
      labelNames: ['found'] as const,
      registers: [registry],
    }),
    travelRuleLookups: new Counter({
      name: 'custody_travel_rule_lookups_total',
      help: 'Travel-rule setting lookups by source: cache (shared Redis cache hit) or upstream.',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    budgetUsed: new Counter({
      name: 'custody_budget_used_total',
      help: 'Request-budget slots taken, by class (send, gate, settle, enrich, poll, verify): upstream calls as the budget counted them.',
      labelNames: ['class'] as const,
      registers: [registry],
    }),
    budgetWait: new Histogram({
      name: 'custody_budget_wait_seconds',
      help: 'How long a request waited for its budget slot, by class (0 for a free slot).',
      labelNames: ['class'] as const,
      buckets: [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
      registers: [registry],
    }),
    budgetRefused: new Counter({
      name: 'custody_budget_refused_total',
      help: 'Requests the budget turned away (nothing sent; the job comes back later), by class.',
      labelNames: ['class'] as const,
      registers: [registry],
    }),
    pollStretch: new Histogram({
      name: 'custody_track_poll_stretch_seconds',
      help: 'Polls the request budget turned away (a higher class took the slot): how long the tracking queue then waited for the next free slot before handing out a job.',
      buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
      registers: [registry],
    }),
    budgetPauses: new Counter({
      name: 'custody_budget_pauses_total',
      help: 'Provider 429 answers that paused every class of the budget for their Retry-After.',
      registers: [registry],
    }),
    upstreamPausedUntil: new Gauge({
      name: 'custody_upstream_paused_until_seconds',
      help: "End of the pause a provider's 429 imposed on every request class of every process (Unix seconds, Redis's clock; 0: none): its Retry-After, at most CUSTODY_MAX_PAUSE. Read from Redis at each scrape (the same on every replica: aggregate with max).",
      registers: [registry],
    }),
    foundForOther: new Counter({
      name: 'custody_track_found_in_other_answers_total',
      help: "Tracked transfers found with their txid in another transfer's get-transfer answer (a poll of their own saved).",
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'custody_webhook_deliveries_total',
      help: `Webhook deliveries ended by this process, by endpoint and outcome (${WEBHOOK_OUTCOMES.join(', ')}: its tries ran out, it went to the endpoint's dead-letter stream).`,
      labelNames: ['endpoint', 'outcome'] as const,
      registers: [registry],
    }),
    webhookAttempts: new Counter({
      name: 'custody_webhook_attempts_total',
      help: `Webhook delivery tries made by this process, by endpoint and result (${TRY_RESULTS.join(', ')}).`,
      labelNames: ['endpoint', 'result'] as const,
      registers: [registry],
    }),
    webhookOldestAge: new Gauge({
      name: 'custody_webhook_oldest_undelivered_age_seconds',
      help: 'Age of the oldest event queued for an endpoint and not yet delivered nor dead-lettered (0 when none), read from Redis by each process that delivers: aggregate with max.',
      labelNames: ['endpoint'] as const,
      registers: [registry],
    }),
    webhookDisabled: new Gauge({
      name: 'custody_webhook_endpoint_disabled',
      help: 'Whether an endpoint is disabled (1: it answered 410; nothing is sent to it until `npm run cli -- webhooks enable <endpoint>`), read from Redis: aggregate with max.',
      labelNames: ['endpoint'] as const,
      registers: [registry],
    }),
    callsPerTransfer: new Histogram({
      name: 'custody_upstream_calls_per_transfer',
      help: 'Upstream calls made for one transfer (sends, lookups, polls, enrichment), observed when it is broadcast.',
      buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100],
      registers: [registry],
    }),
  };
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * The webhook series of the configured endpoints, at 0 from start-up (their names are known only from
 * WEBHOOK_ENDPOINTS, so the webhook subsystem calls this as it starts).
 */
export function zeroWebhookSeries(metrics: Metrics, endpoints: readonly string[]): void {
  for (const endpoint of endpoints) {
    for (const outcome of WEBHOOK_OUTCOMES) metrics.webhookDeliveries.inc({ endpoint, outcome }, 0);
    for (const result of TRY_RESULTS) metrics.webhookAttempts.inc({ endpoint, result }, 0);
    metrics.webhookOldestAge.set({ endpoint }, 0);
    metrics.webhookDisabled.set({ endpoint }, 0);
  }
}

/**
 * Every series an alert rule or the board reads exists from start-up, at 0 for each known label value:
 * `increase()` cannot see a series that first appears at 1, so without this the first
 * transfer.unresolved (or halted transfer) of a process would never fire its alert
 * (deploy/prometheus/alerts.yml). test/deploy/metrics-at-startup.test.ts checks a fresh worker of each provider.
 */
function zeroKnownSeries(metrics: ReturnType<typeof declareMetrics>): void {
  for (const event of EVENT_TYPES) metrics.transferEvents.inc({ event }, 0);
  for (const step of AMBIGUOUS_STEPS) metrics.ambiguousMatches.inc({ step }, 0);
  // Whichever provider runs (a fleet may mix them), so the board and the alerts read the same series.
  for (const state of haltedStates()) metrics.haltedTransfers.inc({ state }, 0);
  for (const provider of wakeupProviders()) {
    for (const outcome of WAKEUP_OUTCOMES) metrics.providerWebhooks.inc({ provider, outcome }, 0);
  }
  // Statuses that came are open-ended; a request that got none is what the error-rate alert watches.
  for (const endpoint of CUSTODY_ENDPOINTS) {
    for (const code of NO_ANSWER_CODES) metrics.upstreamRequests.inc({ endpoint, status: NO_ANSWER_STATUS, code }, 0);
    metrics.upstreamDuration.zero({ endpoint, status: NO_ANSWER_STATUS });
  }
  for (const source of TRAVEL_RULE_SOURCES) metrics.travelRuleLookups.inc({ source }, 0);
  for (const ours of ['true', 'false']) metrics.skippedRecords.inc({ endpoint: 'lookup', ours }, 0);
  for (const klass of BUDGET_CLASSES) {
    metrics.budgetUsed.inc({ class: klass }, 0);
    metrics.budgetRefused.inc({ class: klass }, 0);
  }
  metrics.budgetPauses.inc(0);
  metrics.upstreamPausedUntil.set(0);
  for (const outcome of ['retried', 'gave-up']) metrics.reconcileRetries.inc({ outcome }, 0);
  metrics.foundForOther.inc(0);
  metrics.sendWindowShut.inc(0);
  metrics.payloadConflicts.inc(0);
  for (const code of REFUSED_WRITE_CODES) metrics.redisRefusedWrites.inc({ code }, 0);
  metrics.transfersCancelled.inc(0);
  for (const { action, outcome } of knownActionOutcomes()) metrics.consoleActions.inc({ action, outcome }, 0);
  metrics.ledgerLost.inc(0);
  metrics.ledgerRecoveryUntil.set(0);
  for (const found of ['found', 'absent', 'ambiguous']) metrics.recoveryLookups.inc({ found }, 0);
  for (const queue of Object.values(QueueName)) {
    for (const reason of ['job_name', 'unparsable_data']) metrics.refusedJobs.inc({ queue, reason }, 0);
    metrics.workersReplaced.inc({ queue }, 0);
    for (const outcome of JOB_OUTCOMES) {
      metrics.jobs.inc({ queue, outcome }, 0);
      metrics.jobDuration.zero({ queue, outcome });
    }
  }
}
