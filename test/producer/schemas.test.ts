/**
 * The JSON Schemas the producer package ships (packages/producer/schemas, docs/contract.md section 8): committed
 * files that must be exactly what the zod schemas generate now, and that must decide like them, so a
 * producer in another language that validates with them enqueues what the worker accepts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import '../fuzz/fc-seed.ts';
import { describe, expect, it } from 'vitest';
import {
  generateSchemas,
  generateTransitionModule,
  TRANSITION_LUA_FILE,
  TRANSITION_MODULE_FILE,
} from '../../packages/producer/scripts/generate-schemas.ts';
import { cancelResultSchema } from '../../packages/producer/src/cancel-result.ts';
import { TRANSITION_LUA as PACKAGE_TRANSITION_LUA, type CancelResult } from '../../packages/producer/src/transition.ts';
import { TRANSITION_LUA as WORKER_TRANSITION_LUA } from '../../src/ledger/request.ts';
import {
  checkEventData,
  EVENT_TYPES,
  EventShapeError,
  TERMINAL_EVENTS,
  type EventData,
  type EventType,
} from '../../packages/producer/src/events.ts';
import { TERMINAL_STATES } from '../../packages/producer/src/catalog.ts';
import { parseSubmitPayload } from '../../packages/producer/src/payload.ts';
import { mutatedPayloadArb, randomPayloadArb, validPayloadArb, MAX_METADATA_BYTES } from '../fuzz/payload-oracle.ts';
import { assertEventDataMatchesJsonSchema, checkCancelResultJson, checkPayloadJson, SCHEMAS_DIR } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';

const RUNS = { valid: 300, mutated: 1_500, random: 500 } as const;

describe('the committed JSON Schemas', () => {
  it('are exactly what the zod schemas generate now (run `npm run schemas` after changing a schema)', () => {
    const generated = generateSchemas();
    for (const [path, text] of Object.entries(generated)) {
      expect(readFileSync(new URL(path, SCHEMAS_DIR), 'utf8'), `schemas/${path} is stale: run npm run schemas`).toBe(text);
    }
    const committed = readdirSync(new URL('events/', SCHEMAS_DIR)).map((name) => `events/${name}`);
    expect(committed.sort()).toEqual(
      Object.keys(generated)
        .filter((path) => path.startsWith('events/'))
        .sort(),
    );
  });

  it('are one per event type plus the job payload, each with its $id, title and description', () => {
    const paths = ['submit-payload.schema.json', ...EVENT_TYPES.map((type) => `events/${type}.schema.json`)];
    expect(Object.keys(generateSchemas()).sort()).toEqual([...paths, 'catalog.json', 'cancel-result.schema.json'].sort());
    for (const path of paths) {
      const schema = JSON.parse(readFileSync(new URL(path, SCHEMAS_DIR), 'utf8')) as Record<string, unknown>;
      expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
      expect(schema.$id).toBe(`urn:custody-transfer-producer:schemas/${path}`);
      expect(typeof schema.title === 'string' && schema.title.length > 0, path).toBe(true);
      expect(typeof schema.description === 'string' && schema.description.length > 20, path).toBe(true);
    }
  });

  it("ship the worker's transition script as it is now (run `npm run schemas` after changing transition.lua)", () => {
    const lua = readFileSync(TRANSITION_LUA_FILE, 'utf8');
    expect(readFileSync(TRANSITION_MODULE_FILE, 'utf8'), 'packages/producer/src/transition-lua.ts is stale: run npm run schemas').toBe(
      generateTransitionModule(lua),
    );
    // One script: what the package's cancel() runs is, byte for byte, what the worker's ledger runs.
    expect(PACKAGE_TRANSITION_LUA).toBe(WORKER_TRANSITION_LUA);
    // The generator escapes what a template literal would change.
    const tricky = 'a `b` ${c} \\d';
    expect(new Function(`${generateTransitionModule(tricky).replace('export const', 'const')}\nreturn TRANSITION_LUA_SOURCE;`)()).toBe(
      tricky,
    );
  });

  it('describe the cancel result as the package types it: every outcome validates, wrong ones do not', () => {
    const good: CancelResult[] = [
      { outcome: 'cancelled', state: 'cancelled', version: 1, streamId: '1-0' },
      { outcome: 'too-late', state: 'submitting' },
      { outcome: 'too-late', state: '-', ledger: 'no-epoch-or-recovering' },
      { outcome: 'already-ended', state: 'cancelled' },
      { outcome: 'already-ended', state: 'blocked', version: 2 },
    ];
    for (const result of good) {
      expect(checkCancelResultJson(result).valid, JSON.stringify(result)).toBe(true);
      expect(cancelResultSchema.safeParse(result).success).toBe(true);
    }
    for (const result of [
      { outcome: 'cancelled', state: 'gated', version: 1, streamId: '1-0' },
      { outcome: 'already-ended', state: 'submitting' },
      { outcome: 'too-late', state: 'nope' },
      { outcome: 'maybe', state: 'cancelled' },
    ]) {
      expect(checkCancelResultJson(result).valid, JSON.stringify(result)).toBe(false);
      expect(cancelResultSchema.safeParse(result).success).toBe(false);
    }
  });

  it('ship the contract catalog, which the Python example reads instead of restating it', () => {
    const catalog = JSON.parse(readFileSync(new URL('catalog.json', SCHEMAS_DIR), 'utf8')) as Record<string, string[]>;
    expect(catalog.eventTypes).toEqual([...EVENT_TYPES]);
    expect(catalog.terminalEventTypes).toEqual([...TERMINAL_EVENTS]);
    expect(catalog.terminalStates).toEqual([...TERMINAL_STATES]);
    const python = readFileSync(new URL('../../../examples/python-producer/contract.py', SCHEMAS_DIR), 'utf8');
    expect(python).toContain('_CATALOG["eventTypes"]');
    expect(python).not.toMatch(/"transfer\.broadcast"/);
  });
});

/** Whether two JSON values hold the same text (no undefined, BigInt, cycle or function lost on the way). */
function asJson(value: unknown): { ok: true; json: unknown } | { ok: false } {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? { ok: false } : { ok: true, json: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

function metadataTooLarge(json: unknown): boolean {
  const metadata =
    json !== null && typeof json === 'object' && Object.hasOwn(json, 'metadata') ? (json as Record<string, unknown>).metadata : undefined;
  return metadata !== null && typeof metadata === 'object' && Buffer.byteLength(JSON.stringify(metadata), 'utf8') > MAX_METADATA_BYTES;
}

/**
 * Job data as a queue holds it (JSON): the JSON Schema accepts it exactly when the zod schema does,
 * except a metadata object over 4 KiB, which JSON Schema cannot see (the schema says so).
 */
function decidesLikeZod(value: unknown): void {
  const copy = asJson(value);
  if (!copy.ok) return;
  const zod = parseSubmitPayload(copy.json);
  const json = checkPayloadJson(copy.json);
  if (zod.ok) {
    expect(json.valid ? 'valid' : json.errors, JSON.stringify(copy.json).slice(0, 300)).toBe('valid');
    return;
  }
  const onlyTheSize = metadataTooLarge(copy.json) && zod.issues.every((issue) => issue.path === 'metadata');
  expect(json.valid, `zod: ${JSON.stringify(zod.issues)}; data: ${JSON.stringify(copy.json).slice(0, 300)}`).toBe(onlyTheSize);
}

/** A BitGo wallet id (32 lowercase hex characters). */
const BITGO_WALLET = '59cd72485007a239fb00282ed480da1f';

describe("walletId: a positive integer, or BitGo's 32-hex wallet id", () => {
  const withWallet = (walletId: unknown) => ({ ...samplePayload(), walletId });
  const walletOf = (walletId: unknown) => {
    const parsed = parseSubmitPayload(withWallet(walletId));
    return parsed.ok ? { ok: true as const, walletId: parsed.payload.walletId } : { ok: false as const, issues: parsed.issues };
  };
  const refusal = { ok: false, issues: [{ path: 'walletId', message: 'must be a positive integer or a 32-hex wallet id' }] };

  it('accepts 32 lowercase hex characters and keeps them as the string', () => {
    expect(walletOf(BITGO_WALLET)).toEqual({ ok: true, walletId: BITGO_WALLET });
    expect(walletOf('f'.repeat(32))).toEqual({ ok: true, walletId: 'f'.repeat(32) });
    expect(walletOf(`${'0'.repeat(31)}a`)).toEqual({ ok: true, walletId: `${'0'.repeat(31)}a` });
  });

  it('refuses 31 or 33 hex characters, uppercase hex, a 0x prefix and spaces', () => {
    for (const walletId of [
      BITGO_WALLET.slice(1),
      `${BITGO_WALLET}a`,
      BITGO_WALLET.toUpperCase(),
      `${BITGO_WALLET.slice(0, 31)}F`,
      `0x${BITGO_WALLET.slice(2)}`,
      ` ${BITGO_WALLET.slice(1)}`,
      `${BITGO_WALLET.slice(0, 31)}g`,
    ]) {
      expect(walletOf(walletId), walletId).toEqual(refusal);
    }
  });

  it('still normalises a string of digits to the number, and refuses what it refused, whatever the length', () => {
    expect(walletOf('310')).toEqual({ ok: true, walletId: 310 });
    expect(walletOf('00310')).toEqual({ ok: true, walletId: 310 });
    expect(walletOf(310)).toEqual({ ok: true, walletId: 310 });
    // 32 digits are the integer form, never a hex id: a number when it is one, refused when too large.
    expect(walletOf(`${'0'.repeat(29)}310`)).toEqual({ ok: true, walletId: 310 });
    expect(walletOf('1'.repeat(32))).toEqual(refusal);
    expect(walletOf('0'.repeat(32))).toEqual(refusal);
    expect(walletOf('9007199254740992')).toEqual(refusal);
  });
});

describe('schemas/submit-payload.schema.json decides like the worker', () => {
  const SAMPLES = Array.from({ length: 4 }, () => JSON.parse(JSON.stringify(samplePayload())) as Record<string, unknown>);

  it('on named edge cases: walletId text up to the largest safe integer, leading zeros, base64 padding, null for absent', () => {
    const base = samplePayload();
    const withWallet = (walletId: unknown) => ({ ...base, walletId });
    const withBase64 = (txBase64: string) => ({ ...base, halfSigned: { ...base.halfSigned, txBase64 } });
    const cases: unknown[] = [
      withWallet('9007199254740991'),
      withWallet('9007199254740992'),
      withWallet('0009007199254740991'),
      withWallet('9007199254740990'),
      withWallet('8999999999999999'),
      withWallet('10000000000000000'),
      withWallet('0'),
      withWallet('000'),
      withWallet('007'),
      withWallet(' 7'),
      withWallet(9007199254740991),
      withWallet(0),
      withWallet(1.5),
      withWallet(-3),
      // BitGo's wallet id: 32 lowercase hex; digits only is the integer form, whatever the length.
      withWallet(BITGO_WALLET),
      withWallet(BITGO_WALLET.toUpperCase()),
      withWallet(BITGO_WALLET.slice(1)),
      withWallet(`${BITGO_WALLET}0`),
      withWallet('1'.repeat(32)),
      withWallet(`${'0'.repeat(31)}7`),
      withWallet(`0x${BITGO_WALLET.slice(2)}`),
      withBase64('AA=='),
      withBase64('AAA='),
      withBase64('AAAA'),
      withBase64('A==='),
      withBase64('AA='),
      withBase64('AA=A'),
      withBase64('AAAAAA=='),
      { ...base, travelRule: null, metadata: null },
      { ...base, travelRule: { reference: '' } },
      { ...base, metadata: [] },
      { ...base, metadata: 'text' },
      { ...base, metadata: { note: 'x'.repeat(MAX_METADATA_BYTES) } },
      { ...base, unknownField: true },
    ];
    for (const data of cases) decidesLikeZod(data);
  });

  it(`accepts every valid payload (${RUNS.valid} runs)`, () => {
    fc.assert(fc.property(validPayloadArb, decidesLikeZod), { numRuns: RUNS.valid });
  });

  it(`decides mutated payloads as zod does (${RUNS.mutated} runs)`, () => {
    fc.assert(fc.property(mutatedPayloadArb(SAMPLES), decidesLikeZod), { numRuns: RUNS.mutated });
  });

  it(`decides random values as zod does (${RUNS.random} runs)`, () => {
    fc.assert(fc.property(randomPayloadArb, decidesLikeZod), { numRuns: RUNS.random });
  });
});

/** One valid `data` per event type, in the shapes of the contract's examples. */
const VALID: { [K in EventType]: Array<EventData[K]> } = {
  'transfer.submitted': [
    {
      transfer: { id: 48213, userid: 7, status: 0, sequenceId: 'a88a1846', amount: 0.0125, destinationAddress: '0x5b38', usdamount: 41.37 },
    },
    {
      transfer: null,
      recoveredBy: 'get-transfer',
      transaction: { id: '1702233', type: 'send', txid: '', outputs: [{ address: '0x5b38', amount: '0.0125' }] },
    },
    { transfer: null, recoveredBy: 'duplicate' },
    { transfer: null, recoveredBy: 'operator', reason: 'seen in the provider console' },
  ],
  'transfer.unresolved': [{ code: 'SEND_OUTCOME_UNKNOWN', attempts: 3, lastError: 'CUSTODY_TIMEOUT' }],
  'transfer.broadcast': [
    {
      txid: '0x9f2c',
      transaction: {
        coin: 'eth',
        id: '1702233',
        wallet: 310,
        txid: '0x9f2c',
        type: 'send',
        outputs: [{ address: '0x5b38', amount: '0.0125', isMine: false }],
      },
      walletTransaction: { id: 88123, txid: '0x9f2c', fee: '0.00021000' },
    },
    { txid: '0x9f2c', transaction: { id: '1', type: 'send', txid: '0x9f2c', outputs: [] }, walletTransaction: null },
  ],
  'transfer.rejected': [{ code: 'INVALID_PAYLOAD', issues: [{ path: 'coin', message: 'must be 1-32 of a-z 0-9 . _ -' }] }],
  'transfer.blocked': [{ code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: 1, mandatory: true, blockTxn: false } }],
  'transfer.failed': [
    { code: 'CUSTODY_REJECTED', httpStatus: 422, message: 'sendTransaction: HTTP 422, request refused', attempts: 1 },
    { code: 'OPERATOR_RESOLVED', httpStatus: null, message: 'refused in the console', attempts: 2, resolvedBy: 'operator' },
  ],
  'transfer.expired': [
    { code: 'TRACKING_DEADLINE', submittedAt: '2026-11-23T10:15:02.120Z', deadline: '2026-11-24T10:15:02.120Z' },
    { code: 'SEND_OUTCOME_UNKNOWN', submittedAt: '2026-11-23T10:15:02.120Z', deadline: '2026-11-24T10:15:02.120Z' },
    { code: 'SEQUENCE_ID_IN_USE', submittedAt: '2026-11-23T10:15:02.120Z', deadline: '2026-11-24T10:15:02.120Z' },
  ],
  'transfer.halted': [
    { state: 'rejected', providerTransferId: '5f1e0c3b9a7d4e2f8c6b1a0d9e8f7a6b' },
    { state: 'deleted', providerTransferId: '1702233' },
  ],
  'transfer.cancelled': [
    { reason: 'duplicate order A-1001, ticket OPS-77', by: 'cli' },
    { reason: 'x', by: 'http:ops' },
  ],
  'reconcile.completed': [
    {
      checked: 3,
      resubmitted: 1,
      trackersRestored: 2,
      unrecoverable: 0,
      verified: 40,
      mismatches: 0,
      verifyErrors: 0,
      retentionRemoved: 120,
      staleIndexRemoved: 0,
      interrupted: false,
      durationMs: 84,
    },
  ],
};

/** Shapes a publisher could get wrong: each is refused by both the zod schema and the JSON Schema. */
const INVALID: Array<[EventType, string, unknown]> = [
  [
    'transfer.submitted',
    'raw travels',
    { transfer: { id: 1, sequenceId: 's', amount: 1, destinationAddress: 'a', raw: '{"txHex":"02"}' } },
  ],
  ['transfer.submitted', 'null record without recoveredBy', { transfer: null }],
  ['transfer.submitted', 'lookup without its transaction', { transfer: null, recoveredBy: 'get-transfer' }],
  ['transfer.submitted', 'operator without a reason', { transfer: null, recoveredBy: 'operator' }],
  ['transfer.submitted', 'amount not decimal text', { transfer: { id: 1, sequenceId: 's', amount: '1e3', destinationAddress: 'a' } }],
  [
    'transfer.broadcast',
    'empty txid',
    { txid: '', transaction: { id: '1', type: 'send', txid: '', outputs: [] }, walletTransaction: null },
  ],
  [
    'transfer.broadcast',
    'walletTransaction missing (null, not absent)',
    { txid: '0x1', transaction: { id: '1', type: 'send', txid: '0x1', outputs: [] } },
  ],
  ['transfer.rejected', 'no issues', { code: 'INVALID_PAYLOAD', issues: [] }],
  ['transfer.failed', 'httpStatus missing', { code: 'CUSTODY_REJECTED', message: 'm', attempts: 1 }],
  ['transfer.failed', 'negative attempts', { code: 'CUSTODY_REJECTED', httpStatus: 422, message: 'm', attempts: -1 }],
  [
    'transfer.expired',
    'submittedAt not ISO',
    { code: 'TRACKING_DEADLINE', submittedAt: 'yesterday', deadline: '2026-11-24T10:15:02.120Z' },
  ],
  ['transfer.expired', 'unknown code', { code: 'LATE', submittedAt: '2026-11-23T10:15:02.120Z', deadline: '2026-11-24T10:15:02.120Z' }],
  ['transfer.unresolved', 'attempts not whole', { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1.5, lastError: 'X' }],
  ['reconcile.completed', 'counts missing', { checked: 1 }],
  ['transfer.halted', 'no state', { providerTransferId: '1702233' }],
  ['transfer.halted', 'empty state', { state: '', providerTransferId: '1702233' }],
  ['transfer.halted', 'no providerTransferId', { state: 'rejected' }],
  ['transfer.halted', 'providerTransferId of neither form', { state: 'failed', providerTransferId: 'ABC-1' }],
  ['transfer.cancelled', 'no reason', { by: 'cli' }],
  ['transfer.cancelled', 'blank reason', { reason: '  ', by: 'cli' }],
  ['transfer.cancelled', 'reason over two lines', { reason: 'one\ntwo', by: 'cli' }],
  ['transfer.cancelled', 'reason longer than 256', { reason: 'r'.repeat(257), by: 'cli' }],
  ['transfer.cancelled', 'no by', { reason: 'duplicate' }],
];

describe('the event schemas', () => {
  it.each(EVENT_TYPES)('%s: the documented shapes pass both the zod schema and the JSON Schema', (type) => {
    for (const data of VALID[type]) {
      expect(() => checkEventData(type, data)).not.toThrow();
      expect(() => assertEventDataMatchesJsonSchema(type, data)).not.toThrow();
    }
  });

  it.each(INVALID)('%s refused by both: %s', (type, _why, data) => {
    expect(() => checkEventData(type, data)).toThrow(EventShapeError);
    expect(() => assertEventDataMatchesJsonSchema(type, data)).toThrow(new RegExp(`^${type.replace('.', '\\.')} data does not validate`));
  });
});
