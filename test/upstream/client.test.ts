import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type FaultKind, type Simulator } from '../../src/simulator/index.ts';
import { CustodyClient, type CustodyClientOptions, travelRuleApplies } from '../../src/custody/wallet-service/client.ts';
import { CustodyErrorCode } from '../../src/custody/errors.ts';
import { withRequestHooks } from '../../src/custody/decorators.ts';
import type { RequestHooks } from '../../src/custody/port.ts';
import { parseRetryAfter, retryAfterPause } from '../../src/custody/http/transport.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { failure } from '../helpers/custody-error.ts';

let sim: Simulator;
const clients: CustodyClient[] = [];

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterEach(async () => {
  sim.reset();
  await Promise.all(clients.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await sim.close();
});

function client(overrides: Partial<CustodyClientOptions> = {}): CustodyClient {
  const c = new CustodyClient({
    sdkUrl: sim.url,
    baseUrl: sim.url,
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    tokenUrl: `${sim.url}/oauth/token`,
    timeoutMs: 1_000,
    connectTimeoutMs: 1_000,
    connections: 8,
    ...overrides,
  });
  clients.push(c);
  return c;
}

const WALLET = { walletId: 310, coin: 'eth' };

describe('custody client against the simulator', () => {
  it('sends a transaction and gets the 2.4 record without the person in raw', async () => {
    const sequenceId = newSequenceId();
    const record = await client().sendTransaction(310, sampleSend(sequenceId));
    expect(record.sequenceId).toBe(sequenceId);
    expect(record.walletid).toBe('310');
    expect(typeof record.amount).toBe('number');
    expect(record.destinationAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
    const raw = JSON.parse(record.raw as string);
    expect(raw.sequenceId).toBe(sequenceId);
    expect(raw.halfSigned.sequenceId).toBe(sequenceId);
    expect(raw).not.toHaveProperty('user');
    expect(record.raw).not.toMatch(/@example\.com|phoneNumber|displayName/);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('sends a transaction and gets the record without raw when asked so, every other field as with raw', async () => {
    const sequenceId = newSequenceId();
    const record = await client().sendTransaction(310, sampleSend(sequenceId), { keepRaw: false });
    expect(record).not.toHaveProperty('raw');
    expect(record.sequenceId).toBe(sequenceId);
    expect(typeof record.amount).toBe('number');
    expect(record.destinationAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
    const [found] = await client().getTransfersBySequenceId(WALLET, sequenceId);
    expect(found!.outputs[0]!.address).toBe(record.destinationAddress);
  });

  it('maps a second send of one sequenceId (409) to CUSTODY_DUPLICATE', async () => {
    const sequenceId = newSequenceId();
    await client().sendTransaction(310, sampleSend(sequenceId));
    const error = await failure(client().sendTransaction(310, sampleSend(sequenceId)));
    expect(error.code).toBe(CustodyErrorCode.DUPLICATE);
    expect(error.httpStatus).toBe(409);
    expect(error.retryable).toBe(false);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
  });

  it('finds a transfer by sequenceId, then by txId once it has one', async () => {
    const c = client();
    const sequenceId = newSequenceId();
    const record = await c.sendTransaction(310, sampleSend(sequenceId));
    const bySeq = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(bySeq).toHaveLength(1);
    expect(bySeq[0]!.type).toBe('send');
    expect(bySeq[0]!.outputs.some((o) => o.address.toLowerCase() === record.destinationAddress.toLowerCase())).toBe(true);
    sim.setTxid(sequenceId);
    const [tx] = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(tx!.txid).toMatch(/^0x[0-9a-f]{64}$/);
    const byTxId = await c.getTransfersByTxId(WALLET, tx!.txid);
    expect(byTxId.map((t) => t.id)).toEqual([tx!.id]);
    expect(await c.getTransfersBySequenceId(WALLET, newSequenceId())).toEqual([]);
  });

  it('gets the wallet transaction of a known txid, and NOT_FOUND for an unknown one', async () => {
    const c = client();
    const sequenceId = newSequenceId();
    await c.sendTransaction(310, sampleSend(sequenceId));
    sim.setTxid(sequenceId);
    const [tx] = await c.getTransfersBySequenceId(WALLET, sequenceId);
    const walletTx = await c.getWalletTransaction(310, tx!.txid);
    expect(walletTx.txid).toBe(tx!.txid);
    expect(walletTx.walletid).toBe(310);
    const missing = await failure(c.getWalletTransaction(310, `0x${'0'.repeat(64)}`));
    expect(missing.code).toBe(CustodyErrorCode.NOT_FOUND);
    expect(missing.httpStatus).toBe(404);
  });

  it('reads the travel-rule setting and applies the upstream API 4.4 rule', async () => {
    sim.updateSettings({ travelRule: { outgoingTxn: 1, mandatory: true } });
    const setting = await client().getTravelRuleSetting();
    expect(setting.outgoingTxn).toBe(1);
    expect(setting.mandatory).toBe(true);
    expect(travelRuleApplies(setting)).toBe(true);
    expect(travelRuleApplies({ outgoingTxn: 1, mandatory: false })).toBe(false);
    expect(travelRuleApplies({ outgoingTxn: 0, mandatory: true })).toBe(false);
  });

  it('uses a fixed bearer token when no token URL is set', async () => {
    const tokenClient = client();
    await tokenClient.sendTransaction(310, sampleSend(newSequenceId()));
    const tokenResponse = await fetch(`${sim.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: sim.clientId, client_secret: sim.clientSecret }),
    });
    const { access_token } = (await tokenResponse.json()) as { access_token: string };
    const fixed = client({ tokenUrl: undefined, accessToken: access_token });
    const record = await fixed.sendTransaction(310, sampleSend(newSequenceId()));
    expect(record.id).toBeGreaterThan(0);
    const refused = await failure(
      client({ tokenUrl: undefined, accessToken: 'not-a-token' }).sendTransaction(310, sampleSend(newSequenceId())),
    );
    expect(refused.code).toBe(CustodyErrorCode.UNAUTHORIZED);
  });

  it('refuses wrong client credentials with UNAUTHORIZED on Basic and on the token endpoint', async () => {
    const wrong = client({ clientSecret: 'wrong-secret' });
    const basic = await failure(wrong.getTravelRuleSetting());
    expect(basic.code).toBe(CustodyErrorCode.UNAUTHORIZED);
    expect(basic.httpStatus).toBe(401);
    const bearer = await failure(wrong.sendTransaction(310, sampleSend(newSequenceId())));
    expect(bearer.code).toBe(CustodyErrorCode.UNAUTHORIZED);
    expect(bearer.endpoint).toBe('token');
    expect(JSON.stringify(bearer)).not.toContain('wrong-secret');
    expect(bearer.message).not.toContain('wrong-secret');
  });

  it('renews the token once after a 401 and succeeds', async () => {
    const c = client();
    await c.sendTransaction(310, sampleSend(newSequenceId()));
    const tokensBefore = sim.stats().requests.token['200'];
    sim.expireTokens();
    const record = await c.sendTransaction(310, sampleSend(newSequenceId()));
    expect(record.id).toBeGreaterThan(0);
    expect(sim.stats().requests.token['200']).toBe(tokensBefore! + 1);
    expect(sim.stats().requests.sendTransaction['401']).toBe(1);
  });

  it('gives up with UNAUTHORIZED when the fresh token is refused too', async () => {
    sim.setFault('sendTransaction', { sequence: ['401', '401'] });
    const error = await failure(client().sendTransaction(310, sampleSend(newSequenceId())));
    expect(error.code).toBe(CustodyErrorCode.UNAUTHORIZED);
    expect(sim.stats().requests.token['200']).toBe(2);
  });

  it('renews the token before it expires', async () => {
    sim.updateSettings({ tokenLifetimeSec: 1 });
    const c = client();
    await c.sendTransaction(310, sampleSend(newSequenceId()));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await c.sendTransaction(310, sampleSend(newSequenceId()));
    expect(sim.stats().requests.token['200']).toBe(2);
    expect(sim.stats().requests.sendTransaction['401']).toBeUndefined();
  });

  it("runs a call's hooks for every request it makes: its token requests, the request and a 401's retry", async () => {
    const log: string[] = [];
    const hooks: RequestHooks = {
      beforeRequest: async (endpoint, _signal, tag) => {
        log.push(`before ${endpoint} ${tag?.klass ?? '-'}`);
      },
      afterRequest: (endpoint, status) => log.push(`after ${endpoint} ${status}`),
      onRateLimited: (pauseMs, asked) => log.push(`429 ${asked.endpoint} ${pauseMs}`),
      trace: (endpoint, call) => {
        log.push(`span ${endpoint}`);
        return call();
      },
    };
    const c = client();
    sim.setFault('sendTransaction', { sequence: ['401'] });
    await c.sendTransaction(310, sampleSend(newSequenceId()), { hooks });
    await c.getTransfersBySequenceId(WALLET, newSequenceId(), { hooks });
    await c.getTravelRuleSetting({ hooks });
    expect(log).toEqual([
      ...['span token', 'before token -', 'after token 200'],
      ...['span send', 'before send send', 'after send 401'],
      ...['span token', 'before token -', 'after token 200'],
      ...['span send', 'before send send', 'after send 200'],
      ...['span lookup', 'before lookup poll', 'after lookup 200'],
      ...['span gate', 'before gate gate', 'after gate 200'],
    ]);
  });

  it('shares one token request between concurrent calls', async () => {
    const c = client();
    await Promise.all(Array.from({ length: 10 }, () => c.sendTransaction(310, sampleSend(newSequenceId()))));
    expect(sim.stats().requests.token['200']).toBe(1);
  });
});

describe('custody client fault mapping', () => {
  const cases: Array<[FaultKind, string, boolean]> = [
    ['5xx', CustodyErrorCode.UNAVAILABLE, true],
    ['429', CustodyErrorCode.RATE_LIMITED, true],
    ['timeout', CustodyErrorCode.TIMEOUT, true],
    ['reset', CustodyErrorCode.UNAVAILABLE, true],
    ['malformed', CustodyErrorCode.BAD_RESPONSE, true],
    ['401', CustodyErrorCode.UNAUTHORIZED, false],
    ['success-false', CustodyErrorCode.REJECTED, false],
  ];
  // A schema-breaking record in a get-transfer list is skipped, not an error: test/upstream/tolerance.test.ts.

  it.each(cases)('%s on get-transfer → %s (retryable %s)', async (kind, code, retryable) => {
    sim.setFault('getTransfer', { sequence: [kind] });
    const error = await failure(client().getTransfersBySequenceId(WALLET, newSequenceId()));
    expect(error.code).toBe(code);
    expect(error.retryable).toBe(retryable);
    expect(error.endpoint).toBe('lookup');
  });

  it.each(cases)('%s on is-enabled → %s', async (kind, code) => {
    sim.setFault('isEnabled', { sequence: [kind] });
    const error = await failure(client().getTravelRuleSetting());
    expect(error.code).toBe(code);
  });

  it('429 carries the Retry-After delay', async () => {
    sim.updateSettings({ retryAfterSec: 3 });
    sim.setFault('sendTransaction', { sequence: ['429'] });
    const error = await failure(client().sendTransaction(310, sampleSend(newSequenceId())));
    expect(error.code).toBe(CustodyErrorCode.RATE_LIMITED);
    expect(error.retryAfterMs).toBe(3_000);
    expect(error.maybeProcessed).toBe(false);
  });

  it('429: the Retry-After is capped at maxPauseMs (CUSTODY_MAX_PAUSE), and what it asked is reported', async () => {
    sim.updateSettings({ retryAfterSec: 3_600 });
    sim.setFault('sendTransaction', { sequence: ['429'] });
    const seen: unknown[] = [];
    const c = withRequestHooks(client({ maxPauseMs: 2_000 }), { onRateLimited: (pauseMs, asked) => seen.push({ pauseMs, ...asked }) });
    const error = await failure(c.sendTransaction({ walletId: 310, coin: 'eth' }, sampleSend(newSequenceId())));
    expect(error.retryAfterMs).toBe(2_000);
    expect(seen).toEqual([{ pauseMs: 2_000, endpoint: 'send', retryAfter: '3600', askedMs: 3_600_000 }]);
  });

  it('a time-out after processing says the send may have gone out, and it did', async () => {
    const sequenceId = newSequenceId();
    sim.setFault('sendTransaction', { sequence: ['timeout'] });
    const error = await failure(client({ timeoutMs: 300 }).sendTransaction(310, sampleSend(sequenceId)));
    expect(error.code).toBe(CustodyErrorCode.TIMEOUT);
    expect(error.maybeProcessed).toBe(true);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('a 5xx answer and a 429 are not "maybe processed"; a reset is', async () => {
    sim.setFault('sendTransaction', { sequence: ['5xx', 'reset'] });
    const c = client();
    const answered = await failure(c.sendTransaction(310, sampleSend(newSequenceId())));
    expect([answered.code, answered.httpStatus, answered.maybeProcessed]).toEqual([CustodyErrorCode.UNAVAILABLE, 503, false]);
    const reset = await failure(c.sendTransaction(310, sampleSend(newSequenceId())));
    expect([reset.code, reset.maybeProcessed]).toEqual([CustodyErrorCode.UNAVAILABLE, true]);
  });

  it('success:false on HTTP 200 is an error', async () => {
    sim.setFault('sendTransaction', { sequence: ['success-false'] });
    const error = await failure(client().sendTransaction(310, sampleSend(newSequenceId())));
    expect(error.code).toBe(CustodyErrorCode.REJECTED);
    expect(error.httpStatus).toBe(200);
  });

  it('a refused connection is UNAVAILABLE and certainly not processed', async () => {
    const error = await failure(client({ sdkUrl: 'http://127.0.0.1:1' }).getTravelRuleSetting());
    expect(error.code).toBe(CustodyErrorCode.UNAVAILABLE);
    expect(error.maybeProcessed).toBe(false);
  });
});

describe('custody client input checks', () => {
  it.each(['../admin', '310/../../x', '31 0', '-1', '', '0x1f', '310?x=1', '%2e%2e'])(
    'refuses wallet id %j before any request',
    async (walletId) => {
      const before = sim.requestCount();
      const c = client();
      expect((await failure(c.sendTransaction(walletId, sampleSend(newSequenceId())))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
      expect((await failure(c.getWalletTransaction(walletId, 'abc'))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
      expect((await failure(c.getTransfersBySequenceId({ walletId, coin: 'eth' }, 'x'))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
      expect(sim.requestCount()).toBe(before);
    },
  );

  it.each(['../../api/travel-rule/is-enabled', '..', '.', 'a/b', 'a?b', 'a#b', '%2F', 'a b', '', 'x'.repeat(300)])(
    'refuses txid %j before any request',
    async (txid) => {
      const before = sim.requestCount();
      const error = await failure(client().getWalletTransaction(310, txid));
      expect(error.code).toBe(CustodyErrorCode.INVALID_REQUEST);
      expect(sim.requestCount()).toBe(before);
    },
  );
});

describe('custody client against a garbage server', () => {
  let server: Server;
  let url: string;
  let body = '';
  let status = 200;
  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('tolerates a float in a field it does not decide on, and skips a record whose output amount is a float', async () => {
    const skipped: unknown[] = [];
    body = JSON.stringify([
      { ...validTransaction(), value: -0.5 },
      { ...validTransaction(), id: '1002', outputs: [{ address: '0xAbC', amount: 0.5 }] },
    ]);
    const list = await client({ sdkUrl: url, onSkippedRecords: (_endpoint, records) => skipped.push(...records) }).getTransfersBySequenceId(
      WALLET,
      'abc',
    );
    expect(list.map((tx) => [tx.id, tx.value])).toEqual([['1001', -0.5]]);
    expect(skipped).toEqual([{ index: 1, paths: ['outputs.0.amount'], ours: false }]);
  });

  it('accepts unknown values of "known values" fields and keeps amounts as text', async () => {
    body = JSON.stringify([{ ...validTransaction(), type: 'consolidation', walletType: 'custodial' }]);
    const [tx] = await client({ sdkUrl: url }).getTransfersBySequenceId(WALLET, 'abc');
    expect(tx!.type).toBe('consolidation');
    expect(tx!.value).toBe('-0.01234567');
  });

  it('refuses a raw field that is not JSON text', async () => {
    status = 200;
    body = JSON.stringify({ success: true, data: [] });
    expect(await client({ sdkUrl: url }).getTransfersBySequenceId(WALLET, 'abc')).toEqual([]);
    body = '<html>502</html>';
    expect((await failure(client({ sdkUrl: url }).getTransfersBySequenceId(WALLET, 'abc'))).code).toBe(CustodyErrorCode.BAD_RESPONSE);
  });
});

describe('Retry-After', () => {
  it('reads seconds and HTTP dates, with a default; the pause is capped', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('2', now)).toBe(2_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfter(undefined, now)).toBe(1_000);
    expect(parseRetryAfter('soon', now)).toBe(1_000);
    expect(parseRetryAfter('999999', now)).toBe(999_999_000);
    expect(retryAfterPause(parseRetryAfter('999999', now), 600_000)).toBe(600_000);
    expect(retryAfterPause(parseRetryAfter('2', now), 600_000)).toBe(2_000);
  });
});

function validTransaction() {
  return {
    coin: 'eth',
    id: '1001',
    wallet: 310,
    txid: '',
    date: '2026-11-22T10:00:00.000Z',
    value: '-0.01234567',
    valueString: '-0.01234567',
    baseValue: -1234567,
    baseValueString: '-0.01234567',
    feeString: '0.00010000',
    usd: '-41.23456',
    walletType: 'pipeline',
    inputs: [],
    outputs: [{ address: '0xAbC', amount: '0.01234567', isMine: false }],
    type: 'send',
    DestinationTag: null,
  };
}
