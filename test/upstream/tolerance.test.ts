/**
 * The custody client against answers that differ from the spec's examples only where the worker does
 * not decide anything (issue 11), over real HTTP from a scripted server. Each case failed before: the
 * client then required every documented field with its documented type.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { txidEquals } from '../../src/custody/matching.ts';
import { CustodyClient, travelRuleApplies, type CustodyClientOptions } from '../../src/custody/wallet-service/client.ts';
import { CustodyErrorCode } from '../../src/custody/errors.ts';
import { EXACT_AMOUNT, UNREADABLE, type SkippedRecord, type TransactionList } from '../../src/custody/wallet-service/schemas.ts';
import { startScriptedServer, type RecordedRequest, type Reply, type ScriptedServer } from '../fuzz/scripted-server.ts';
import { sampleSend } from '../../tools/sample-payloads.ts';
import { failure } from '../helpers/custody-error.ts';

let server: ScriptedServer;
let answer: (request: RecordedRequest) => Reply = () => ({ status: 500 });
const clients: CustodyClient[] = [];
let skipped: Array<{ endpoint: string; record: SkippedRecord }> = [];

beforeAll(async () => {
  server = await startScriptedServer((request) => answer(request));
});
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await server.close();
});

function client(overrides: Partial<CustodyClientOptions> = {}): CustodyClient {
  skipped = [];
  const c = new CustodyClient({
    sdkUrl: server.url,
    baseUrl: server.url,
    clientId: 'id',
    clientSecret: 'secret',
    accessToken: 'token',
    timeoutMs: 2_000,
    connectTimeoutMs: 2_000,
    connections: 2,
    onSkippedRecords: (endpoint, records) => skipped.push(...records.map((record) => ({ endpoint, record }))),
    ...overrides,
  });
  clients.push(c);
  return c;
}

const json = (body: unknown, status = 200): Reply => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
});
const WALLET = { walletId: 310, coin: 'eth' };
const SEQ = 'a88a1846-b23d-f7e8-2344-f2bddb0c16f9';

/** A spec-shaped 2.1 record (upstream API 2.1/2.2/2.3). */
function transaction(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    coin: 'eth',
    id: '70000001',
    wallet: 310,
    txid: '0x4f3a9c',
    date: '2026-11-22T10:00:00.000Z',
    value: '-0.01234567',
    valueString: '-0.01234567',
    baseValue: -1234567,
    baseValueString: '-0.01234567',
    feeString: '0.00010000',
    usd: '-41.23456',
    walletType: 'pipeline',
    inputs: [{ address: '0xMine', amount: '0.01244567', isMine: true, wallet: { id: 310, name: 'hot', raw: null, teamId: null } }],
    outputs: [{ address: '0xAbCdEf', amount: '0.01234567', isMine: false }],
    type: 'send',
    DestinationTag: null,
    ...overrides,
  };
}

function submitted(amountText = '0.01234567', overrides: Record<string, unknown> = {}): string {
  const raw = JSON.stringify({
    txHex: '02f8',
    halfSigned: { txBase64: 'AvixAY==', txHex: '02f8', sequenceId: SEQ },
    user: { id: 7, displayName: 'Jane Doe', photoURL: null, lastLoginAt: null, email: 'jane@example.com', phoneNumber: null },
    sequenceId: SEQ,
  });
  const record = {
    id: 150001,
    userid: 1043,
    raw,
    status: 1,
    walletid: '310',
    type: 0,
    asset: 'eth',
    chain: 'eth',
    timestamp: '2026-11-22T10:00:00.000Z',
    transactionSequenceId: 9,
    sequenceId: SEQ,
    amount: 0,
    destinationAddress: '0xAbCdEf',
    usdamount: 41.2,
    ...overrides,
  };
  // The amount is written as its digits, as a provider's JSON would carry it (JSON.stringify of a double cannot).
  return JSON.stringify(record).replace('"amount":0', `"amount":${amountText}`);
}

describe('is-enabled', () => {
  it('reads the gate from a setting with dataJson and updatedBy null, absent fields and extra keys', async () => {
    answer = () =>
      json({
        success: true,
        data: { outgoingTxn: 1, mandatory: true, blockTxn: false, dataJson: null, updatedBy: null, id: '42', extra: { a: 1 } },
      });
    const setting = await client().getTravelRuleSetting();
    expect(setting).toMatchObject({ outgoingTxn: 1, mandatory: true, blockTxn: false });
    expect(travelRuleApplies(setting)).toBe(true);
    expect(setting).not.toHaveProperty('extra');
  });

  it('refuses a gate field of another type: the decision is never guessed', async () => {
    for (const data of [
      { outgoingTxn: '1', mandatory: true, blockTxn: false },
      { outgoingTxn: 1, mandatory: 'true', blockTxn: false },
      { outgoingTxn: 1, mandatory: true },
    ]) {
      answer = () => json({ success: true, data });
      expect((await failure(client().getTravelRuleSetting())).code).toBe(CustodyErrorCode.BAD_RESPONSE);
    }
  });
});

describe('get-transfer lists', () => {
  it('parses record by record: receive records, nulls, absent keys and an older format never hide the transfer', async () => {
    answer = () =>
      json([
        transaction({
          id: '60000001',
          type: 'receive',
          outputs: [{ address: '0xMine', amount: '1.00000000', isMine: true, wallet: 'hot' }],
        }),
        transaction({
          id: '60000002',
          outputs: [{ address: '0xOther', amount: '2' }],
          usd: null,
          DestinationTag: undefined,
          feeString: undefined,
          walletType: null,
          extra: 1,
        }),
        { id: 60000003, type: 'send', txid: '0x01', value: -0.5, fee: '0.1', outputs: [{ address: '0xOld', amount: '0.5' }] },
        transaction({ outputs: [{ address: '0xabcdef', amount: '0.01234567', isMine: false, wallet: null }] }),
      ]);
    const list = await client().getTransfersBySequenceId(WALLET, SEQ);
    expect(list.map((tx) => tx.id)).toEqual(['60000001', '60000002', '60000003', '70000001']);
    expect(skipped).toEqual([]);
    // The adapter's matching: address in any letter case, amount at the list's precision.
    const found = await client().findTransfer(WALLET, { sequenceId: SEQ, destinationAddress: '0xAbCdEf', amount: '0.01234567' });
    expect(found).toMatchObject({ kind: 'found', transfer: { id: '70000001' } });
    expect(JSON.stringify(list)).not.toContain('"extra"');
  });

  it('skips a record that breaks what decides a match, counts it, and matches among the others', async () => {
    answer = () => json([transaction({ id: '60000001', outputs: [{ address: '0xAbCdEf', amount: 0.01234567 }] }), transaction()]);
    const list = await client().getTransfersBySequenceId(WALLET, SEQ);
    expect(list.map((tx) => tx.id)).toEqual(['70000001']);
    expect(skipped).toEqual([{ endpoint: 'lookup', record: { index: 0, paths: ['outputs.0.amount'], ours: false } }]);
  });

  it('says so when the skipped record is the one carrying the sequenceId looked for', async () => {
    answer = () => json([transaction({ sequenceId: SEQ, txid: 12345 })]);
    const list = await client().getTransfersBySequenceId(WALLET, SEQ);
    expect(list).toHaveLength(0);
    expect((list as TransactionList)[UNREADABLE]).toBe(1);
    expect(skipped).toEqual([{ endpoint: 'lookup', record: { index: 0, paths: ['txid'], ours: true } }]);
  });

  it('reads a txid that is null, absent or empty as "not broadcast yet"', async () => {
    answer = () =>
      json([transaction({ id: '1', txid: null }), transaction({ id: '2', txid: undefined }), transaction({ id: '3', txid: '' })]);
    expect((await client().getTransfersBySequenceId(WALLET, SEQ)).map((tx) => tx.txid)).toEqual(['', '', '']);
  });

  it('takes an empty address, an absent DestinationTag and an embedded wallet of any shape', async () => {
    answer = () =>
      json([
        transaction({
          DestinationTag: undefined,
          inputs: [
            {
              address: '',
              amount: '1',
              isMine: true,
              wallet: { id: '310', status: null, balance: null, raw: { user: { email: 'x@example.com' } } },
            },
          ],
          outputs: [{ address: '', amount: '0.5', isMine: false, wallet: 'n/a' }],
        }),
      ]);
    const [tx] = await client().getTransfersBySequenceId(WALLET, SEQ);
    expect(tx!.outputs[0]).toMatchObject({ address: '', amount: '0.5', wallet: 'n/a' });
    expect(JSON.stringify(tx)).not.toContain('example.com');
  });

  it.each<[string, Reply]>([
    ['HTTP 404', json({ success: false, message: 'no transfer found' }, 404)],
    ['success:false saying not found', json({ success: false, message: 'Transfer not found' })],
    ['success:false saying no records', json({ success: false, message: 'No records for this wallet' }, 400)],
  ])('reads %s as an empty list (assumption, docs/upstream-api.md)', async (_name, reply) => {
    answer = () => reply;
    expect(await client().getTransfersBySequenceId(WALLET, SEQ)).toEqual([]);
  });

  it('still refuses success:false for any other reason', async () => {
    answer = () => json({ success: false, message: 'wallet locked' });
    expect((await failure(client().getTransfersBySequenceId(WALLET, SEQ))).code).toBe(CustodyErrorCode.REJECTED);
  });

  it('never takes the one readable send for ours when another record of the answer was unreadable', async () => {
    // Ours (unreadable id) and another transfer's send, neither carrying a sequenceId (as in the spec).
    answer = () => json([transaction({ id: -1, outputs: [{ address: '0xOurs', amount: '1' }] }), transaction({ id: '70000002' })]);
    const list = await client().getTransfersBySequenceId(WALLET, SEQ);
    expect(list.map((tx) => tx.id)).toEqual(['70000002']);
    expect(await client().findTransfer(WALLET, { sequenceId: SEQ })).toMatchObject({ kind: 'ambiguous', candidates: 1 });
  });
});

describe('sendTransaction', () => {
  it('accepts a record whose person has null fields, and drops the person', async () => {
    answer = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: submitted() });
    const record = await client().sendTransaction(310, sampleSend(SEQ));
    expect(record.sequenceId).toBe(SEQ);
    expect(record.raw).not.toContain('Jane');
    expect(JSON.parse(record.raw as string)).not.toHaveProperty('user');
  });

  it('keeps an amount of 20 significant digits exactly, and one in exponent form', async () => {
    for (const [text, exact] of [
      ['12345678901234.567891', '12345678901234.567891'],
      ['123456789012345678.91', '123456789012345678.91'],
      ['1.5e-7', '0.00000015'],
      ['2E+3', '2000'],
    ] as const) {
      answer = () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: submitted(text) });
      const record = await client().sendTransaction(310, sampleSend(SEQ));
      expect(record[EXACT_AMOUNT]).toBe(exact);
      expect(JSON.stringify(record)).not.toContain('EXACT'); // the symbol key never reaches JSON
    }
  });

  it('takes loose fields as text, null or absent', async () => {
    answer = () => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: submitted('0.5', { usdamount: '41.2', userid: null, chain: undefined, status: 'ok' }),
    });
    const record = await client().sendTransaction(310, sampleSend(SEQ));
    expect(record[EXACT_AMOUNT]).toBe('0.5');
  });

  it('refuses an answer about another sequenceId as unreadable, and as "may have gone out"', async () => {
    answer = () => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: submitted('0.5', { sequenceId: 'someone-else' }),
    });
    const error = await failure(client().sendTransaction(310, sampleSend(SEQ)));
    expect(error.code).toBe(CustodyErrorCode.BAD_RESPONSE);
    expect(error.maybeProcessed).toBe(true);
  });
});

describe('the token endpoint', () => {
  it('takes expires_in as numeric text and token_type in any case, and caches the token', async () => {
    let tokens = 0;
    answer = (request) => {
      if (request.url === '/oauth/token') {
        tokens++;
        return json({ access_token: 'abc', expires_in: '3600', token_type: 'BEARER' });
      }
      return { status: 200, headers: { 'content-type': 'application/json' }, body: submitted() };
    };
    const c = client({ accessToken: undefined, tokenUrl: `${server.url}/oauth/token` });
    await c.sendTransaction(310, sampleSend(SEQ));
    await c.sendTransaction(310, sampleSend(SEQ));
    expect(tokens).toBe(1);
    expect(server.requests.at(-1)!.headers.authorization).toBe('Bearer abc');
  });

  it('refuses a token of another type', async () => {
    answer = (request) => (request.url === '/oauth/token' ? json({ access_token: 'abc', token_type: 'mac' }) : json({}));
    const error = await failure(
      client({ accessToken: undefined, tokenUrl: `${server.url}/oauth/token` }).sendTransaction(310, sampleSend(SEQ)),
    );
    expect(error.code).toBe(CustodyErrorCode.BAD_RESPONSE);
    expect(error.endpoint).toBe('token');
  });
});

describe('wallet transactions and txids', () => {
  it('needs only the txid of a 2.5 record', async () => {
    answer = () => json({ result: { txid: '0xAB', runningbalance: undefined, explorerLink: null, wallet: null, walletid: '310' } });
    expect((await client().getWalletTransaction(310, '0xab')).txid).toBe('0xAB');
  });

  it('compares hex txids without regard to letter case, anything else exactly', () => {
    expect(txidEquals('0x4F3A9C', '0x4f3a9c')).toBe(true);
    expect(txidEquals('4F3A9C', '4f3a9c')).toBe(true);
    expect(txidEquals('0x4f3a9c', '0x4f3a9d')).toBe(false);
    expect(txidEquals('Tx-ABC', 'tx-abc')).toBe(false);
  });
});
