/**
 * The BitGo simulator (src/simulator/bitgo/) over real HTTP, against docs/bitgo-api.md: bearer auth,
 * send and its duplicate refusal, get-transfer-by-sequenceId through pendingApproval → signed → txid,
 * the error envelope, 429s, the reused fault mechanism and `/_sim/stats`.
 */
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { killAllChildren, spawnNodeScript } from '../../tools/child-process.ts';
import { newSequenceId, sleep } from './sim-client.ts';

const WALLET = '5d1f0c9b2a7d4e3f8a6b1c0d9e8f7a6b';
const COIN = 'hteth';
const HEX32 = /^[0-9a-f]{32}$/;

let sim: BitgoSimulator;

beforeAll(async () => {
  sim = await startBitgoSimulator({ port: 0, accessToken: 'test-access-token' });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.reset();
});
afterEach(killAllChildren);

function auth(token = sim.accessToken): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

function sendBody(
  sequenceId: string,
  recipients = [{ address: '0x7e2f7c6d1e0f4a3b2c1d0e9f8a7b6c5d4e3f2a1b', amount: '1230000000000000' }],
) {
  return { sequenceId, halfSigned: { txHex: `02f8b1${Buffer.from(sequenceId).toString('hex')}`, recipients }, comment: 'payout' };
}

async function send(sequenceId: string, options: { headers?: Record<string, string>; wallet?: string; body?: unknown } = {}) {
  const res = await fetch(`${sim.apiBase}/${COIN}/wallet/${options.wallet ?? WALLET}/tx/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(options.headers ?? auth()) },
    body: JSON.stringify(options.body ?? sendBody(sequenceId)),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function lookup(sequenceId: string, options: { headers?: Record<string, string>; wallet?: string; coin?: string } = {}) {
  const res = await fetch(
    `${sim.apiBase}/${options.coin ?? COIN}/wallet/${options.wallet ?? WALLET}/transfer/sequenceId/${encodeURIComponent(sequenceId)}`,
    { headers: options.headers ?? auth() },
  );
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function control(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const init: RequestInit = { method };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(`${sim.url}/_sim/${path}`, init);
  return { status: res.status, body: await res.json() };
}

/** BitGo's error envelope: { error, name, requestId }. */
function expectEnvelope(body: Record<string, unknown>, name: string): void {
  expect(body).toMatchObject({ name, error: expect.any(String), requestId: expect.any(String) });
}

describe('BitGo simulator: auth and paths', () => {
  it('refuses a request without a bearer token or with another one (401, error envelope, x-auth-required)', async () => {
    const sequenceId = newSequenceId();
    const none = await send(sequenceId, { headers: {} });
    expect(none.status).toBe(401);
    expectEnvelope(none.body, 'Unauthorized');
    expect(none.headers.get('x-auth-required')).toBe('true');
    expect((await send(sequenceId, { headers: auth('another-token') })).status).toBe(401);
    expect((await lookup(sequenceId, { headers: { authorization: `Basic ${sim.accessToken}` } })).status).toBe(401);
    expect(sim.stats().transfers).toBe(0);
    expect(sim.stats().requests).toEqual({ sendTransaction: { '401': 2 }, transferBySequenceId: { '401': 1 }, getTransfer: {} });
  });

  it('refuses a wallet id that is not 32 lowercase hex (400 InvalidWalletId with context.id)', async () => {
    for (const wallet of ['310', WALLET.toUpperCase(), `${WALLET}00`]) {
      const res = await send(newSequenceId(), { wallet });
      expect(res.status).toBe(400);
      expectEnvelope(res.body, 'InvalidWalletId');
      expect(res.body.context).toEqual({ id: wallet });
    }
  });

  it('echoes the client Request-ID as requestId and as the request-id header', async () => {
    const res = await send(newSequenceId(), { headers: { 'request-id': 'client-req-7' } });
    expect(res.status).toBe(401);
    expect(res.body.requestId).toBe('client-req-7');
    expect(res.headers.get('request-id')).toBe('client-req-7');
  });

  it('an expired token gets 401 until reset', async () => {
    expect((await control('POST', 'tokens/expire')).status).toBe(200);
    expect((await send(newSequenceId())).status).toBe(401);
    await control('POST', 'reset');
    expect((await send(newSequenceId())).status).toBe(200);
  });
});

describe('BitGo simulator: send', () => {
  it('accepts a half-signed transaction with a sequenceId and answers the signed transfer (200)', async () => {
    const sequenceId = newSequenceId();
    const res = await send(sequenceId);
    expect(res.status).toBe(200);
    const transfer = res.body.transfer as Record<string, unknown>;
    expect(transfer).toMatchObject({
      coin: COIN,
      wallet: WALLET,
      sequenceId,
      state: 'signed',
      type: 'send',
      valueString: '-1650000000000000',
      baseValueString: '-1230000000000000',
      comment: 'payout',
    });
    expect(transfer.id).toMatch(HEX32);
    expect(res.body).toMatchObject({ status: 'signed', tx: expect.stringMatching(/^02f8b1/) });
    expect(res.body.txid).toMatch(/^0x[0-9a-f]{64}$/);
    expect(transfer.txid).toBe(res.body.txid);
    expect(transfer.entries).toContainEqual({
      address: '0x7e2f7c6d1e0f4a3b2c1d0e9f8a7b6c5d4e3f2a1b',
      value: 1230000000000000,
      valueString: '1230000000000000',
    });
    expect(sim.transfer(sequenceId)).toMatchObject({ id: transfer.id, state: 'signed', txid: res.body.txid });
  });

  it('refuses a body with both or neither of halfSigned and txHex, or without a sequenceId (400)', async () => {
    const sequenceId = newSequenceId();
    for (const body of [{ sequenceId }, { sequenceId, txHex: '02f8', halfSigned: { txHex: '02f8' } }, { halfSigned: { txHex: '02f8' } }]) {
      const res = await send(sequenceId, { body });
      expect(res.status).toBe(400);
      expectEnvelope(res.body, 'InvalidRequest');
    }
    expect(sim.stats().transfers).toBe(0);
  });

  it('refuses a second send of an accepted sequenceId: 400 DuplicateSequenceIdError, nothing recorded', async () => {
    const sequenceId = newSequenceId();
    expect((await send(sequenceId)).status).toBe(200);
    const again = await send(sequenceId, {
      body: sendBody(sequenceId, [{ address: '0x1111111111111111111111111111111111111111', amount: '5' }]),
    });
    expect(again.status).toBe(400);
    expectEnvelope(again.body, 'DuplicateSequenceIdError');
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
    expect(sim.stats().transfers).toBe(1);
    // the same sequenceId on another wallet is another transfer
    expect((await send(sequenceId, { wallet: 'a'.repeat(32) })).status).toBe(200);
  });

  it('refuses the duplicate while the first waits in pendingApproval too', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    expect((await send(sequenceId)).status).toBe(202);
    const again = await send(sequenceId);
    expect(again.status).toBe(400);
    expect(again.body.name).toBe('DuplicateSequenceIdError');
  });
});

describe('BitGo simulator: get transfer by sequenceId', () => {
  it('shows the transfer in pendingApproval, then signed, then signed with its txid', async () => {
    sim.updateSettings({ approvalAfterMs: 500, txidAfterMs: 500 });
    const sequenceId = newSequenceId();
    const sent = await send(sequenceId);
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ coin: COIN, wallet: WALLET, state: 'pending', scope: 'wallet' });
    expect(sent.body.id).toMatch(HEX32);
    const times = sim.transfer(sequenceId)!;
    const until = (iso: string) => sleep(Math.max(0, Date.parse(iso) + 20 - Date.now()));

    const pending = await lookup(sequenceId);
    expect(pending.status).toBe(200);
    expect(pending.body).toMatchObject({ sequenceId, state: 'pendingApproval', pendingApproval: sent.body.id, wallet: WALLET });
    expect(pending.body).not.toHaveProperty('txid');
    const id = pending.body.id;
    expect(id).toMatch(HEX32);

    await until(times.approvedAt);
    const signed = await lookup(sequenceId);
    expect(signed.body).toMatchObject({ id, state: 'signed' });
    expect(signed.body).not.toHaveProperty('txid');

    await until(times.txidAt);
    const withTxid = await lookup(sequenceId);
    expect(withTxid.body).toMatchObject({ id, state: 'signed', txid: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
  });

  it('answers 404 in the error envelope for a sequenceId it does not know, or under another wallet or coin', async () => {
    const sequenceId = newSequenceId();
    const unknown = await lookup(sequenceId);
    expect(unknown.status).toBe(404);
    expectEnvelope(unknown.body, 'NotFound');
    expect(await send(sequenceId)).toMatchObject({ status: 200 });
    expect((await lookup(sequenceId, { wallet: 'b'.repeat(32) })).status).toBe(404);
    expect((await lookup(sequenceId, { coin: 'tbtc' })).status).toBe(404);
    expect((await lookup(sequenceId)).status).toBe(200);
  });

  it('answers 206 Partial Content when set to, and forced states through the control API', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000, partialContent: true });
    const sequenceId = newSequenceId();
    await send(sequenceId);
    expect((await lookup(sequenceId)).status).toBe(206);
    const forced = await control('POST', `transfers/${sequenceId}/state`, { state: 'rejected' });
    expect(forced).toMatchObject({ status: 200, body: { state: 'rejected', txid: '' } });
    expect((await lookup(sequenceId)).body).toMatchObject({ state: 'rejected' });
    expect((await control('POST', `transfers/${sequenceId}/state`, { state: 'lost' })).status).toBe(400);
    expect((await control('POST', `transfers/${newSequenceId()}/state`, { state: 'failed' })).status).toBe(404);
  });

  it('a forced state past signing shows the txid, unless hideTxid: failed before its broadcast', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000, txidAfterMs: 60_000 });
    const shown = newSequenceId();
    await send(shown);
    expect((await control('POST', `transfers/${shown}/state`, { state: 'failed' })).body).toMatchObject({
      state: 'failed',
      txid: expect.stringMatching(/^0x/),
    });
    const hidden = newSequenceId();
    await send(hidden);
    expect(await control('POST', `transfers/${hidden}/state`, { state: 'failed', hideTxid: true })).toMatchObject({
      status: 200,
      body: { state: 'failed', txid: '' },
    });
    const looked = (await lookup(hidden)).body as Record<string, unknown>;
    expect(looked).toMatchObject({ state: 'failed' });
    expect(looked.txid).toBeUndefined();
    expect((await control('POST', `transfers/${hidden}/state`, { state: 'removed', hideTxid: 'yes' })).status).toBe(400);
  });

  it('POST /_sim/transfers/:sequenceId/txid approves, signs and shows the txid now', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000, txidAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    await send(sequenceId);
    const txid = `0x${'ab'.repeat(32)}`;
    expect(await control('POST', `transfers/${sequenceId}/txid`, { txid })).toMatchObject({ status: 200, body: { state: 'signed', txid } });
    expect((await lookup(sequenceId)).body).toMatchObject({ state: 'signed', txid });
  });
});

describe('BitGo simulator: get transfer by transfer id or txid', () => {
  async function getTransfer(id: string, options: { headers?: Record<string, string>; wallet?: string; coin?: string } = {}) {
    const res = await fetch(
      `${sim.apiBase}/${options.coin ?? COIN}/wallet/${options.wallet ?? WALLET}/transfer/${encodeURIComponent(id)}`,
      {
        headers: options.headers ?? auth(),
      },
    );
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('answers the transfer by its id at once, and by its txid once the txid shows; 404 otherwise', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    expect((await send(sequenceId)).status).toBe(202);
    const { id, txid } = sim.transfer(sequenceId)!;
    expect(txid).toBe('');
    expect(await getTransfer(id)).toMatchObject({ status: 200, body: { id, sequenceId, state: 'pendingApproval' } });
    const drawn = `0x${'cd'.repeat(32)}`;
    expect((await getTransfer(drawn)).status).toBe(404);
    sim.setTxid(sequenceId, drawn);
    expect(await getTransfer(drawn)).toMatchObject({ status: 200, body: { id, sequenceId, state: 'signed', txid: drawn } });
    // another wallet or coin does not see it; an unknown id is 404 in the envelope
    expect((await getTransfer(drawn, { wallet: 'b'.repeat(32) })).status).toBe(404);
    expect((await getTransfer(drawn, { coin: 'tbtc' })).status).toBe(404);
    const unknown = await getTransfer('f'.repeat(32));
    expect(unknown.status).toBe(404);
    expectEnvelope(unknown.body, 'NotFound');
    expect((await getTransfer(id, { headers: {} })).status).toBe(401);
    expect(sim.stats().requests.getTransfer).toEqual({ '200': 2, '404': 4, '401': 1 });
  });

  it('serves the fault plans on getTransfer', async () => {
    const sequenceId = newSequenceId();
    await send(sequenceId);
    expect((await control('PUT', 'faults/getTransfer', { sequence: ['5xx', 'malformed'] })).status).toBe(200);
    const { id } = sim.transfer(sequenceId)!;
    expect((await getTransfer(id)).status).toBe(503);
    const res = await fetch(`${sim.apiBase}/${COIN}/wallet/${WALLET}/transfer/${id}`, { headers: auth() });
    expect(res.status).toBe(200);
    await expect(res.json()).rejects.toThrow();
  });
});

describe('BitGo simulator: 429s, faults and stats', () => {
  it('answers 429 in the error envelope past maxRps, with Retry-After only when retryAfterSec is set', async () => {
    sim.updateSettings({ maxRps: 1 });
    const answers = await Promise.all(Array.from({ length: 8 }, () => lookup(newSequenceId())));
    const limited = answers.filter((answer) => answer.status === 429);
    expect(limited.length).toBeGreaterThanOrEqual(3);
    expect(answers.filter((answer) => answer.status === 404).length).toBe(8 - limited.length);
    expectEnvelope(limited[0]!.body, 'TooManyRequests');
    expect(limited[0]!.headers.get('retry-after')).toBeNull();
    expect(sim.stats().requests.transferBySequenceId['429']).toBe(limited.length);

    sim.updateSettings({ retryAfterSec: 2 });
    const more = await Promise.all(Array.from({ length: 4 }, () => lookup(newSequenceId())));
    expect(more.find((answer) => answer.status === 429)?.headers.get('retry-after')).toBe('2');
  });

  it('reuses the fault plans of /_sim/faults: a 429, then the real answer; unserved kinds are refused', async () => {
    expect((await control('PUT', 'faults/sendTransaction', { sequence: ['429', '5xx', 'ok'] })).status).toBe(200);
    const sequenceId = newSequenceId();
    const first = await send(sequenceId);
    expect(first.status).toBe(429);
    expectEnvelope(first.body, 'TooManyRequests');
    expect((await send(sequenceId)).status).toBe(503);
    expect((await send(sequenceId)).status).toBe(200);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });

    expect((await control('PUT', 'faults/sendTransaction', { sequence: ['success-false'] })).status).toBe(400);
    expect((await control('PUT', 'faults/isEnabled', { sequence: ['429'] })).status).toBe(400);
    expect((await control('GET', 'faults')).body).toEqual({ sendTransaction: { sequence: ['429', '5xx', 'ok'], consumed: 3 } });
  });

  it('an accept-504 fault records the send and loses the answer; the lookup then finds it', async () => {
    await control('PUT', 'faults/sendTransaction', { sequence: ['accept-504'] });
    const sequenceId = newSequenceId();
    expect((await send(sequenceId)).status).toBe(504);
    expect((await lookup(sequenceId)).body).toMatchObject({ sequenceId, state: 'signed' });
  });

  it('/_sim/stats counts requests per endpoint and status, and sends per sequenceId', async () => {
    const sequenceId = newSequenceId();
    await send(sequenceId);
    await send(sequenceId);
    await lookup(sequenceId);
    await lookup(newSequenceId());
    await lookup(sequenceId, { headers: {} });
    const stats = (await control('GET', 'stats')).body;
    expect(stats).toEqual({
      requests: { sendTransaction: { '200': 1, '400': 1 }, transferBySequenceId: { '200': 1, '404': 1, '401': 1 }, getTransfer: {} },
      sends: { [sequenceId]: { accepted: 1, duplicates: 1 } },
      transfers: 1,
    });
    expect((await control('PATCH', 'settings', { approvalAfterMs: 5 })).body).toMatchObject({ approvalAfterMs: 5 });
    expect((await control('PATCH', 'settings', { visibleAfterMs: 5 })).status).toBe(400);
  });
});

describe('npm run simulator -- --provider bitgo', () => {
  const MAIN = fileURLToPath(new URL('../../src/simulator/main.ts', import.meta.url));

  it('serves the BitGo endpoints with the access token of the environment, never printed', async () => {
    const token = 'very-secret-bitgo-token';
    const child = spawnNodeScript(MAIN, {
      name: 'simulator',
      args: ['--provider', 'bitgo'],
      env: { SIMULATOR_PORT: '0', SIM_BITGO_ACCESS_TOKEN: token, SIM_APPROVAL_AFTER: '1h' },
    });
    try {
      const line = JSON.parse(await child.waitForLog('"url"')) as { url: string; apiBase: string; provider: string };
      expect(line.provider).toBe('bitgo');
      expect(line.apiBase).toBe(`${line.url}/api/v2`);
      const res = await fetch(`${line.apiBase}/tbtc/wallet/${WALLET}/tx/send`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ sequenceId: 'seq-1', txHex: '0100' }),
      });
      expect(res.status).toBe(202);
      const settings = (await (await fetch(`${line.url}/_sim/settings`)).json()) as { approvalAfterMs: number };
      expect(settings.approvalAfterMs).toBe(3_600_000);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(child.output()).not.toContain(token);
  });

  it('exits 78 on an unknown provider', async () => {
    const child = spawnNodeScript(MAIN, { name: 'simulator', env: { SIMULATOR_PORT: '0', SIMULATOR_PROVIDER: 'coinbase' } });
    expect((await child.exited).code).toBe(78);
    expect(child.output()).toMatch(/^SIMULATOR_PROVIDER: must be wallet-service or bitgo/);
  });
});

describe('BitGo simulator: transfer webhooks', () => {
  async function receiver(): Promise<{
    url: string;
    calls: Array<{ body: string; signature: string | undefined }>;
    close: () => Promise<void>;
  }> {
    const { createServer } = await import('node:http');
    const calls: Array<{ body: string; signature: string | undefined }> = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const signature = req.headers['x-signature-sha256'];
        calls.push({ body, signature: typeof signature === 'string' ? signature : undefined });
        res.end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    return { url: `http://127.0.0.1:${port}/hook`, calls, close: () => new Promise((resolve) => server.close(() => resolve())) };
  }

  async function register(url: string, type = 'transfer') {
    const res = await fetch(`${sim.apiBase}/${COIN}/wallet/${WALLET}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth() },
      body: JSON.stringify({ type, url }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('calls a registered loopback URL, signed, when the transfer is first seen and when its txid shows', async () => {
    const { createHmac } = await import('node:crypto');
    const target = await receiver();
    try {
      sim.updateSettings({ txidAfterMs: 60_000 });
      const registered = await register(target.url);
      expect(registered.status).toBe(200);
      expect(registered.body).toMatchObject({ type: 'transfer', url: target.url, coin: COIN, wallet: WALLET });
      const sequenceId = newSequenceId();
      expect((await send(sequenceId)).status).toBe(200);
      while (target.calls.length < 1) await sleep(10);
      const transferId = sim.transfer(sequenceId)!.id;
      expect(JSON.parse(target.calls[0]!.body)).toMatchObject({
        type: 'transfer',
        wallet: WALLET,
        coin: COIN,
        transfer: transferId,
        hash: '',
      });
      sim.setTxid(sequenceId, '0xabc123');
      while (target.calls.length < 2) await sleep(10);
      const confirmed = JSON.parse(target.calls[1]!.body) as Record<string, unknown>;
      expect(confirmed).toMatchObject({ type: 'transfer', transfer: transferId, hash: '0xabc123' });
      for (const call of target.calls) {
        expect(call.signature).toBe(createHmac('sha256', sim.webhookSecret).update(call.body).digest('hex'));
      }
      expect(sim.webhooks().sent).toBe(2);
    } finally {
      await target.close();
    }
  });

  it('refuses a target that is not loopback, and a type other than transfer (400)', async () => {
    expect((await register('http://192.0.2.1/hook')).status).toBe(400);
    expect((await register('http://example.com/hook')).status).toBe(400);
    expect((await register('http://127.0.0.1:9/hook', 'block')).status).toBe(400);
    expect(sim.webhooks().hooks).toEqual([]);
  });
});
