/**
 * The BitGo adapter (src/custody/bitgo/) on what only BitGo does: the 202 pending-approval answer, a
 * transfer that waits in pendingApproval without a txid and gets one later, 206 lookups, its own proof
 * table (a duplicate is a 400, a 503 may have been processed), input checks before any request, and
 * the bodies it sends and reads, against the BitGo simulator and a scripted server.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BitgoClient, type BitgoClientOptions } from '../../src/custody/bitgo/client.ts';
import { BITGO_SEND_PROOF, bitgoSendProof } from '../../src/custody/bitgo/responses.ts';
import { CustodyErrorCode } from '../../src/custody/errors.ts';
import { EXACT_AMOUNT, type RequestHooks, type WalletRef } from '../../src/custody/port.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { failure } from '../helpers/custody-error.ts';

const WALLET: WalletRef = { walletId: '5d1f0c9b2a7d4e3f8a6b1c0d9e8f7a6b', coin: 'hteth' };
const HEX32 = /^[0-9a-f]{32}$/;

let sim: BitgoSimulator;
const clients: BitgoClient[] = [];

beforeAll(async () => {
  sim = await startBitgoSimulator({ port: 0, accessToken: 'bitgo-client-test-token' });
});
afterEach(async () => {
  sim.reset();
  await Promise.all(clients.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await sim.close();
});

function client(overrides: Partial<BitgoClientOptions> = {}): BitgoClient {
  const c = new BitgoClient({
    baseUrl: sim.url,
    accessToken: sim.accessToken,
    timeoutMs: 2_000,
    connectTimeoutMs: 1_000,
    connections: 4,
    ...overrides,
  });
  clients.push(c);
  return c;
}

function requestsSeen(): number {
  return Object.values(sim.stats().requests).reduce((sum, byStatus) => sum + Object.values(byStatus).reduce((a, b) => a + b, 0), 0);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('BitGo adapter against the BitGo simulator', () => {
  it('reads a 200 send as accepted: the transfer id, our sequenceId, the txid; no recipient stated for a txHex send', async () => {
    const sequenceId = newSequenceId();
    const accepted = await client().sendTransaction(WALLET, sampleSend(sequenceId));
    expect(accepted.id).toMatch(HEX32);
    expect(accepted.id).toBe(sim.transfer(sequenceId)!.id);
    expect(accepted.sequenceId).toBe(sequenceId);
    expect(accepted.state).toBe('signed');
    expect(accepted.txid).toBe(sim.transfer(sequenceId)!.txid);
    // A send of txHex alone names no recipient in the simulator's entries: not stated, never guessed.
    expect('destinationAddress' in accepted).toBe(false);
    expect(accepted[EXACT_AMOUNT]).toBeUndefined();
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('reads a 202 PendingApproval as accepted, waiting for approval: the approval id, no txid', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    const accepted = await client().sendTransaction(WALLET, sampleSend(sequenceId));
    const view = sim.transfer(sequenceId)!;
    expect(accepted).toMatchObject({
      id: view.pendingApprovalId,
      pendingApproval: view.pendingApprovalId,
      sequenceId,
      state: 'pendingApproval',
      txid: '',
    });
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    // and the resend the domain may make later is the duplicate, never a second transfer
    const again = await failure(client().sendTransaction(WALLET, sampleSend(sequenceId)));
    expect([again.code, again.httpStatus, again.proof]).toEqual([CustodyErrorCode.DUPLICATE, 400, 'conflict']);
    expect(again.upstreamMessage).toMatch(/^DuplicateSequenceIdError/);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
  });

  it('a transfer waiting in pendingApproval has txid "", then after approval and the txid delay gets one, found by txid too', async () => {
    sim.updateSettings({ approvalAfterMs: 300, txidAfterMs: 300 });
    const c = client();
    const sequenceId = newSequenceId();
    await c.sendTransaction(WALLET, sampleSend(sequenceId));
    const [pending] = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(pending).toMatchObject({ sequenceId, type: 'send', state: 'pendingApproval', txid: '' });
    expect(pending!.id).toBe(sim.transfer(sequenceId)!.id);

    await sleep(Math.max(0, Date.parse(sim.transfer(sequenceId)!.approvedAt) + 30 - Date.now()));
    const [signed] = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(signed).toMatchObject({ state: 'signed', txid: '' });

    await sleep(Math.max(0, Date.parse(sim.transfer(sequenceId)!.txidAt) + 30 - Date.now()));
    const [withTxid] = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(withTxid!.txid).toMatch(/^0x[0-9a-f]{64}$/);
    expect(withTxid!.txid).toBe(sim.transfer(sequenceId)!.txid);

    const byTxid = await c.getTransfersByTxId(WALLET, withTxid!.txid);
    expect(byTxid.map((t) => [t.id, t.sequenceId])).toEqual([[withTxid!.id, sequenceId]]);
    const walletTx = await c.getWalletTransaction(WALLET, withTxid!.txid);
    expect(walletTx).toMatchObject({ txid: withTxid!.txid, id: withTxid!.id, state: 'signed' });

    const unknown = `0x${'0'.repeat(64)}`;
    expect(await c.getTransfersByTxId(WALLET, unknown)).toEqual([]);
    const missing = await failure(c.getWalletTransaction(WALLET, unknown));
    expect([missing.code, missing.endpoint, missing.httpStatus]).toEqual([CustodyErrorCode.NOT_FOUND, 'detail', 404]);
  });

  it('reads a 206 Partial Content lookup as the transfer', async () => {
    const c = client();
    const sequenceId = newSequenceId();
    await c.sendTransaction(WALLET, sampleSend(sequenceId));
    sim.updateSettings({ partialContent: true });
    const found = await c.getTransfersBySequenceId(WALLET, sequenceId);
    expect(found.map((t) => t.sequenceId)).toEqual([sequenceId]);
    expect(sim.stats().requests.transferBySequenceId).toEqual({ '206': 1 });
  });

  it('a forced rejected state rides along on the listed transfer, without a txid', async () => {
    sim.updateSettings({ approvalAfterMs: 60_000 });
    const c = client();
    const sequenceId = newSequenceId();
    await c.sendTransaction(WALLET, sampleSend(sequenceId));
    sim.setState(sequenceId, 'rejected');
    expect(await c.getTransfersBySequenceId(WALLET, sequenceId)).toMatchObject([{ state: 'rejected', txid: '' }]);
  });

  it('a 503 on send may have been processed (BitGo documents no "not taken" 5xx); a 400 refusal is not taken', async () => {
    sim.setFault('sendTransaction', { sequence: ['5xx', '400', '401'] });
    const c = client();
    const unavailable = await failure(c.sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([unavailable.code, unavailable.httpStatus, unavailable.proof]).toEqual([CustodyErrorCode.UNAVAILABLE, 503, 'maybe-processed']);
    const refused = await failure(c.sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([refused.code, refused.httpStatus, refused.proof]).toEqual([CustodyErrorCode.REJECTED, 400, 'not-taken']);
    const unauthorized = await failure(c.sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([unauthorized.code, unauthorized.proof]).toEqual([CustodyErrorCode.UNAUTHORIZED, 'not-taken']);
  });

  it('a 429 without Retry-After pauses 1 s; with one, what it asks (capped at maxPauseMs)', async () => {
    const seen: Array<[number, string | undefined]> = [];
    const hooks: RequestHooks = {
      beforeRequest: async () => {},
      afterRequest: () => {},
      onRateLimited: (pauseMs, asked) => seen.push([pauseMs, asked.retryAfter]),
    };
    sim.setFault('sendTransaction', { sequence: ['429'] });
    const bare = await failure(client().sendTransaction(WALLET, sampleSend(newSequenceId()), { hooks }));
    expect([bare.code, bare.retryAfterMs, bare.proof]).toEqual([CustodyErrorCode.RATE_LIMITED, 1_000, 'rate-limited']);
    sim.updateSettings({ retryAfterSec: 3_600 });
    sim.setFault('transferBySequenceId', { sequence: ['429'] });
    const capped = await failure(client({ maxPauseMs: 5_000 }).getTransfersBySequenceId(WALLET, newSequenceId(), { hooks }));
    expect(capped.retryAfterMs).toBe(5_000);
    expect(seen).toEqual([
      [1_000, undefined],
      [5_000, '3600'],
    ]);
  });

  it('a time-out after the send was processed may have been processed, and it was', async () => {
    sim.setFault('sendTransaction', { sequence: ['timeout'] });
    const sequenceId = newSequenceId();
    const error = await failure(client({ timeoutMs: 300 }).sendTransaction(WALLET, sampleSend(sequenceId)));
    expect([error.code, error.proof]).toEqual([CustodyErrorCode.TIMEOUT, 'maybe-processed']);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});

describe('BitGo adapter input checks: refused before any request', () => {
  it.each([
    310,
    '310',
    '5D1F0C9B2A7D4E3F8A6B1C0D9E8F7A6B',
    `${WALLET.walletId}0`,
    '../5d1f0c9b2a7d4e3f8a6b1c0d9e8f7a6',
    '',
    `${'a'.repeat(31)}/`,
  ])('wallet id %j', async (walletId) => {
    const wallet = { walletId, coin: 'hteth' } as WalletRef;
    const c = client();
    const calls = [
      c.sendTransaction(wallet, sampleSend(newSequenceId())),
      c.getTransfersBySequenceId(wallet, newSequenceId()),
      c.getTransfersByTxId(wallet, `0x${'ab'.repeat(32)}`),
      c.getWalletTransaction(wallet, `0x${'ab'.repeat(32)}`),
    ];
    for (const call of calls) {
      const error = await failure(call);
      expect([error.code, error.proof, error.maybeProcessed]).toEqual([CustodyErrorCode.INVALID_REQUEST, 'not-taken', false]);
    }
    expect(requestsSeen()).toBe(0);
  });

  it.each(['HTETH', '', '../hteth', 'hteth/x', 'hteth?x=1', 'ht eth', '.', '%2e'])('coin %j', async (coin) => {
    const c = client();
    const error = await failure(c.sendTransaction({ ...WALLET, coin }, sampleSend(newSequenceId())));
    expect(error.code).toBe(CustodyErrorCode.INVALID_REQUEST);
    expect((await failure(c.getTransfersBySequenceId({ ...WALLET, coin }, newSequenceId()))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
    expect(requestsSeen()).toBe(0);
  });

  it.each(['..', '.', 'a/b', 'a?b', '%2F', '', 'x'.repeat(300), '5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b'])('txid %j', async (txid) => {
    const c = client();
    expect((await failure(c.getTransfersByTxId(WALLET, txid))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
    expect((await failure(c.getWalletTransaction(WALLET, txid))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
    expect(requestsSeen()).toBe(0);
  });

  it('an empty or overlong sequenceId, a txHex that is not hex', async () => {
    const c = client();
    for (const sequenceId of ['', 'x'.repeat(257)]) {
      expect((await failure(c.sendTransaction(WALLET, sampleSend(sequenceId)))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
      expect((await failure(c.getTransfersBySequenceId(WALLET, sequenceId))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
    }
    const send = sampleSend(newSequenceId());
    const notHex = { ...send, halfSigned: { ...send.halfSigned, txHex: 'zz' } };
    expect((await failure(c.sendTransaction(WALLET, notHex))).code).toBe(CustodyErrorCode.INVALID_REQUEST);
    expect(requestsSeen()).toBe(0);
  });
});

describe('BitGo adapter against a scripted server', () => {
  let server: Server;
  let url: string;
  let answer: { status: number; body: string; headers?: Record<string, string> } = { status: 200, body: '{}' };
  const received: Array<{ method: string; path: string; authorization: string | undefined; body: string }> = [];

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body });
        res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
        res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    received.length = 0;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const transfer = (sequenceId: string, extra: Record<string, unknown> = {}) => ({
    id: '5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b',
    coin: 'hteth',
    wallet: WALLET.walletId,
    txid: null,
    type: 'send',
    state: 'signed',
    sequenceId,
    valueString: '-123456789012345678901',
    value: -123456789012345680000,
    entries: [
      { address: '0xOwn', wallet: WALLET.walletId, valueString: '-123456789012345678901' },
      { address: '0xAbCdEf0000000000000000000000000000000001', valueString: '123456789012345678900' },
    ],
    history: [{ user: '5b4e7d1c9a0f3e2d8c6b1a7f4e3d2c1b', action: 'created' }],
    comment: 'for Alice',
    ...extra,
  });

  it('sends { sequenceId, txHex } (hex as given, 0x or not) with the bearer token to /api/v2/{coin}/wallet/{walletId}/tx/send', async () => {
    const sequenceId = newSequenceId();
    answer = { status: 200, body: JSON.stringify({ transfer: transfer(sequenceId), tx: '02f8', status: 'signed' }) };
    const request = sampleSend(sequenceId);
    await client({ baseUrl: `${url}/` }).sendTransaction(WALLET, request);
    const prefixed = { ...request, halfSigned: { ...request.halfSigned, txHex: `0x${request.halfSigned.txHex}` } };
    await client({ baseUrl: url }).sendTransaction(WALLET, prefixed);
    expect(received).toEqual([
      {
        method: 'POST',
        path: `/api/v2/hteth/wallet/${WALLET.walletId}/tx/send`,
        authorization: `Bearer ${sim.accessToken}`,
        body: JSON.stringify({ sequenceId, txHex: request.halfSigned.txHex }),
      },
      {
        method: 'POST',
        path: `/api/v2/hteth/wallet/${WALLET.walletId}/tx/send`,
        authorization: `Bearer ${sim.accessToken}`,
        body: JSON.stringify({ sequenceId, txHex: `0x${request.halfSigned.txHex}` }),
      },
    ]);
  });

  it('refuses a sequenceId . or .. (URL parsing would resolve it, even encoded), encodes the others; reads a 404 lookup as none', async () => {
    for (const sequenceId of ['.', '..']) {
      expect((await failure(client({ baseUrl: url }).getTransfersBySequenceId(WALLET, sequenceId))).code).toBe(
        CustodyErrorCode.INVALID_REQUEST,
      );
      expect((await failure(client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId)))).code).toBe(
        CustodyErrorCode.INVALID_REQUEST,
      );
    }
    expect(received).toEqual([]);
    answer = { status: 404, body: JSON.stringify({ error: 'not found', name: 'NotFound' }) };
    expect(await client({ baseUrl: url }).getTransfersBySequenceId(WALLET, '.../a b?#%')).toEqual([]);
    expect(received.map((r) => [r.method, r.path])).toEqual([
      ['GET', `/api/v2/hteth/wallet/${WALLET.walletId}/transfer/sequenceId/...%2Fa%20b%3F%23%25`],
    ]);
  });

  it('takes destination and amount from the one recipient entry, exact base units; history and comment stay behind', async () => {
    const sequenceId = newSequenceId();
    answer = { status: 200, body: JSON.stringify({ transfer: transfer(sequenceId), tx: '02f8', status: 'signed' }) };
    const accepted = await client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId));
    expect(accepted.destinationAddress).toBe('0xAbCdEf0000000000000000000000000000000001');
    expect(accepted.amount).toBe('123456789012345678900');
    expect(accepted[EXACT_AMOUNT]).toBe('123456789012345678900');
    expect(accepted.txid).toBe('');
    expect(accepted.raw).toBe('02f8');
    expect(accepted).not.toHaveProperty('history');
    expect(accepted).not.toHaveProperty('comment');
    const noRaw = await client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId), { keepRaw: false });
    expect(noRaw).not.toHaveProperty('raw');

    // two recipients: neither is "the" destination
    const two = transfer(sequenceId, {
      entries: [...transfer(sequenceId).entries, { address: '0x2', valueString: '5' }],
    });
    answer = { status: 200, body: JSON.stringify({ transfer: two }) };
    const ambiguous = await client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId));
    expect([ambiguous.destinationAddress, ambiguous[EXACT_AMOUNT]]).toEqual([undefined, undefined]);
  });

  it('tolerates the flat TxSendResponse; lists outputs from the recipient entries', async () => {
    const sequenceId = newSequenceId();
    answer = { status: 200, body: JSON.stringify(transfer(sequenceId, { txid: '0xabc' })) };
    const accepted = await client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId));
    expect([accepted.id, accepted.txid]).toEqual(['5f1e0c9b2a7d4e3f8a6b1c0d9e8f7a6b', '0xabc']);
    const [listed] = await client({ baseUrl: url }).getTransfersBySequenceId(WALLET, sequenceId);
    expect(listed!.outputs).toEqual([{ address: '0xAbCdEf0000000000000000000000000000000001', amount: '123456789012345678900' }]);
    expect(listed).not.toHaveProperty('history');
  });

  it('a 200 about another sequenceId, or without one, is BAD_RESPONSE maybe-processed; so is such a lookup answer', async () => {
    answer = { status: 200, body: JSON.stringify({ transfer: transfer('someone-else') }) };
    const other = await failure(client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([other.code, other.proof]).toEqual([CustodyErrorCode.BAD_RESPONSE, 'maybe-processed']);
    answer = { status: 200, body: JSON.stringify({ transfer: transfer('x', { sequenceId: undefined }) }) };
    const none = await failure(client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([none.code, none.proof]).toEqual([CustodyErrorCode.BAD_RESPONSE, 'maybe-processed']);
    answer = { status: 200, body: JSON.stringify(transfer('someone-else')) };
    expect((await failure(client({ baseUrl: url }).getTransfersBySequenceId(WALLET, newSequenceId()))).code).toBe(
      CustodyErrorCode.BAD_RESPONSE,
    );
    answer = { status: 202, body: '<html>accepted</html>' };
    const unreadable202 = await failure(client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(newSequenceId())));
    expect([unreadable202.code, unreadable202.proof]).toEqual([CustodyErrorCode.BAD_RESPONSE, 'maybe-processed']);
  });

  it('423, 403 are not taken; an undocumented 409 or 422 may have been processed; the error text is never passed on', async () => {
    const cases: Array<[number, string, string]> = [
      [423, CustodyErrorCode.REJECTED, 'not-taken'],
      [403, CustodyErrorCode.REJECTED, 'not-taken'],
      [409, CustodyErrorCode.REJECTED, 'maybe-processed'],
      [422, CustodyErrorCode.REJECTED, 'maybe-processed'],
      [502, CustodyErrorCode.UNAVAILABLE, 'maybe-processed'],
    ];
    for (const [status, code, proof] of cases) {
      answer = { status, body: JSON.stringify({ error: 'wallet 5d1f… is locked for Alice', name: 'Locked', requestId: 'r-1' }) };
      const error = await failure(client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(newSequenceId())));
      expect([error.httpStatus, error.code, error.proof]).toEqual([status, code, proof]);
      expect(error.upstreamMessage).toBe('Locked (requestId r-1)');
      expect(JSON.stringify(error)).not.toContain('Alice');
    }
  });

  it('a PendingApproval with one readable recipient states it', async () => {
    answer = {
      status: 202,
      body: JSON.stringify({
        id: 'a'.repeat(32),
        state: 'pending',
        info: { transactionRequest: { recipients: [{ address: '0xDest', amount: '1000000000000000000001' }], comment: 'for Bob' } },
      }),
    };
    const sequenceId = newSequenceId();
    const accepted = await client({ baseUrl: url }).sendTransaction(WALLET, sampleSend(sequenceId));
    expect(accepted).toMatchObject({
      id: 'a'.repeat(32),
      sequenceId,
      state: 'pendingApproval',
      destinationAddress: '0xDest',
      amount: '1000000000000000000001',
    });
    expect(accepted[EXACT_AMOUNT]).toBe('1000000000000000000001');
    expect(JSON.stringify(accepted)).not.toContain('Bob');
  });
});

describe('BITGO_SEND_PROOF', () => {
  it('gives every example its own row’s proof, and the rows cover every answer', () => {
    for (const row of BITGO_SEND_PROOF) {
      for (const example of row.examples) {
        expect(bitgoSendProof(example), `${row.answer}: ${JSON.stringify(example)}`).toBe(row.proof);
        expect(BITGO_SEND_PROOF.find((r) => r.covers(example))).toBe(row);
      }
    }
    expect(bitgoSendProof({ kind: 'status', status: 400, name: 'DuplicateSequenceIdError' })).toBe('conflict');
    expect(bitgoSendProof({ kind: 'status', status: 503 })).toBe('maybe-processed');
    expect(bitgoSendProof({ kind: 'status', status: 202, body: 'pending-approval' })).toBe('accepted');
    expect(bitgoSendProof({ kind: 'status', status: 418 })).toBe('maybe-processed');
  });
});
