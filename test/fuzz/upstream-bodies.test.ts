/**
 * The custody client against every answer a broken or hostile upstream could give: random JSON, real
 * answers (captured from the simulator) with fields removed, retyped or replaced, truncated JSON, huge
 * numbers, the wrong content type, `success: false` on HTTP 200, empty bodies, odd statuses, dropped
 * connections and no answer at all. Every call must resolve with a value that meets docs/upstream-api.md section 2
 * (checked here without the client's schemas: amounts still decimal text) or reject with a CustodyError
 * of one of the fixed codes, within its time-out.
 */
import fc from 'fast-check';
import './fc-seed.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { CustodyClient, type CustodyClientOptions } from '../../src/custody/wallet-service/client.ts';
import { EXACT_AMOUNT } from '../../src/custody/wallet-service/schemas.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from '../../src/custody/errors.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { startScriptedServer, type Reply, type ScriptedServer } from './scripted-server.ts';

const RUNS_PER_ENDPOINT = 300;
const TOKEN_RUNS = 200;
/** The client's deadline for answers that come: generous, so a loaded machine never turns one into a time-out. */
const TIMEOUT_MS = 5_000;
/** The client's deadline where the server never answers ('hang'), short to keep the run fast. */
const HANG_TIMEOUT_MS = 250;
/** Far above the client's own deadline: reaching it means the call hung. */
const HANG_GUARD_MS = TIMEOUT_MS * 2 + 2_000;

const CLIENT_ID = 'fuzz-client';
const CLIENT_SECRET = 'fuzz-client-secret-5c1e7a';
const ACCESS_TOKEN = 'fuzz-static-token-9b2d44';
const CODES: ReadonlySet<string> = new Set(Object.values(CustodyErrorCode));

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Endpoint = Exclude<CustodyEndpoint, 'token'>;

interface Captured {
  /** The sequenceId the captured sendTransaction answer names. */
  sequenceId: string;
  getTransfer: Json;
  sendTransaction: Json;
  getWalletTransaction: Json;
  isEnabled: Json;
  token: Json;
  txid: string;
}

/** Real answers of every endpoint, taken from the simulator over HTTP (raw.user included). */
async function captureAnswers(): Promise<Captured> {
  const sim = await startSimulator({ port: 0 });
  try {
    const basic = `Basic ${Buffer.from(`${sim.clientId}:${sim.clientSecret}`).toString('base64')}`;
    const json = async (path: string, init: RequestInit): Promise<Json> => {
      const response = await fetch(`${sim.url}${path}`, init);
      if (!response.ok) throw new Error(`simulator ${path}: HTTP ${response.status}`);
      return (await response.json()) as Json;
    };
    const token = await json('/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: sim.clientId, client_secret: sim.clientSecret }),
    });
    const bearer = `Bearer ${(token as { access_token: string }).access_token}`;
    const sequenceId = newSequenceId();
    const sendTransaction = await json('/api/wallet/310/sendTransaction', {
      method: 'POST',
      headers: { authorization: bearer, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(sampleSend(sequenceId)),
    });
    const getTransfer = await json('/api/wallet/get-transfer', {
      method: 'POST',
      headers: { authorization: basic, 'content-type': 'application/json' },
      body: JSON.stringify({ wallet: { coin: 'eth', walletId: 310 }, sequenceId }),
    });
    const txid = (getTransfer as Array<{ txid: string }>)[0]!.txid;
    const getWalletTransaction = await json(`/api/wallet/310/txid/${txid}`, {
      headers: { authorization: bearer, accept: 'application/json' },
    });
    const isEnabled = await json('/api/travel-rule/is-enabled', { method: 'POST', headers: { authorization: basic } });
    expect(JSON.parse((sendTransaction as { raw: string }).raw)).toHaveProperty('user');
    return { getTransfer, sendTransaction, getWalletTransaction, isEnabled, token, txid, sequenceId };
  } finally {
    await sim.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Mutations of a JSON answer

type Path = Array<string | number>;

function allPaths(value: Json, prefix: Path = []): Path[] {
  const out: Path[] = [];
  if (Array.isArray(value)) value.forEach((item, i) => out.push([...prefix, i], ...allPaths(item, [...prefix, i])));
  else if (value && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) out.push([...prefix, key], ...allPaths(item, [...prefix, key]));
  return out;
}

function update(value: Json, path: Path, change: (parent: Json[] | Record<string, Json>, key: string | number) => void): Json {
  const copy = structuredClone(value);
  let parent: Json = copy;
  for (const key of path.slice(0, -1)) parent = (parent as Record<string | number, Json>)[key as string]!;
  change(parent as Json[] | Record<string, Json>, path.at(-1)!);
  return copy;
}

function retype(value: Json): Json {
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return /^-?\d+(\.\d+)?$/.test(value) ? Number(value) : value.length;
  if (typeof value === 'boolean') return value ? 'true' : 0;
  if (value === null) return 0;
  return Array.isArray(value) ? {} : [];
}

const HUGE = ['1e400', '-1e400', '123456789012345678901234567890', '1e-400', '9007199254740993', '0.1e99999', '-0'];
const PLACEHOLDER = '__fuzz_huge_number__';

type Mutation =
  | { kind: 'none' | 'wrap-data' | 'wrap-result' | 'wrap-success' | 'unwrap' }
  | { kind: 'remove' | 'retype'; at: number }
  | { kind: 'replace'; at: number; value: Json }
  | { kind: 'huge'; at: number; number: string }
  | { kind: 'truncate'; at: number }
  | { kind: 'success-false'; message: Json }
  | { kind: 'random-json'; value: Json }
  | { kind: 'text'; text: string }
  | { kind: 'bytes'; bytes: Uint8Array };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom<Mutation>(
      { kind: 'none' },
      { kind: 'wrap-data' },
      { kind: 'wrap-result' },
      { kind: 'wrap-success' },
      { kind: 'unwrap' },
    ),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constantFrom('remove' as const, 'retype' as const), at: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('replace' as const),
      at: fc.nat(),
      value: fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('huge' as const), at: fc.nat(), number: fc.constantFrom(...HUGE) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('success-false' as const),
      message: fc.oneof(fc.string(), fc.jsonValue({ maxDepth: 1 })) as fc.Arbitrary<Json>,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('random-json' as const), value: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json> }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('text' as const),
      text: fc.oneof(fc.constantFrom('', ' ', 'null', 'OK', '<html>502</html>', '{', '[', '{"success":true}', '\ufeff{}'), fc.string()),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 64 }) }) },
);

function mutate(valid: Json, mutation: Mutation): string | Buffer {
  const paths = allPaths(valid);
  const pick = (at: number) => paths[at % paths.length]!;
  switch (mutation.kind) {
    case 'none':
      return JSON.stringify(valid);
    case 'wrap-data':
      return JSON.stringify({ data: valid });
    case 'wrap-result':
      return JSON.stringify({ result: valid });
    case 'wrap-success':
      return JSON.stringify({ success: true, data: valid });
    case 'unwrap': {
      const inner = valid && typeof valid === 'object' && !Array.isArray(valid) ? (valid.data ?? valid.result ?? valid) : valid;
      return JSON.stringify(inner);
    }
    case 'remove':
      return JSON.stringify(
        update(valid, pick(mutation.at), (parent, key) => {
          if (Array.isArray(parent)) parent.splice(key as number, 1);
          else delete parent[key as string];
        }),
      );
    case 'retype':
    case 'replace':
      return JSON.stringify(
        update(valid, pick(mutation.at), (parent, key) => {
          const p = parent as Record<string | number, Json>;
          p[key] = mutation.kind === 'replace' ? mutation.value : retype(p[key]!);
        }),
      );
    case 'huge':
      return JSON.stringify(
        update(valid, pick(mutation.at), (parent, key) => {
          (parent as Record<string | number, Json>)[key] = PLACEHOLDER;
        }),
      ).replace(`"${PLACEHOLDER}"`, mutation.number);
    case 'truncate': {
      const text = JSON.stringify(valid);
      return text.slice(0, mutation.at % text.length);
    }
    case 'success-false':
      return JSON.stringify({ success: false, message: mutation.message });
    case 'random-json':
      return JSON.stringify(mutation.value);
    case 'text':
      return mutation.text;
    case 'bytes':
      return Buffer.from(mutation.bytes);
  }
}

const STATUSES = [200, 201, 202, 299, 301, 302, 400, 401, 403, 404, 405, 408, 409, 410, 418, 422, 429, 500, 502, 503, 504, 599];

const replyArb = (valid: () => Json): fc.Arbitrary<Reply> =>
  fc
    .record({
      status: fc.oneof({ weight: 6, arbitrary: fc.constant(200) }, { weight: 2, arbitrary: fc.constantFrom(...STATUSES) }),
      contentType: fc.constantFrom<string | undefined>(
        'application/json',
        'application/json; charset=utf-8',
        'text/html',
        'text/plain',
        'application/octet-stream',
        undefined,
      ),
      retryAfter: fc.option(
        fc.oneof(
          fc.constantFrom('0', '1', '120', '99999999999', '-5', 'soon', 'Wed, 21 Oct 2015 07:28:00 GMT', 'Fri, 01 Jan 2100 00:00:00 GMT'),
          fc.string({ maxLength: 12 }),
        ),
      ),
      mode: fc.oneof(
        { weight: 60, arbitrary: fc.constant('normal' as const) },
        { weight: 1, arbitrary: fc.constant('hang' as const) },
        { weight: 2, arbitrary: fc.constant('reset' as const) },
        { weight: 2, arbitrary: fc.constant('cut' as const) },
      ),
      mutation: mutationArb,
    })
    .map(({ status, contentType, retryAfter, mode, mutation }) => {
      const headers: Record<string, string> = {};
      if (contentType) headers['content-type'] = contentType;
      // Header values must be visible ASCII for node:http to send them at all.
      if (retryAfter !== null && /^[\x20-\x7e]*$/.test(retryAfter)) headers['retry-after'] = retryAfter;
      return { status, headers, body: mutate(valid(), mutation), mode };
    });

// ---------------------------------------------------------------------------------------------------
// What a resolved value must be, checked without the client's schemas: strict where money or
// tracking is decided (docs/upstream-api.md, assumptions), no undocumented key, no person from any `raw`.

const UNSIGNED = /^\d+(\.\d+)?$/;

function expectKeys(value: object, allowed: string[], what: string): void {
  expect(
    Object.keys(value).filter((key) => !allowed.includes(key)),
    `${what}: no undocumented field passes`,
  ).toEqual([]);
}

function expectNoUser(raw: unknown, what: string): void {
  const parsed =
    typeof raw === 'string'
      ? (() => {
          try {
            return JSON.parse(raw) as unknown;
          } catch {
            return undefined;
          }
        })()
      : raw;
  if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) expect(parsed, `${what}: no user`).not.toHaveProperty('user');
}

function checkTransactions(value: unknown): void {
  expect(Array.isArray(value)).toBe(true);
  for (const t of value as Array<Record<string, unknown>>) {
    expectKeys(
      t,
      [
        'coin',
        'id',
        'wallet',
        'txid',
        'date',
        'value',
        'valueString',
        'baseValue',
        'baseValueString',
        'feeString',
        'usd',
        'walletType',
        'inputs',
        'outputs',
        'type',
        'DestinationTag',
        'sequenceId',
      ],
      'transaction',
    );
    expect(t.id as string).toMatch(/^\d+$/);
    expect(typeof t.txid).toBe('string');
    expect(typeof t.type).toBe('string');
    expect(t.sequenceId === undefined || typeof t.sequenceId === 'string').toBe(true);
    expect(Array.isArray(t.outputs)).toBe(true);
    for (const party of t.outputs as Array<Record<string, unknown>>) {
      expectKeys(party, ['address', 'amount', 'isMine', 'wallet'], 'output');
      expect(typeof party.address).toBe('string');
      expect(party.amount as string).toMatch(UNSIGNED);
      if (party.wallet && typeof party.wallet === 'object')
        expectNoUser((party.wallet as Record<string, unknown>).raw, 'output wallet raw');
    }
    for (const party of Array.isArray(t.inputs) ? (t.inputs as unknown[]) : []) {
      if (party && typeof party === 'object') {
        const wallet = (party as Record<string, unknown>).wallet;
        if (wallet && typeof wallet === 'object') expectNoUser((wallet as Record<string, unknown>).raw, 'input wallet raw');
      }
    }
  }
}

function checkSubmitted(value: unknown): void {
  const record = value as Record<string, unknown>;
  expectKeys(
    record,
    [
      'id',
      'userid',
      'raw',
      'status',
      'walletid',
      'type',
      'asset',
      'chain',
      'timestamp',
      'transactionSequenceId',
      'sequenceId',
      'amount',
      'destinationAddress',
      'usdamount',
    ],
    'submitted record',
  );
  expect(Number.isSafeInteger(record.id) || /^\d+$/.test(String(record.id))).toBe(true);
  expect(record.sequenceId).toBe(answers.sequenceId);
  expect(typeof record.destinationAddress).toBe('string');
  // 2.4 documents `amount` as a JSON number; its exact decimal text rides on a symbol key.
  expect(typeof record.amount === 'number' || UNSIGNED.test(String(record.amount))).toBe(true);
  expect((value as { [EXACT_AMOUNT]?: string })[EXACT_AMOUNT]).toMatch(UNSIGNED);
  expectNoUser(record.raw, '2.4 raw');
}

function checkWalletTransaction(value: unknown): void {
  const tx = value as Record<string, unknown>;
  expectKeys(
    tx,
    [
      'id',
      'txid',
      'raw',
      'walletid',
      'type',
      'fee',
      'effectivechange',
      'runningbalance',
      'timestamp',
      'externaladdress',
      'coin',
      'effectivechangeusd',
      'wallet',
      'explorerLink',
    ],
    'wallet transaction',
  );
  expect(typeof tx.txid).toBe('string');
  expectNoUser(tx.raw, '2.5 raw');
}

function checkSetting(value: unknown): void {
  const setting = value as Record<string, unknown>;
  expect(Number.isSafeInteger(setting.outgoingTxn), 'outgoingTxn is an integer').toBe(true);
  expect(typeof setting.mandatory).toBe('boolean');
  expect(typeof setting.blockTxn).toBe('boolean');
}

/** The code an answer must map to when the client could read it (docs/upstream-api.md, assumptions: errors). */
function expectedCode(endpoint: CustodyEndpoint, status: number, body: string): string | undefined {
  if (status === 401) return CustodyErrorCode.UNAUTHORIZED;
  if (status === 404 && endpoint === 'lookup') return 'resolved []'; // "nothing found" (docs/upstream-api.md assumption)
  if (status === 404) return CustodyErrorCode.NOT_FOUND;
  if (status === 409 && endpoint === 'send') return CustodyErrorCode.DUPLICATE;
  if (status === 429) return CustodyErrorCode.RATE_LIMITED;
  if (status === 408 || status >= 500) return CustodyErrorCode.UNAVAILABLE;
  if (status < 200 || status >= 300) return CustodyErrorCode.REJECTED;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return CustodyErrorCode.BAD_RESPONSE;
  }
  const envelope = parsed as { success?: unknown; message?: unknown } | null;
  if (
    envelope &&
    typeof envelope === 'object' &&
    !Array.isArray(envelope) &&
    envelope.success === false &&
    (envelope.message === undefined || typeof envelope.message === 'string')
  ) {
    return CustodyErrorCode.REJECTED;
  }
  // A 2xx the client refused: the body failed the schema, nothing else is possible.
  return CustodyErrorCode.BAD_RESPONSE;
}

async function settle(call: Promise<unknown>): Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the call neither resolved nor rejected within ${HANG_GUARD_MS} ms`)), HANG_GUARD_MS);
  });
  try {
    return { ok: true, value: await Promise.race([call, guard]) };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('the call neither')) throw error;
    return { ok: false, error };
  } finally {
    clearTimeout(timer);
  }
}

function checkOutcome(
  endpoint: CustodyEndpoint,
  reply: Reply,
  outcome: { ok: true; value: unknown } | { ok: false; error: unknown },
  checkValue: (value: unknown) => void,
): void {
  const bodyText = Buffer.isBuffer(reply.body) ? reply.body.toString('utf8') : (reply.body ?? '');
  const mode = reply.mode ?? 'normal';
  if (outcome.ok) {
    expect(mode).toBe('normal');
    checkValue(outcome.value);
    if (reply.status >= 200 && reply.status < 300) return;
    // Only a get-transfer "nothing found" resolves on an error status: as an empty list.
    expect(endpoint === 'lookup' && outcome.value, `resolved on HTTP ${reply.status}`).toEqual([]);
    expect(
      reply.status === 404 || /not\s*found|no\s+(transfers?|transactions?|records?|results?|data)\b|does\s+not\s+exist/i.test(bodyText),
      `resolved on HTTP ${reply.status}`,
    ).toBe(true);
    return;
  }
  const error = outcome.error;
  expect(error, String(error)).toBeInstanceOf(CustodyError);
  const custody = error as CustodyError;
  expect(CODES.has(custody.code), custody.code).toBe(true);
  for (const secret of [CLIENT_SECRET, ACCESS_TOKEN]) expect(`${custody.message} ${custody.upstreamMessage ?? ''}`).not.toContain(secret);
  if (mode === 'hang') expect(custody.code).toBe(CustodyErrorCode.TIMEOUT);
  else if (mode === 'reset' || mode === 'cut') expect([CustodyErrorCode.UNAVAILABLE, CustodyErrorCode.TIMEOUT]).toContain(custody.code);
  else {
    expect(custody.code, `HTTP ${reply.status} ${bodyText.slice(0, 120)}`).toBe(expectedCode(endpoint, reply.status, bodyText));
    expect(custody.endpoint).toBe(endpoint);
    if (custody.code === CustodyErrorCode.RATE_LIMITED) {
      expect(Number.isFinite(custody.retryAfterMs) && custody.retryAfterMs! >= 0 && custody.retryAfterMs! <= 10 * 60_000).toBe(true);
    }
  }
}

// ---------------------------------------------------------------------------------------------------

let answers: Captured;
let server: ScriptedServer;
let reply: Reply = { status: 500 };
const clients: CustodyClient[] = [];

function newClient(overrides: Partial<CustodyClientOptions> = {}): CustodyClient {
  const client = new CustodyClient({
    sdkUrl: server.url,
    baseUrl: server.url,
    clientId: CLIENT_ID,
    clientSecret: CLIENT_SECRET,
    accessToken: ACCESS_TOKEN,
    timeoutMs: TIMEOUT_MS,
    connectTimeoutMs: TIMEOUT_MS,
    connections: 4,
    ...overrides,
  });
  clients.push(client);
  return client;
}

beforeAll(async () => {
  answers = await captureAnswers();
  server = await startScriptedServer(() => reply);
});
afterAll(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  await server?.close();
});

describe('custody client fed random and broken upstream answers', () => {
  const cases: Array<{
    endpoint: Endpoint;
    valid: () => Json;
    call: (client: CustodyClient) => Promise<unknown>;
    check: (value: unknown) => void;
  }> = [
    {
      endpoint: 'lookup',
      valid: () => answers.getTransfer,
      call: (client) => client.getTransfersBySequenceId({ walletId: 310, coin: 'eth' }, 'fuzz-sequence'),
      check: checkTransactions,
    },
    {
      endpoint: 'send',
      valid: () => answers.sendTransaction,
      // The answer must name the sequenceId that was sent (the client refuses one about another transfer).
      call: (client) => client.sendTransaction(310, sampleSend(answers.sequenceId)),
      check: checkSubmitted,
    },
    {
      endpoint: 'detail',
      valid: () => answers.getWalletTransaction,
      call: (client) => client.getWalletTransaction(310, answers.txid),
      check: checkWalletTransaction,
    },
    {
      endpoint: 'gate',
      valid: () => answers.isEnabled,
      call: (client) => client.getTravelRuleSetting(),
      check: checkSetting,
    },
  ];

  for (const { endpoint, valid, call, check } of cases) {
    it(`${endpoint}: resolves with a spec-valid value or rejects with a fixed CustodyError code (${RUNS_PER_ENDPOINT} runs)`, async () => {
      const client = newClient();
      const hangClient = newClient({ timeoutMs: HANG_TIMEOUT_MS, connectTimeoutMs: HANG_TIMEOUT_MS });
      // The unmutated answer must pass, or the property would only ever see failures.
      reply = { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(valid()) };
      check(await call(client));

      const tally = new Map<string, number>();
      await fc.assert(
        fc.asyncProperty(replyArb(valid), async (scripted) => {
          reply = scripted;
          const outcome = await settle(call(scripted.mode === 'hang' ? hangClient : client));
          checkOutcome(endpoint, scripted, outcome, check);
          const kind = outcome.ok ? 'resolved' : (outcome.error as CustodyError).code;
          tally.set(kind, (tally.get(kind) ?? 0) + 1);
        }),
        { numRuns: RUNS_PER_ENDPOINT },
      );
      // Not vacuous: some answers passed, and some were refused as unreadable.
      expect(tally.get('resolved') ?? 0, JSON.stringify([...tally])).toBeGreaterThan(0);
      expect(tally.get(CustodyErrorCode.BAD_RESPONSE) ?? 0, JSON.stringify([...tally])).toBeGreaterThan(0);
      if (process.env.FUZZ_TALLY) process.stderr.write(`${endpoint}: ${JSON.stringify(Object.fromEntries(tally))}\n`);
    }, 60_000);
  }

  it(`token endpoint: a broken token answer fails the call with a CustodyError, never another error (${TOKEN_RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        replyArb(() => answers.token),
        async (scripted) => {
          // A fresh client per run, so every run asks the token endpoint first.
          const deadline = scripted.mode === 'hang' ? { timeoutMs: HANG_TIMEOUT_MS, connectTimeoutMs: HANG_TIMEOUT_MS } : {};
          const client = newClient({ accessToken: undefined, tokenUrl: `${server.url}/oauth/token`, ...deadline });
          const seen = server.requests.length;
          server.respond = (request) =>
            request.url === '/oauth/token' ? scripted : { status: 200, body: JSON.stringify(answers.getWalletTransaction) };
          try {
            const outcome = await settle(client.getWalletTransaction(310, answers.txid));
            const bearer = server.requests.slice(seen).find((request) => request.url !== '/oauth/token');
            if (outcome.ok) {
              checkWalletTransaction(outcome.value);
              // Only a usable token reaches the bearer endpoint, and it is the one the token endpoint gave.
              const token = (JSON.parse(scripted.body!.toString()) as { access_token?: unknown }).access_token;
              expect(typeof token === 'string' && token.length > 0).toBe(true);
              expect(bearer?.headers.authorization).toBe(`Bearer ${token as string}`);
            } else {
              const error = outcome.error as CustodyError;
              expect(error, String(error)).toBeInstanceOf(CustodyError);
              expect(CODES.has(error.code)).toBe(true);
              expect(`${error.message} ${error.upstreamMessage ?? ''}`).not.toContain(CLIENT_SECRET);
            }
          } finally {
            server.respond = () => reply;
            clients.splice(clients.indexOf(client), 1);
            await client.close();
          }
        },
      ),
      { numRuns: TOKEN_RUNS },
    );
  }, 60_000);
});
