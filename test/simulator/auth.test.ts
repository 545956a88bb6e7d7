import { describe, expect, it } from 'vitest';
import { DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET } from '../../src/simulator/index.ts';
import { basic, basicOf, newSequenceId, postJson, send, sleep, token, useSimulator } from './sim-client.ts';

const ctx = useSimulator({ clientId: 'app-7', clientSecret: 'top-secret-7' });

describe('token endpoint', () => {
  it('issues an opaque bearer token for the client credentials', async () => {
    const res = await postJson(`${ctx.sim.url}/oauth/token`, {
      grant_type: 'client_credentials',
      client_id: 'app-7',
      client_secret: 'top-secret-7',
      audience: 'https://custody.example.com',
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_in).toBe(3600);
    expect(typeof body.access_token).toBe('string');
    expect((body.access_token as string).length).toBeGreaterThanOrEqual(32);
    expect(await token(ctx.sim)).not.toBe(body.access_token);
  });

  it('accepts form-encoded credentials too', async () => {
    const res = await fetch(`${ctx.sim.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=app-7&client_secret=top-secret-7',
    });
    expect(res.status).toBe(200);
  });

  it.each([
    ['wrong secret', { grant_type: 'client_credentials', client_id: 'app-7', client_secret: 'nope' }],
    ['wrong client', { grant_type: 'client_credentials', client_id: 'app-8', client_secret: 'top-secret-7' }],
    ['wrong grant', { grant_type: 'password', client_id: 'app-7', client_secret: 'top-secret-7' }],
    [
      'default credentials of another simulator',
      {
        grant_type: 'client_credentials',
        client_id: DEFAULT_CLIENT_ID,
        client_secret: DEFAULT_CLIENT_SECRET,
      },
    ],
  ])('answers 401 invalid_client for a %s', async (_name, body) => {
    const res = await postJson(`${ctx.sim.url}/oauth/token`, body);
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'invalid_client' });
  });

  it('answers 400 to a body that is not JSON', async () => {
    const res = await postJson(`${ctx.sim.url}/oauth/token`, '{not json');
    expect(res.status).toBe(400);
  });
});

describe('bearer endpoints', () => {
  it('accept a fresh token and refuse a missing, unknown or basic credential', async () => {
    const bearer = await token(ctx.sim);
    expect((await send(ctx.sim, bearer, newSequenceId())).status).toBe(200);
    for (const authorization of [undefined, 'Bearer not-a-token', basicOf(ctx.sim), `Bearer${bearer}`]) {
      const res = await postJson(`${ctx.sim.url}/api/wallet/310/sendTransaction`, {}, authorization ? { authorization } : {});
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ success: false, message: 'unauthorized' });
    }
    const lookup = await fetch(`${ctx.sim.url}/api/wallet/310/txid/0xabc`, { headers: { authorization: 'Bearer x' } });
    expect(lookup.status).toBe(401);
    expect(ctx.sim.stats().requests.sendTransaction).toEqual({ '200': 1, '401': 4 });
  });

  it('refuse a token past its lifetime', async () => {
    ctx.sim.updateSettings({ tokenLifetimeSec: 0.15 });
    const bearer = await token(ctx.sim);
    const sequenceId = newSequenceId();
    expect((await send(ctx.sim, bearer, sequenceId)).status).toBe(200);
    await sleep(200);
    const res = await send(ctx.sim, bearer, newSequenceId());
    expect(res.status).toBe(401);
  });

  it('refuse every issued token after expireTokens, and a new token works', async () => {
    const first = await token(ctx.sim);
    const second = await token(ctx.sim);
    ctx.sim.expireTokens();
    expect((await send(ctx.sim, first, newSequenceId())).status).toBe(401);
    expect((await send(ctx.sim, second, newSequenceId())).status).toBe(401);
    expect((await send(ctx.sim, await token(ctx.sim), newSequenceId())).status).toBe(200);
  });
});

describe('basic-auth endpoints', () => {
  it('answer only the configured client credentials', async () => {
    const ok = await postJson(`${ctx.sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(ctx.sim) });
    expect(ok.status).toBe(200);
    const bearer = await token(ctx.sim);
    for (const authorization of [undefined, basic('app-7', 'wrong'), basic('other', 'top-secret-7'), `Bearer ${bearer}`]) {
      for (const path of ['/api/travel-rule/is-enabled', '/api/wallet/get-transfer']) {
        const res = await postJson(
          `${ctx.sim.url}${path}`,
          { wallet: { coin: 'eth', walletId: 310 }, sequenceId: 'x' },
          authorization ? { authorization } : {},
        );
        expect(res.status).toBe(401);
        expect(await res.json()).toEqual({ success: false, message: 'unauthorized' });
      }
    }
  });
});

describe('routing', () => {
  it('answers 404 to unknown routes and counts every upstream request', async () => {
    const res = await fetch(`${ctx.sim.url}/api/wallet/310/unknown`);
    expect(res.status).toBe(404);
    const wrongMethod = await fetch(`${ctx.sim.url}/api/wallet/get-transfer`);
    expect(wrongMethod.status).toBe(404);
    await fetch(`${ctx.sim.url}/_sim/stats`);
    expect(ctx.sim.requestCount()).toBe(2);
  });
});
