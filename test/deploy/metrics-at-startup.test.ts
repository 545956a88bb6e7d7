/**
 * Every metric an alert, a recording rule or the Grafana board reads is on the real worker's first
 * /metrics, before any transfer, whichever custody provider it runs with. A counter that first appears
 * at 1 shows no increase() to Prometheus, so the first event of a process would never fire its alert
 * (deploy/prometheus/alerts.test.yml shows it): a counter whose label values are known from the code is
 * there at 0 for each of them. Gauges read from Redis at scrape time, and prom-client's defaults, need
 * only be there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../packages/producer/src/catalog.ts';
import { BUDGET_CLASSES } from '../../src/custody/budget.ts';
import { CUSTODY_ENDPOINTS, NO_ANSWER_CODES } from '../../src/custody/errors.ts';
import { NO_ANSWER_STATUS } from '../../src/custody/port.ts';
import { haltedStates } from '../../src/custody/providers.ts';
import { WAKEUP_OUTCOMES } from '../../src/custody/port.ts';
import { TRAVEL_RULE_SOURCES } from '../../src/custody/travel-rule-cache.ts';
import { AMBIGUOUS_STEPS, WEBHOOK_OUTCOMES } from '../../src/metrics.ts';
import { knownActionOutcomes } from '../../src/operations/audit.ts';
import { JOB_OUTCOMES } from '../../src/queues/outcomes.ts';
import { QueueName } from '../../src/queues/names.ts';
import { REFUSED_WRITE_CODES } from '../../src/redis-errors.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { workerBitgoEnv, workerCustodyEnv } from '../../src/simulator/worker-env.ts';
import { expressions, metricNames, PROMETHEUS_OWN, variableExpressions } from '../helpers/deploy-queries.ts';
import { FAST_ENV } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';
import { TRY_RESULTS } from '../../src/webhooks/answer.ts';

/**
 * One webhook endpoint, so that the webhook series exist from start-up. Never called: it takes only
 * `transfer.cancelled`, which nothing publishes here (the reconciliation's first run publishes
 * `reconcile.completed` as the worker starts, and a try of that would count an attempt).
 */
const WEBHOOK_ENV = {
  WEBHOOK_ENDPOINTS: JSON.stringify([
    {
      name: 'hook',
      url: 'http://127.0.0.1:9/hook',
      secrets: [`whsec_${Buffer.alloc(24, 7).toString('base64')}`],
      events: ['transfer.cancelled'],
    },
  ]),
  WEBHOOK_ALLOW_HTTP: '1',
  WEBHOOK_ALLOW_PRIVATE: '1',
};

const QUEUES = Object.values(QueueName);

/**
 * The label values each counter (or histogram) read by the deployment can take, as the code lists them:
 * every combination of one value per label, or the combinations themselves where only some exist.
 */
const KNOWN: Readonly<Record<string, Readonly<Record<string, readonly string[]>> | ReadonlyArray<Record<string, string>>>> = {
  custody_worker_jobs_total: { queue: QUEUES, outcome: JOB_OUTCOMES },
  custody_worker_job_duration_seconds_bucket: { queue: QUEUES, outcome: JOB_OUTCOMES },
  custody_transfer_events_total: { event: EVENT_TYPES },
  custody_track_halted_total: { state: haltedStates() },
  custody_ambiguous_matches_total: { step: AMBIGUOUS_STEPS },
  custody_travel_rule_lookups_total: { source: TRAVEL_RULE_SOURCES },
  custody_budget_used_total: { class: BUDGET_CLASSES },
  custody_budget_refused_total: { class: BUDGET_CLASSES },
  custody_redis_refused_writes_total: { code: REFUSED_WRITE_CODES },
  custody_worker_replaced_total: { queue: QUEUES },
  // Each operator action with the outcomes it can have (an audit entry's), not every pairing.
  custody_console_actions_total: knownActionOutcomes(),
  // The alert on the error rate counts requests that got no answer; statuses that did come are open-ended.
  custody_upstream_requests_total: { endpoint: CUSTODY_ENDPOINTS, status: [NO_ANSWER_STATUS], code: NO_ANSWER_CODES },
  custody_upstream_request_duration_seconds_bucket: { endpoint: CUSTODY_ENDPOINTS, status: [NO_ANSWER_STATUS] },
  // Per configured endpoint (here the one of WEBHOOK_ENV).
  custody_webhook_deliveries_total: { endpoint: ['hook'], outcome: WEBHOOK_OUTCOMES },
  custody_webhook_attempts_total: { endpoint: ['hook'], result: TRY_RESULTS },
};

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition, and each family's type. */
function parseExposition(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1]!, type[2]!);
    const sample = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const [, name, value] of (sample[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[name!] = value!;
    samples.push({ name: sample[1]!, labels, value: Number(sample[3]) });
  }
  return { samples, types };
}

/** Every combination of one value per label. */
function combinations(values: Readonly<Record<string, readonly string[]>>): Array<Record<string, string>> {
  return Object.entries(values).reduce<Array<Record<string, string>>>(
    (partial, [label, options]) => partial.flatMap((labels) => options.map((value) => ({ ...labels, [label]: value }))),
    [{}],
  );
}

/** The family a sample name belongs to (a histogram's `_bucket`, `_sum` and `_count`). */
function familyOf(name: string, types: ReadonlyMap<string, string>): string {
  if (types.has(name)) return name;
  return name.replace(/_(bucket|sum|count)$/, '');
}

/** Metric names the deployment reads, each with where. */
const used = new Map<string, string[]>();
for (const { where, expr } of [...expressions, ...variableExpressions]) {
  for (const name of metricNames(expr)) if (!PROMETHEUS_OWN.has(name)) used.set(name, [...new Set([...(used.get(name) ?? []), where])]);
}

let bitgoSim: BitgoSimulator;
let walletSim: Simulator;
beforeAll(async () => {
  [walletSim, bitgoSim] = await Promise.all([startSimulator({ port: 0 }), startBitgoSimulator({ port: 0 })]);
});
afterAll(async () => {
  await killAllWorkers();
  await Promise.all([walletSim?.close(), bitgoSim?.close()]);
});

describe.each([
  { provider: 'wallet-service (the default)', env: () => workerCustodyEnv(walletSim) },
  { provider: 'bitgo', env: () => workerBitgoEnv(bitgoSim) },
])('a fresh worker with $provider', ({ provider, env }) => {
  let samples: Sample[];
  let types: Map<string, string>;
  beforeAll(async () => {
    const worker = spawnWorker(
      {
        REDIS_URL: testRedisUrl(),
        QUEUE_PREFIX: uniquePrefix('metrics-at-startup'),
        ...env(),
        HTTP_PORT: '0',
        ...FAST_ENV,
        ...WEBHOOK_ENV,
        LOG_LEVEL: 'info',
      },
      { name: `metrics-at-startup-${provider.split(' ')[0]}` },
    );
    const started = JSON.parse(await worker.waitForLog('worker started', 60_000)) as { http: string };
    const response = await fetch(`${started.http}/metrics`, { signal: AbortSignal.timeout(5_000) });
    expect(response.status).toBe(200);
    ({ samples, types } = parseExposition(await response.text()));
    await worker.stop(10_000);
  }, 90_000);

  it('exports every metric the alerts, recording rules and board read', () => {
    expect(used.size).toBeGreaterThan(20);
    const present = new Set(samples.map((sample) => sample.name));
    const absent = [...used].filter(([name]) => !present.has(name)).map(([name, where]) => `${name} (${where.join('; ')})`);
    expect(absent).toEqual([]);
  });

  it('has a sample at 0 for every known label value of the counters they read', () => {
    const missing: string[] = [];
    for (const [name, values] of Object.entries(KNOWN)) {
      for (const wanted of Array.isArray(values) ? values : combinations(values as Readonly<Record<string, readonly string[]>>)) {
        const found = samples.filter((s) => s.name === name && Object.entries(wanted).every(([label, value]) => s.labels[label] === value));
        // The reconciliation scheduler's first run starts with the worker: its job may already be counted.
        const startedWork = wanted.queue === QueueName.RECONCILE;
        if (found.length === 0 || (!startedWork && found.some((s) => s.value !== 0))) missing.push(`${name}${JSON.stringify(wanted)}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("counts BitGo's webhook calls from 0, for every outcome, whichever provider runs", () => {
    const series = samples.filter((s) => s.name === 'custody_provider_webhooks_total');
    expect(series.map((s) => `${s.labels.provider}:${s.labels.outcome}=${s.value}`).sort()).toEqual(
      WAKEUP_OUTCOMES.map((outcome) => `bitgo:${outcome}=0`).sort(),
    );
  });

  it('counts payload conflicts (a second job with another payload for a used sequenceId) from 0', () => {
    expect(samples.filter((s) => s.name === 'custody_payload_conflicts_total').map((s) => s.value)).toEqual([0]);
  });

  it('knows the label values of every labelled counter and histogram they read', () => {
    const unknown = [...used.keys()].filter((name) => {
      const type = types.get(familyOf(name, types));
      const labelled = samples.some((s) => s.name === name && Object.keys(s.labels).some((label) => label !== 'le'));
      return (type === 'counter' || type === 'histogram') && labelled && KNOWN[name] === undefined;
    });
    expect(unknown).toEqual([]);
  });
});
