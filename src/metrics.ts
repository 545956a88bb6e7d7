import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Every Prometheus metric of the worker, on its own registry (no global state, so tests and several
 * apps in one process do not collide). Names follow Prometheus conventions; labels are low-cardinality
 * (queue, outcome, endpoint, status, event), never a sequenceId.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'custody_worker_' });

  const metrics = {
    registry,
    jobs: new Counter({
      name: 'custody_worker_jobs_total',
      help: 'Jobs processed, by queue and outcome (completed, delayed, rate_limited, error).',
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
      help: 'Jobs in each queue by state, read when scraped.',
      labelNames: ['queue', 'state'] as const,
      registers: [registry],
    }),
    upstreamRequests: new Counter({
      name: 'custody_upstream_requests_total',
      help: 'Custody API requests by endpoint and HTTP status (or error code when there was no answer).',
      labelNames: ['endpoint', 'status'] as const,
      registers: [registry],
    }),
    upstreamDuration: new Histogram({
      name: 'custody_upstream_request_duration_seconds',
      help: 'Custody API request latency by endpoint and status.',
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
      help: 'Non-terminal transfers unchanged for longer than STALE_TRANSFER_AGE (15 min), by state, read from the ledger when scraped.',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    travelRuleLookups: new Counter({
      name: 'custody_travel_rule_lookups_total',
      help: 'Travel-rule setting lookups by source: cache (shared Redis cache hit) or upstream.',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
  };
  return metrics;
}

export type Metrics = ReturnType<typeof createMetrics>;
