import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { createLogger } from '../../src/logger.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';

const USER = 'ops';
const PASSWORD = 'dashboard-pass-123';
/** Every route but /healthz, /readyz and /metrics needs it while credentials are set (test/http/auth.test.ts). */
const AUTH = { headers: { authorization: `Basic ${btoa(`${USER}:${PASSWORD}`)}` } };

describe('HTTP server', () => {
  let h: Harness;
  let server: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    h = await startHarness({ name: 'http', env: { DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD } });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('answers /healthz and /readyz while Redis and the workers run', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', redis: true, writes: true, workers: true });
  });

  it('looks up a broadcast transfer with its state, attempts, txid, gate decision and events', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    const broadcast = await h.producer.waitForTerminal(sequenceId, 10_000);
    const response = await fetch(`${base}/transfers/${sequenceId}`, AUTH);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { events: Array<{ event: string }> };
    expect(body).toMatchObject({
      sequenceId,
      state: 'broadcast',
      attempts: 1,
      txid: dataOf(broadcast, 'transfer.broadcast').txid,
      gate: { outcome: 'passed', applies: false },
      version: 2,
    });
    expect(body.events.map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expect(JSON.stringify(body)).not.toMatch(/@example\.com|phoneNumber/);
  });

  it('answers 404 for an unknown transfer and 400 for an invalid sequenceId', async () => {
    expect((await fetch(`${base}/transfers/no-such-transfer`, AUTH)).status).toBe(404);
    expect((await fetch(`${base}/transfers/${'x'.repeat(129)}`, AUTH)).status).toBe(400);
    expect((await fetch(`${base}/transfers/a%20b`, AUTH)).status).toBe(400);
  });

  it('exposes metrics with names and labels after a transfer', async () => {
    const payload = samplePayload();
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 10_000);
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    for (const line of [
      /custody_worker_jobs_total\{queue="submit-transaction",outcome="completed"\} [1-9]/,
      /custody_worker_job_duration_seconds_bucket\{le="[^"]+",queue="submit-transaction",outcome="completed"\}/,
      /custody_worker_queue_jobs\{queue="track-transfer",state="completed"\} [1-9]/,
      /custody_upstream_requests_total\{endpoint="send",status="200",code="none"\} [1-9]/,
      /custody_upstream_requests_total\{endpoint="lookup",status="200",code="none"\} [1-9]/,
      /custody_upstream_request_duration_seconds_bucket\{le="[^"]+",endpoint="gate",status="200"\}/,
      /custody_transfer_events_total\{event="transfer.submitted"\} [1-9]/,
      /custody_transfer_events_total\{event="transfer.broadcast"\} [1-9]/,
      /custody_travel_rule_lookups_total\{source="(cache|upstream)"\} [1-9]/,
      /^process_cpu_seconds_total [0-9.e+-]+$/m,
      /^nodejs_eventloop_lag_seconds [0-9.e+-]+$/m,
      /^custody_worker_ready 1$/m,
      /^custody_reconcile_interval_seconds 3600$/m,
      /^custody_transfers_active [0-9]+$/m,
      /^custody_worker_queue_oldest_job_age_seconds\{queue="submit-transaction"\} [0-9.e+-]+$/m,
    ]) {
      expect(text).toMatch(line);
    }
  });

  it('labels a request that got no answer status="none" with its error code, and one that got an answer with its status', async () => {
    h.sim.setFault('getTransfer', { sequence: ['reset', 'reset'] });
    await expect(h.app!.custody.getTransfersBySequenceId({ walletId: 310, coin: 'eth' }, 'reset-probe')).rejects.toThrow();
    h.sim.setFault('getTransfer', { sequence: ['5xx'] });
    await expect(h.app!.custody.getTransfersBySequenceId({ walletId: 310, coin: 'eth' }, 'error-probe')).rejects.toThrow();
    h.sim.setFault('getTransfer', { sequence: [] });
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toMatch(/custody_upstream_requests_total\{endpoint="lookup",status="none",code="CUSTODY_[A-Z_]+"\} [1-9]/);
    expect(text).toMatch(/custody_upstream_requests_total\{endpoint="lookup",status="5[0-9][0-9]",code="none"\} [1-9]/);
    // No label mixes the two: every status is a number or "none", every code CUSTODY_* or "none".
    for (const [, status, code] of text.matchAll(/custody_upstream_requests_total\{endpoint="[^"]+",status="([^"]+)",code="([^"]+)"\}/g)) {
      expect(status).toMatch(/^(\d{3}|none)$/);
      expect(code).toMatch(/^(CUSTODY_[A-Z_]+|none)$/);
    }
  });

  it('counts skipped upstream records and stale transfers by state', async () => {
    // A get-transfer answer whose one record breaks the schema: skipped and counted, not an error.
    h.sim.setFault('getTransfer', { sequence: ['schema'] });
    expect(await h.app!.custody.getTransfersBySequenceId({ walletId: 310, coin: 'eth' }, 'metrics-probe')).toHaveLength(0);
    // A transfer left in `received` 20 minutes ago (its index score is its last change, Redis time).
    const keys = createKeys(h.prefix, h.config.queue.eventsStream);
    const [seconds] = await h.redis.time();
    await h.redis.hset(keys.transfer('stale-probe'), 'state', 'received');
    await h.redis.zadd(keys.byState('received'), Number(seconds) * 1000 - 20 * 60_000, 'stale-probe');
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toMatch(/custody_upstream_skipped_records_total\{endpoint="lookup",ours="false"\} [1-9]/);
    expect(text).toMatch(/custody_transfers_stale\{state="received"\} 1\n/);
    expect(text).toMatch(/custody_transfers_stale\{state="submitting"\} 0\n/);
    await h.redis.zrem(keys.byState('received'), 'stale-probe');
    await h.redis.del(keys.transfer('stale-probe'));
  });

  it('guards the dashboard with Basic auth and serves it with the credentials', async () => {
    const denied = await fetch(`${base}/dashboard`);
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toMatch(/^Basic/);
    const wrong = await fetch(`${base}/dashboard`, { headers: { authorization: `Basic ${btoa(`${USER}:nope`)}` } });
    expect(wrong.status).toBe(401);
    const auth = { authorization: `Basic ${btoa(`${USER}:${PASSWORD}`)}` };
    const page = await fetch(`${base}/dashboard`, { headers: auth });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="root"');
    const api = await fetch(`${base}/dashboard/api/queues`, { headers: auth });
    expect(api.status).toBe(200);
    const { queues } = (await api.json()) as { queues: Array<{ name: string; readOnlyMode: boolean }> };
    expect(queues.map((q) => q.name).sort()).toEqual(['reconcile', 'submit-transaction', 'track-transfer']);
    for (const queue of queues) expect(queue.readOnlyMode, queue.name).toBe(true);
    expect((await fetch(`${base}/dashboard/api/queues`)).status).toBe(401);
  });
});

describe('readiness without Redis', () => {
  let redis: RedisServerHandle;
  let h: Harness;
  let server: FastifyInstance;
  beforeAll(async () => {
    redis = await startRedisServer();
    h = await startHarness({ name: 'http-ready', env: { REDIS_URL: redis.url } });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  });
  afterAll(async () => {
    await server.close();
    // Closing while the connections are still reconnecting after the restart is the case
    // app.close() must survive (bullmq#4656): it must not hang.
    await redis.restart();
    await h.close();
    await redis.stop();
  });

  it('answers 503 from /readyz when Redis is stopped', async () => {
    expect((await server.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    await redis.kill();
    const response = await server.inject({ method: 'GET', url: '/readyz' });
    expect(response.statusCode).toBe(503);
    expect(response.json()).toMatchObject({ status: 'not ready', redis: false });
    expect((await server.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});
