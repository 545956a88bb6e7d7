/**
 * The operator surface during a Redis outage (docs/contract.md section 5): /metrics answers within its
 * bound whatever Redis does, with readiness 0 and the process's own metrics; /transfers/:id answers
 * 503 instead of hanging; /healthz stays 200. Redis is a private redis-server, SIGKILLed under the
 * running worker. And every series an alert rule reads exists from start-up at 0.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { workerEnv } from '../helpers/harness.ts';
import { uniquePrefix } from '../helpers/redis.ts';

/** A client's patience: far above the contract's 2 s, far below a hang (before: no answer in 40 s). */
const CLIENT_TIMEOUT_MS = 6_000;

describe('HTTP while Redis is down', () => {
  let redis: RedisServerHandle;
  let sim: Simulator;
  let app: App;
  let server: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSimulator({ port: 0 });
    const config = loadConfig(workerEnv(sim, uniquePrefix('redis-down'), { REDIS_URL: redis.url }));
    app = await createApp(config, createLogger({ level: 'silent' }));
    server = await createHttpServer({ app, config, logger: createLogger({ level: 'silent' }), metrics: app.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await redis.restart().catch(() => undefined);
    await server?.close();
    await app?.close();
    await sim?.close();
    await redis?.stop();
  });

  const get = (path: string) => fetch(`${base}${path}`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) });

  it('exposes every series an alert reads from start-up, at 0', async () => {
    const text = await (await get('/metrics')).text();
    for (const series of [
      'custody_transfer_events_total{event="transfer.unresolved"} 0',
      'custody_transfer_events_total{event="transfer.failed"} 0',
      'custody_ambiguous_matches_total{step="resolve"} 0',
      'custody_track_poll_failure_streaks_total 0',
      'custody_track_unmatched_total 0',
      'custody_worker_jobs_total{queue="submit-transaction",outcome="error"} 0',
      'custody_worker_refused_jobs_total{queue="submit-transaction",reason="job_name"} 0',
    ]) {
      expect(text, series).toContain(series);
    }
    expect(text).toContain('custody_worker_ready 1');
  });

  it('answers /metrics (readiness 0, process metrics present), /transfers 503 and /healthz 200 with Redis killed', async () => {
    await redis.kill();
    for (let scrape = 0; scrape < 3; scrape++) {
      const metrics = await get('/metrics');
      expect(metrics.status).toBe(200);
      const text = await metrics.text();
      expect(text).toContain('custody_worker_ready 0');
      expect(text).toContain('process_cpu_seconds_total');
    }
    const transfer = await get('/transfers/a88a1846-b23d-f7e8-2344-f2bddb0c16f9');
    expect(transfer.status).toBe(503);
    expect(await transfer.json()).toMatchObject({ error: 'REDIS_UNAVAILABLE' });
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(503);

    await redis.restart();
    await expect
      .poll(async () => (await (await get('/metrics')).text()).includes('custody_worker_ready 1'), { timeout: 20_000, interval: 250 })
      .toBe(true);
  });
});
