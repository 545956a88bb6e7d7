import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const USER = 'ops';
const PASSWORD = 'a-long-dashboard-secret';
const basic = (user: string, password: string) => ({ authorization: `Basic ${btoa(`${user}:${password}`)}` });

describe('HTTP auth with dashboard credentials set', () => {
  let h: Harness;
  let server: FastifyInstance;
  let base: string;
  let sequenceId: string;
  beforeAll(async () => {
    h = await startHarness({ name: 'http-auth', env: { DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD } });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
    const payload = samplePayload();
    sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000);
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  const guarded = () => [
    `/transfers/${sequenceId}`,
    '/transfers/no-such-transfer',
    '/dashboard',
    '/dashboard/api/queues',
    '/no-such-route',
    '/metrics/../transfers/x',
  ];

  it('answers 401 with a Basic challenge and no transfer data without credentials or with wrong ones', async () => {
    for (const path of guarded()) {
      for (const headers of [
        {},
        basic(USER, 'wrong'),
        basic('someone', PASSWORD),
        { authorization: `Bearer ${PASSWORD}` },
        basic(USER, `${PASSWORD}x`),
      ]) {
        const response = await fetch(`${base}${path}`, { headers });
        expect({ path, headers, status: response.status }).toEqual({ path, headers, status: 401 });
        expect(response.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
        const body = await response.text();
        expect(body).not.toContain(sequenceId);
        expect(body).not.toContain('walletId');
      }
    }
  });

  it('serves every route with the right credentials (an unknown path is a 404 only then)', async () => {
    const auth = { headers: basic(USER, PASSWORD) };
    expect((await fetch(`${base}/transfers/${sequenceId}`, auth)).status).toBe(200);
    expect((await fetch(`${base}/transfers/no-such-transfer`, auth)).status).toBe(404);
    expect((await fetch(`${base}/dashboard`, auth)).status).toBe(200);
    expect((await fetch(`${base}/dashboard/api/queues`, auth)).status).toBe(200);
    expect((await fetch(`${base}/no-such-route`, auth)).status).toBe(404);
  });

  it('answers /healthz, /readyz and /metrics without credentials (probes and the Prometheus scrape)', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${base}/metrics?name=x`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).not.toContain(sequenceId);
    expect(text).not.toContain(PASSWORD);
  });
});

describe('HTTP auth without credentials (loopback only, the default)', () => {
  let h: Harness;
  let server: FastifyInstance;
  beforeAll(async () => {
    h = await startHarness({ name: 'http-open' });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('serves the dashboard and transfer lookups without a challenge', async () => {
    expect((await server.inject({ method: 'GET', url: '/dashboard/api/queues' })).statusCode).toBe(200);
    expect((await server.inject({ method: 'GET', url: '/transfers/no-such-transfer' })).statusCode).toBe(404);
  });
});
