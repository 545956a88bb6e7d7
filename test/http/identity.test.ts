/**
 * Who a request is (src/http/access/identity.ts), on a real fastify listening on 127.0.0.1: Basic auth
 * against CONSOLE_USERS (scrypt hashes from hash-secret's own code) and the dashboard user, proxy headers
 * only from a trusted peer (the client binds 127.0.0.1 or 127.0.0.2 as its own address), the role
 * guards' 401 and 403, and the open local rule when nothing is configured.
 */
import { request as httpRequest } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { accessPlugin, requireRole } from '../../src/http/access/identity.ts';
import { hashSecret } from '../../src/lib/secret-hash.ts';

const required = {
  CUSTODY_SDK_URL: 'http://127.0.0.1:4000/sdk',
  CUSTODY_BASE_URL: 'http://127.0.0.1:4000',
  CUSTODY_CLIENT_ID: 'client-1',
  CUSTODY_CLIENT_SECRET: 'client-secret-value',
  CUSTODY_ACCESS_TOKEN: 'fixed-token-value',
};

const PASSWORDS = { vera: 'viewer-password-1', otto: 'operator-password-2', dash: 'dashboard-password-3' };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

interface Answer {
  status: number;
  body: unknown;
  challenge: string | undefined;
}

/** One request from `from` (the client's own loopback address) to `base`. */
function call(base: string, method: string, path: string, headers: Record<string, string> = {}, from = '127.0.0.1'): Promise<Answer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, path: url.pathname, method, headers, localAddress: from, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          const challenge = res.headers['www-authenticate'];
          resolve({ status: res.statusCode!, body: text === '' ? undefined : JSON.parse(text), challenge });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** A fresh server with the plugin, one route per role and an open probe, configured by `env`. */
async function serve(env: Record<string, string>): Promise<{ server: FastifyInstance; base: string }> {
  const config = loadConfig({ ...required, ...env });
  const server = Fastify();
  await server.register(accessPlugin, {
    console: config.http.console,
    dashboardUser: config.http.dashboardUser,
    dashboardPassword: config.http.dashboardPassword,
  });
  server.get('/healthz', async () => ({ status: 'ok' }));
  server.get('/view', { onRequest: requireRole('viewer') }, async (request) => request.identity);
  server.post('/act', { onRequest: requireRole('operator') }, async (request) => request.identity);
  const base = await server.listen({ host: '127.0.0.1', port: 0 });
  return { server, base };
}

let users: string;
beforeAll(async () => {
  users = `vera:viewer:${await hashSecret(PASSWORDS.vera)},otto:operator:${await hashSecret(PASSWORDS.otto)}`;
});

describe('identity from Basic auth', () => {
  let server: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ server, base } = await serve({ CONSOLE_USERS: users, DASHBOARD_USER: 'dash', DASHBOARD_PASSWORD: PASSWORDS.dash }));
  });
  afterAll(() => server.close());

  it('a viewer reads, and is refused (403) on an operator route', async () => {
    const auth = { authorization: basic('vera', PASSWORDS.vera) };
    expect(await call(base, 'GET', '/view', auth)).toMatchObject({
      status: 200,
      body: { name: 'vera', role: 'viewer', source: 'password' },
    });
    const refused = await call(base, 'POST', '/act', auth);
    expect(refused).toMatchObject({ status: 403, body: { error: 'FORBIDDEN' } });
    expect(refused.challenge).toBeUndefined();
  });

  it('an operator reads and acts, again and again (the verification is remembered, the answer the same)', async () => {
    const auth = { authorization: basic('otto', PASSWORDS.otto) };
    for (let i = 0; i < 3; i += 1) {
      expect(await call(base, 'POST', '/act', auth)).toMatchObject({ status: 200, body: { name: 'otto', role: 'operator' } });
      expect(await call(base, 'GET', '/view', auth)).toMatchObject({ status: 200, body: { name: 'otto', role: 'operator' } });
    }
  });

  it('the dashboard user is a viewer', async () => {
    const auth = { authorization: basic('dash', PASSWORDS.dash) };
    expect(await call(base, 'GET', '/view', auth)).toMatchObject({ status: 200, body: { name: 'dash', role: 'viewer' } });
    expect((await call(base, 'POST', '/act', auth)).status).toBe(403);
  });

  it('answers 401 with a Basic challenge to a wrong password, an unknown user, another scheme or none', async () => {
    const wrong: Array<Record<string, string>> = [
      { authorization: basic('otto', PASSWORDS.vera) },
      { authorization: basic('otto', `${PASSWORDS.otto}x`) },
      { authorization: basic('nobody', PASSWORDS.otto) },
      { authorization: basic('dash', PASSWORDS.otto) },
      { authorization: `Bearer ${PASSWORDS.otto}` },
      {},
    ];
    // Each wrong password costs one scrypt (tenths of a second on a busy machine): one path each.
    const tries: Array<{ method: string; path: string; headers: Record<string, string> }> = [
      ...wrong.map((headers) => ({ method: 'POST', path: '/act', headers })),
      { method: 'GET', path: '/view', headers: {} },
      { method: 'GET', path: '/no-such-route', headers: {} },
      { method: 'GET', path: '/no-such-route', headers: { authorization: basic('vera', 'nope') } },
    ];
    for (const { method, path, headers } of tries) {
      const answer = await call(base, method, path, headers);
      expect({ path, headers, status: answer.status }).toEqual({ path, headers, status: 401 });
      expect(answer.challenge).toMatch(/^Basic realm=/);
    }
    // A wrong password after a right one is still wrong (only successes are remembered).
    expect((await call(base, 'POST', '/act', { authorization: basic('otto', PASSWORDS.otto) })).status).toBe(200);
    expect((await call(base, 'POST', '/act', { authorization: basic('otto', 'nope') })).status).toBe(401);
  });

  it('answers the open probe without credentials', async () => {
    expect((await call(base, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('identity from a reverse proxy', () => {
  let server: FastifyInstance;
  let base: string;
  const proxied = { 'x-auth-user': 'carol', 'x-auth-role': 'operator' };
  beforeAll(async () => {
    ({ server, base } = await serve({
      CONSOLE_USERS: users,
      CONSOLE_PROXY_USER_HEADER: 'X-Auth-User',
      CONSOLE_PROXY_ROLE_HEADER: 'X-Auth-Role',
      CONSOLE_TRUSTED_PROXIES: '127.0.0.2/32,::1',
    }));
  });
  afterAll(() => server.close());

  it('honours the headers from a trusted peer', async () => {
    expect(await call(base, 'POST', '/act', proxied, '127.0.0.2')).toMatchObject({
      status: 200,
      body: { name: 'carol', role: 'operator', source: 'proxy' },
    });
    const viewer = { 'x-auth-user': 'dave', 'x-auth-role': 'viewer' };
    expect((await call(base, 'GET', '/view', viewer, '127.0.0.2')).status).toBe(200);
    expect((await call(base, 'POST', '/act', viewer, '127.0.0.2')).status).toBe(403);
  });

  it('ignores them from any other peer, whatever X-Forwarded-For says', async () => {
    for (const headers of [proxied, { ...proxied, 'x-forwarded-for': '127.0.0.2' }]) {
      const answer = await call(base, 'POST', '/act', headers, '127.0.0.1');
      expect(answer.status).toBe(401);
      expect(answer.challenge).toMatch(/^Basic realm=/);
    }
    // Judged on its Basic auth alone: a viewer claiming to be an operator stays a viewer.
    const asViewer = { ...proxied, authorization: basic('vera', PASSWORDS.vera) };
    expect(await call(base, 'GET', '/view', asViewer, '127.0.0.1')).toMatchObject({ status: 200, body: { name: 'vera', role: 'viewer' } });
    expect((await call(base, 'POST', '/act', asViewer, '127.0.0.1')).status).toBe(403);
  });

  it('identifies nobody when a trusted peer sends a role that is not one', async () => {
    for (const role of ['admin', '', 'operator,viewer']) {
      expect((await call(base, 'GET', '/view', { 'x-auth-user': 'carol', 'x-auth-role': role }, '127.0.0.2')).status).toBe(401);
    }
    expect((await call(base, 'GET', '/view', { 'x-auth-user': 'carol' }, '127.0.0.2')).status).toBe(401);
  });
});

describe('identity with nothing configured (loopback only)', () => {
  let server: FastifyInstance;
  let base: string;
  beforeAll(async () => {
    ({ server, base } = await serve({}));
  });
  afterAll(() => server.close());

  it('a loopback peer is the local operator, as every route has been open without credentials', async () => {
    expect(await call(base, 'POST', '/act')).toMatchObject({ status: 200, body: { name: 'local', role: 'operator', source: 'local' } });
  });
});
