import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { board, expressions, metricNames, PROMETHEUS_OWN, ruleFiles } from '../helpers/deploy-queries.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

/**
 * The shipped Grafana board and Prometheus alerts name only metrics the worker exports: every PromQL
 * expression is tokenised and each metric name checked against the families a real worker lists on
 * /metrics after a transfer. A renamed metric, or a panel written against a metric that does not exist,
 * fails here instead of showing "No data" in production.
 */
function balanced(expr: string): boolean {
  let depth = 0;
  for (const char of expr.replace(/"(?:[^"\\]|\\.)*"/g, '')) {
    if ('({['.includes(char)) depth += 1;
    if (')}]'.includes(char)) depth -= 1;
    if (depth < 0) return false;
  }
  return depth === 0;
}

/** Whether every occurrence of `metric` in `expr` sits directly inside a max(...) aggregation. */
function aggregatedWithMax(expr: string, metric: string): boolean {
  for (const match of expr.matchAll(new RegExp(`\\b${metric}\\b`, 'g'))) {
    let depth = 0;
    let open = -1;
    for (let index = match.index - 1; index >= 0; index--) {
      const char = expr[index];
      if (char === ')') depth += 1;
      else if (char === '(') {
        if (depth === 0) {
          open = index;
          break;
        }
        depth -= 1;
      }
    }
    if (open === -1 || !/\bmax\s*(?:(?:by|without)\s*\([^)]*\)\s*)?$/.test(expr.slice(0, open))) return false;
  }
  return true;
}

describe('deploy/: Grafana board and Prometheus alerts', () => {
  let h: Harness;
  let server: FastifyInstance;
  let exported: Set<string>;
  let queueWide: string[];
  beforeAll(async () => {
    h = await startHarness({ name: 'metric-names' });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    const payload = samplePayload();
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);
    const text = (await server.inject({ method: 'GET', url: '/metrics' })).body;
    exported = new Set();
    queueWide = [];
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      exported.add(name!);
      if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name}${suffix}`);
      if (type === 'summary') for (const suffix of ['_sum', '_count']) exported.add(`${name}${suffix}`);
    }
    for (const [, name, help] of text.matchAll(/^# HELP (\S+) (.*)$/gm)) if (/aggregate with max/.test(help!)) queueWide.push(name!);
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('reads what a running worker exports, standard Node metrics included', () => {
    for (const name of [
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_p99_seconds',
      'custody_worker_jobs_total',
      'custody_upstream_request_duration_seconds_bucket',
    ]) {
      expect(exported.has(name), name).toBe(true);
    }
    expect(queueWide).toEqual(
      expect.arrayContaining([
        'custody_worker_queue_jobs',
        'custody_transfers_stale',
        'custody_reconcile_last_completed_timestamp_seconds',
      ]),
    );
  });

  it('names only exported metrics in every panel and rule', () => {
    expect(expressions.length).toBeGreaterThan(20);
    const unknown: string[] = [];
    for (const { where, expr } of expressions) {
      const names = metricNames(expr);
      if (names.length === 0) unknown.push(`${where}: no metric in ${expr}`);
      for (const name of names) if (!exported.has(name) && !PROMETHEUS_OWN.has(name)) unknown.push(`${where}: ${name}`);
    }
    expect(unknown).toEqual([]);
  });

  it('aggregates queue- and ledger-wide gauges with max (a sum over replicas would multiply them)', () => {
    const summed: string[] = [];
    for (const { where, expr } of expressions) {
      for (const name of queueWide)
        if (new RegExp(`\\b${name}\\b`).test(expr) && !aggregatedWithMax(expr, name)) summed.push(`${where}: ${name}`);
    }
    expect(summed).toEqual([]);
  });

  it('has well-formed panels and rules', () => {
    for (const { where, expr } of expressions) expect(balanced(expr), `${where}: ${expr}`).toBe(true);
    for (const panel of board.panels) {
      expect(panel.title, JSON.stringify(panel).slice(0, 80)).toBeTruthy();
      expect(panel.targets?.length ?? 0, `panel "${panel.title}"`).toBeGreaterThan(0);
    }
    const rules = ruleFiles.flatMap((file) => file.groups.flatMap((group) => group.rules)).filter((rule) => rule.alert !== undefined);
    expect(rules.map((rule) => rule.alert)).toEqual(
      expect.arrayContaining([
        'CustodyTransferUnresolved',
        'CustodyTransfersStuck',
        'CustodyPollFailureStreaks',
        'CustodyReconcileNotCompleted',
        'CustodyUpstreamErrorRate',
        'CustodyWorkerNotReady',
        'CustodyLedgerLost',
        'CustodySendWindowShut',
        'CustodyRedisRefusesWrites',
      ]),
    );
    for (const rule of rules) {
      expect(rule.alert, JSON.stringify(rule)).toMatch(/^[A-Z][A-Za-z]+$/);
      expect(rule.for, `${rule.alert}: for`).toMatch(/^\d+[smh]$/);
      expect(rule.labels?.severity, `${rule.alert}: severity`).toMatch(/^(page|warn)$/);
      expect(rule.annotations?.summary, `${rule.alert}: summary`).toBeTruthy();
    }
  });

  it('the tokeniser finds metric names and skips functions, labels, keywords and durations', () => {
    expect(
      metricNames('sum by (endpoint) (rate(a_total{status=~"5..|none",x="y"}[5m])) / ignoring(code) b_total > 0.1 and on(job) up == 1e3'),
    ).toEqual(['a_total', 'b_total', 'up']);
    expect(aggregatedWithMax('max by (queue) (q_jobs{state="x"})', 'q_jobs')).toBe(true);
    expect(aggregatedWithMax('sum(q_jobs)', 'q_jobs')).toBe(false);
    expect(aggregatedWithMax('q_jobs > 0', 'q_jobs')).toBe(false);
  });
});
