/**
 * Path injection through the custody client (issue 6 item 4): wallet ids and txids that try to leave
 * their path segment (`../1`, `1/../../x`, `%2e%2e`, `1?x=1`, `1#`, spaces, unicode, random strings).
 * Each must either be refused before any request with CUSTODY_INVALID_REQUEST, or reach the server as
 * exactly the expected path with the value as one segment, never another upstream path. The server
 * records every request target as it arrived on the wire.
 */
import fc from 'fast-check';
import './fc-seed.ts';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { CustodyError, CustodyErrorCode } from '../../src/custody/errors.ts';
import { sampleSend } from '../../tools/sample-payloads.ts';
import { startScriptedServer, type ScriptedServer } from './scripted-server.ts';

const RUNS = 400;
/** Both bases carry a path, so an escape upwards would show as a path outside it. */
const BASE_PATH = '/custody/v1';

const HOSTILE = [
  '../1',
  '1/../../x',
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F1',
  '..%2f1',
  '1%2F2',
  '1?x=1',
  '1#',
  '#1',
  'a b',
  ' 1',
  '1 ',
  '1\n',
  '1\r\nHost: evil',
  '1\u0000',
  '%00',
  '',
  '/1',
  '1/',
  '//evil.example/x',
  'http://evil.example/',
  '@evil.example',
  '1\\..\\x',
  '1;x=1',
  '1:2',
  'a:b',
  'a.b',
  'a..b',
  '1.',
  '-1',
  '+1',
  '1.0',
  '1e3',
  '0x1f',
  '１２',
  '٣١٠',
  'é',
  '😀',
  '\ud800',
  '0'.repeat(21),
  '9'.repeat(20),
  '310',
];

const HOSTILE_NUMBERS = [310, 0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 1e21, 2 ** 53];

/** Characters that mean something in a URL, mixed with plain ones, so random strings hit them often. */
const URL_CHARS = [
  '/',
  '.',
  '%',
  '?',
  '#',
  ' ',
  '\\',
  ':',
  '@',
  ';',
  '&',
  '=',
  '+',
  '2',
  'e',
  'E',
  'f',
  'F',
  '0',
  '1',
  'a',
  '\n',
  '\u0000',
  'é',
  '😀',
];
const hostileString = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ unit: fc.constantFrom(...URL_CHARS), maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,20}$/),
);
const hostileWalletId = fc.oneof(
  hostileString,
  fc.constantFrom<number | string>(...HOSTILE_NUMBERS),
  fc.integer().map((n) => n as number | string),
);

/** The rules for path parameters (docs/upstream-api.md, assumptions): a wallet id is digits; a txid one token of [A-Za-z0-9._:-]. */
const WALLET_ID_RULE = /^\d+$/;
const TXID_RULE = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

let server: ScriptedServer;
let client: CustodyClient;
/** Both outcomes must occur in each test, or the property checks nothing. */
let tally = { refused: 0, sent: 0 };
beforeEach(() => {
  tally = { refused: 0, sent: 0 };
});
afterEach(() => {
  expect(tally.refused).toBeGreaterThan(0);
  expect(tally.sent).toBeGreaterThan(0);
});

beforeAll(async () => {
  // Refuses everything (418): a 404 would not do, since get-transfer reads "not found" as an empty list.
  server = await startScriptedServer(() => ({
    status: 418,
    headers: { 'content-type': 'application/json' },
    body: '{"success":false,"message":"refused"}',
  }));
  client = new CustodyClient({
    sdkUrl: `${server.url}${BASE_PATH}/`,
    baseUrl: `${server.url}${BASE_PATH}/`,
    clientId: 'path-client',
    clientSecret: 'path-secret',
    accessToken: 'path-token',
    timeoutMs: 1_000,
    connectTimeoutMs: 1_000,
    connections: 4,
  });
});
afterAll(async () => {
  await client?.close();
  await server?.close();
});

type Outcome = { requests: Array<{ method: string; url: string; body: string }>; error: unknown };

async function observe(call: () => Promise<unknown>): Promise<Outcome> {
  const before = server.requests.length;
  let error: unknown;
  try {
    await call();
  } catch (caught) {
    error = caught;
  }
  return { requests: server.requests.slice(before), error };
}

/**
 * Refused locally (no request) or sent as exactly `segments` under the base path; `values` says which
 * segment holds which input, and that input must then follow that rule.
 */
function expectConfined(outcome: Outcome, expected: { method: string; segments: Array<string | { value: unknown; rule: RegExp }> }): void {
  tally[outcome.requests.length === 0 ? 'refused' : 'sent']++;
  const { requests, error } = outcome;
  expect(error, 'the call never resolves against a server that refuses everything').toBeInstanceOf(CustodyError);
  const code = (error as CustodyError).code;
  if (code === CustodyErrorCode.INVALID_REQUEST) {
    expect(requests, 'refused before any request').toEqual([]);
    return;
  }
  expect(code).toBe(CustodyErrorCode.REJECTED);
  expect(requests).toHaveLength(1);
  const { method, url } = requests[0]!;
  expect(method).toBe(expected.method);
  expect(url).not.toMatch(/[?#]/);
  const parts = url.split('/');
  const want = ['', ...BASE_PATH.split('/').slice(1)];
  expect(parts.slice(0, want.length)).toEqual(want);
  const rest = parts.slice(want.length);
  expect(rest).toHaveLength(expected.segments.length);
  for (const [i, segment] of expected.segments.entries()) {
    if (typeof segment === 'string') {
      expect(rest[i]).toBe(segment);
      continue;
    }
    const decoded = decodeURIComponent(rest[i]!);
    expect(decoded).toBe(String(segment.value));
    expect(decoded).toMatch(segment.rule);
    expect(['.', '..']).not.toContain(decoded);
  }
}

describe('path parameters of the custody client cannot leave their segment', () => {
  it(`sendTransaction: a wallet id is refused or sent as one segment (${HOSTILE.length + HOSTILE_NUMBERS.length} named cases + ${RUNS} runs)`, async () => {
    const check = async (walletId: number | string) => {
      const outcome = await observe(() => client.sendTransaction(walletId, sampleSend('path-fuzz')));
      expectConfined(outcome, {
        method: 'POST',
        segments: ['api', 'wallet', { value: walletId, rule: WALLET_ID_RULE }, 'sendTransaction'],
      });
    };
    for (const walletId of [...HOSTILE, ...HOSTILE_NUMBERS]) await check(walletId);
    await fc.assert(fc.asyncProperty(hostileWalletId, check), { numRuns: RUNS });
  });

  it(`getWalletTransaction: a wallet id and a txid are refused or sent as one segment each (${HOSTILE.length * 2} named cases + ${RUNS} runs)`, async () => {
    const check = async (walletId: number | string, txid: string) => {
      const outcome = await observe(() => client.getWalletTransaction(walletId, txid));
      expectConfined(outcome, {
        method: 'GET',
        segments: ['api', 'wallet', { value: walletId, rule: WALLET_ID_RULE }, 'txid', { value: txid, rule: TXID_RULE }],
      });
    };
    for (const hostile of HOSTILE) {
      await check(310, hostile);
      await check(hostile, 'abc123');
    }
    await fc.assert(fc.asyncProperty(hostileWalletId, hostileString, check), { numRuns: RUNS });
  });

  it(`get-transfer: hostile wallet ids and txids stay in the JSON body, the path never changes (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(hostileWalletId, hostileString, fc.boolean(), async (walletId, id, byTxId) => {
        const wallet = { walletId, coin: 'eth' };
        const outcome = await observe(() => (byTxId ? client.getTransfersByTxId(wallet, id) : client.getTransfersBySequenceId(wallet, id)));
        expectConfined(outcome, { method: 'POST', segments: ['api', 'wallet', 'get-transfer'] });
        if (outcome.requests.length === 1) {
          const body = JSON.parse(outcome.requests[0]!.body) as {
            wallet: { walletId: unknown; coin: string };
            txId?: string;
            sequenceId?: string;
          };
          expect(String(walletId)).toMatch(WALLET_ID_RULE);
          expect(body.wallet).toEqual({ walletId: Number(walletId), coin: 'eth' });
          expect(byTxId ? body.txId : body.sequenceId).toBe(id);
        }
      }),
      { numRuns: RUNS },
    );
  });
});
