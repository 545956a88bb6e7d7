/**
 * What decides money is read the same however the rest of an answer varies, and a broken decision field
 * is never read as something else (issue 11, STYLE principles 7 and 14). Spec-valid answers are captured
 * from the simulator (spec profile), mutated by fast-check, served over real HTTP by a scripted server
 * and read by the real CustodyClient; the result then goes through `findTransfer` and
 * `travelRuleApplies`, as the worker uses them.
 *
 * (a) Fields the worker does not decide on: set to null, deleted, retyped (number, string, array,
 *     object, boolean), unknown keys added at any depth → the decision fields and the outcome (the
 *     transfer matched, the gate decided) are those of the unmutated answer.
 * (b) One field it does decide on broken (id, type, txid, sequenceId, output address or amount,
 *     destination, 2.4 amount, the gate's fields) → a CustodyError BAD_RESPONSE for a single record;
 *     for a get-transfer list that record is skipped and reported (`ours` when it carried the sequenceId
 *     looked for) and the others read as before; and `findTransfer` never returns another transfer's
 *     record as ours.
 *
 * A failure prints fast-check's `{ seed, path }`: replay with FUZZ_SEED / FUZZ_PATH (test/fuzz/fc-seed.ts).
 */
import fc from 'fast-check';
import '../fuzz/fc-seed.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { matchAnswer, txidEquals } from '../../src/custody/matching.ts';
import type { KnownTransfer, TransferFinding } from '../../src/custody/port.ts';
import { LIST_AMOUNT_PLACES } from '../../src/lib/decimal.ts';

/** The first provider's matching rules (its adapter's findTransfer, without the narrowing probe). */
const findTransfer = (list: readonly ListedTransfer[], known: KnownTransfer): TransferFinding =>
  matchAnswer(list, known, { amountPlaces: LIST_AMOUNT_PLACES });
import { CustodyClient, travelRuleApplies } from '../../src/custody/wallet-service/client.ts';
import { CustodyError, CustodyErrorCode } from '../../src/custody/errors.ts';
import { EXACT_AMOUNT, type SkippedRecord, type SubmittedTransfer, type Transaction } from '../../src/custody/wallet-service/schemas.ts';
import type { ListedTransfer } from '../../src/custody/port.ts';
import { startScriptedServer, type ScriptedServer } from '../fuzz/scripted-server.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';

const RUNS = 300;
const WALLET = { walletId: 310, coin: 'eth' };
/** 20 significant digits: a 2.4 amount a double cannot hold (upstream API 2.4 types it as a JSON number). */
const FIXED_AMOUNT = '12345678901234.567891';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = Array<string | number>;

// ---------------------------------------------------------------------------------------------------
// JSON written exactly: a string '\u0000raw:<text>' is written as <text>, unquoted (a number's own
// digits, e.g. a 20-digit amount or an id beyond 2^53, which no double can carry).

const RAW = '\u0000raw:';
const raw = (text: string): string => RAW + text;

function serialize(value: Json): string {
  return JSON.stringify(value).replace(/"\\u0000raw:([^"]*)"/g, '$1');
}

// ---------------------------------------------------------------------------------------------------
// Captured answers

interface Captured {
  /** Ours: the transfer looked for, and its submitted record's match fields. */
  sequenceId: string;
  match: { destinationAddress: string; amount: string };
  ourId: string;
  ourTxid: string;
  /** get-transfer by our sequenceId, not narrowed (other transfers of the wallet listed too). */
  list: Json[];
  /** The same records, each carrying its sequenceId (a field the spec does not show, some providers add). */
  listWithSequenceIds: Json[];
  /** 2.4 answers: ours (amount as a double) and one with a 20-digit amount; `amount` as raw text. */
  sends: Array<{ sequenceId: string; body: Json }>;
  walletTransaction: Json;
  isEnabled: Json;
}

async function capture(): Promise<Captured> {
  const sim = await startSimulator({ port: 0, settings: { profile: 'spec', narrowResults: false } });
  try {
    const basic = `Basic ${Buffer.from(`${sim.clientId}:${sim.clientSecret}`).toString('base64')}`;
    const text = async (path: string, init: RequestInit): Promise<string> => {
      const response = await fetch(`${sim.url}${path}`, init);
      if (!response.ok) throw new Error(`simulator ${path}: HTTP ${response.status}`);
      return response.text();
    };
    const token = JSON.parse(
      await text('/oauth/token', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: sim.clientId, client_secret: sim.clientSecret }),
      }),
    ) as { access_token: string };
    const bearer = `Bearer ${token.access_token}`;
    /** The 2.4 answer with its `amount` kept as its own digits. */
    const send = async (sequenceId: string): Promise<Json> => {
      const body = await text('/api/wallet/310/sendTransaction', {
        method: 'POST',
        headers: { authorization: bearer, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(sampleSend(sequenceId)),
      });
      return JSON.parse(body, (key, value, context?: { source?: string }) =>
        key === 'amount' && typeof value === 'number' ? raw(context!.source!) : value,
      ) as Json;
    };
    const getTransfer = async (sequenceId: string) =>
      JSON.parse(
        await text('/api/wallet/get-transfer', {
          method: 'POST',
          headers: { authorization: basic, 'content-type': 'application/json' },
          body: JSON.stringify({ wallet: { coin: 'eth', walletId: 310 }, sequenceId }),
        }),
      ) as Json[];

    const [first, ours, third, exact] = [newSequenceId(), newSequenceId(), newSequenceId(), newSequenceId()];
    await send(first);
    const ourSend = await send(ours);
    await send(third);
    sim.updateSettings({ fixedAmount: FIXED_AMOUNT });
    const exactSend = await send(exact);
    sim.updateSettings({ fixedAmount: null });

    const list = await getTransfer(ours);
    sim.updateSettings({ includeSequenceIdInTransactions: true });
    const listWithSequenceIds = await getTransfer(ours);
    const ourRecord = listWithSequenceIds.find((tx) => (tx as { sequenceId: string }).sequenceId === ours) as { id: string; txid: string };
    const walletTransaction = JSON.parse(
      await text(`/api/wallet/310/txid/${ourRecord.txid}`, { headers: { authorization: bearer, accept: 'application/json' } }),
    ) as Json;
    const isEnabled = JSON.parse(await text('/api/travel-rule/is-enabled', { method: 'POST', headers: { authorization: basic } })) as Json;

    const { amount, destinationAddress } = ourSend as Record<string, string>;
    expect(list).toHaveLength(4);
    return {
      sequenceId: ours,
      match: { destinationAddress: destinationAddress!, amount: amount!.slice(RAW.length) },
      ourId: ourRecord.id,
      ourTxid: ourRecord.txid,
      list,
      listWithSequenceIds,
      sends: [
        { sequenceId: ours, body: ourSend },
        { sequenceId: exact, body: exactSend },
      ],
      walletTransaction,
      isEnabled,
    };
  } finally {
    await sim.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Which fields decide money (schemas.ts), as path patterns; '*' is any array index.

/** 2.1, per record of a list. */
const TRANSACTION_USED: Path[] = [['id'], ['type'], ['txid'], ['sequenceId'], ['outputs', '*', 'address'], ['outputs', '*', 'amount']];
const LIST_USED: Path[] = TRANSACTION_USED.map((path) => ['*', ...path]);
/** 2.4. */
const SEND_USED: Path[] = [['id'], ['sequenceId'], ['destinationAddress'], ['amount']];
/** 2.5 under its `result` envelope. */
const WALLET_TX_USED: Path[] = [['result', 'txid']];
/** 2.6 under `{ success, data }`: the envelope's `success` decides whether it is an answer at all. */
const IS_ENABLED_USED: Path[] = [['success'], ['data', 'outgoingTxn'], ['data', 'mandatory'], ['data', 'blockTxn']];

function matches(pattern: Path, path: Path, length = pattern.length): boolean {
  for (let i = 0; i < length; i++) if (pattern[i] !== '*' && pattern[i] !== path[i]) return false;
  return true;
}

/** A path on the way to a used field, or the field itself: mutating it changes what decides money. */
function touchesUsed(path: Path, used: readonly Path[]): boolean {
  return used.some((pattern) => path.length <= pattern.length && matches(pattern, path, path.length));
}

function allPaths(value: Json, prefix: Path = []): Path[] {
  const out: Path[] = [];
  if (Array.isArray(value)) value.forEach((item, i) => out.push([...prefix, i], ...allPaths(item, [...prefix, i])));
  else if (value && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) out.push([...prefix, key], ...allPaths(item, [...prefix, key]));
  return out;
}

/** Every object in the answer, the root and those on the way to used fields included. */
function objectPaths(value: Json): Path[] {
  const roots: Path[] = value && typeof value === 'object' && !Array.isArray(value) ? [[]] : [];
  return [
    ...roots,
    ...allPaths(value).filter((path) => {
      const node = at(value, path);
      return node !== null && typeof node === 'object' && !Array.isArray(node);
    }),
  ];
}

function at(value: Json, path: Path): Json {
  let node: Json = value;
  for (const key of path) node = (node as Record<string | number, Json>)[key as string]!;
  return node;
}

/** `value` with the node at `path` changed in place on a copy. */
function edit(value: Json, path: Path, change: (parent: Json[] | Record<string, Json>, key: string | number) => void): Json {
  const copy = structuredClone(value);
  change(at(copy, path.slice(0, -1)) as Json[] | Record<string, Json>, path.at(-1)!);
  return copy;
}

function setAt(value: Json, path: Path, next: Json | undefined): Json {
  return edit(value, path, (parent, key) => {
    if (next !== undefined) (parent as Record<string | number, Json>)[key] = next;
    else if (Array.isArray(parent)) parent.splice(key as number, 1);
    else delete parent[key as string];
  });
}

// ---------------------------------------------------------------------------------------------------
// (a) Mutations of what the worker does not decide on

/** Undocumented key names, generic ones a provider might add included (none is documented anywhere). */
const UNKNOWN_KEYS = [
  'meta',
  'createdBy',
  '_links',
  'extra',
  'labels',
  'revision',
  'x_trace',
  'constructor',
  'items',
  'links',
  'data',
  'result',
];

type LooseOp =
  | { kind: 'null' | 'delete'; at: number }
  | { kind: 'set'; at: number; value: Json }
  | { kind: 'add'; at: number; key: string; value: Json };

const anyValue = fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>;
/** A value of each JSON type, so "change type" is drawn evenly whatever the field held. */
const retyped: fc.Arbitrary<Json> = fc.oneof(
  fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })),
  fc.string({ maxLength: 12 }),
  fc.array(anyValue, { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), anyValue, { maxKeys: 3 }),
  fc.boolean(),
);

const looseOpArb: fc.Arbitrary<LooseOp> = fc.oneof(
  fc.record({ kind: fc.constantFrom('null' as const, 'delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: retyped }),
  fc.record({
    kind: fc.constant('add' as const),
    at: fc.nat(),
    key: fc.oneof(
      fc.constantFrom(...UNKNOWN_KEYS),
      fc.string({ maxLength: 8 }).map((s) => `x_${s}`),
    ),
    value: anyValue,
  }),
);
const looseOpsArb = fc.array(looseOpArb, { minLength: 1, maxLength: 6 });

/** Applies each op to a field (or object, for `add`) the worker does not decide on; returns the answer and what was done. */
function applyLoose(value: Json, ops: readonly LooseOp[], used: readonly Path[]): { value: Json; done: string[] } {
  const done: string[] = [];
  for (const op of ops) {
    if (op.kind === 'add') {
      const objects = objectPaths(value).filter((path) => !Object.hasOwn(at(value, path) as object, op.key));
      if (objects.length === 0) continue;
      const path = objects[op.at % objects.length]!;
      // A key is unknown only where no used field has that name (e.g. `sequenceId` is read on a record).
      if (used.some((pattern) => pattern.length === path.length + 1 && matches(pattern, path, path.length) && pattern.at(-1) === op.key))
        continue;
      value = setAt(value, [...path, op.key], op.value);
      done.push(`add ${[...path, op.key].join('.')}`);
      continue;
    }
    const candidates = allPaths(value).filter((path) => !touchesUsed(path, used));
    if (candidates.length === 0) continue;
    const path = candidates[op.at % candidates.length]!;
    value = setAt(value, path, op.kind === 'set' ? op.value : op.kind === 'null' ? null : undefined);
    done.push(`${op.kind} ${path.join('.')}`);
  }
  return { value, done };
}

// ---------------------------------------------------------------------------------------------------
// (b) Broken values of fields the worker decides on (none of them readable as a valid value)

const BAD_RECORD_ID: Json[] = [-1, 1.5, raw('9007199254740993'), raw('1e400'), true, null, {}, [], 'abc', '', '12a', '-5', '1.0', ' 1'];
const BAD_TEXT: Json[] = [12345, 0, 1.5, true, false, {}, { value: 'x' }, [], ['send']];
const BAD_DECIMAL: Json[] = [
  0.01234567,
  1,
  0,
  null,
  true,
  {},
  [],
  'abc',
  '-1',
  '1e5',
  '1,5',
  '',
  ' 1',
  '0x10',
  '1.',
  '.5',
  'NaN',
  'Infinity',
];
const BAD_ADDRESS: Json[] = [null, 42, true, {}, [], ['0xabc']];

type BadOp = { field: Path; value: Json | undefined };

/** A broken value for a field of a 2.1 record ('absent' where the field is required). */
function badTransactionOps(record: Record<string, Json>): fc.Arbitrary<BadOp> {
  const outputs = record.outputs as Json[];
  const output = fc.nat({ max: outputs.length - 1 });
  const choices: Array<fc.Arbitrary<BadOp>> = [
    fc.constantFrom(...BAD_RECORD_ID, undefined).map((value) => ({ field: ['id'], value })),
    fc.constantFrom(...BAD_TEXT, null, undefined).map((value) => ({ field: ['type'], value })),
    // null, absent and "" are "no txid yet": valid, so not broken.
    fc.constantFrom(...BAD_TEXT).map((value) => ({ field: ['txid'], value })),
    fc.constantFrom<Json>('x', 1, {}, true).map((value) => ({ field: ['outputs'], value })),
    fc.tuple(output, fc.constantFrom<Json>(null, 'x', 1, [], true)).map(([i, value]) => ({ field: ['outputs', i], value })),
    fc.tuple(output, fc.constantFrom(...BAD_ADDRESS, undefined)).map(([i, value]) => ({ field: ['outputs', i, 'address'], value })),
    fc.tuple(output, fc.constantFrom(...BAD_DECIMAL, undefined)).map(([i, value]) => ({ field: ['outputs', i, 'amount'], value })),
  ];
  if (record.sequenceId !== undefined) choices.push(fc.constantFrom(...BAD_TEXT).map((value) => ({ field: ['sequenceId'], value })));
  return fc.oneof(...choices);
}

// ---------------------------------------------------------------------------------------------------
// What the worker reads, for comparison

function decisionView(list: readonly ListedTransfer[]) {
  return list.map((tx) => ({
    id: tx.id,
    type: tx.type,
    txid: tx.txid,
    sequenceId: tx.sequenceId,
    outputs: tx.outputs.map((out) => ({ address: out.address, amount: out.amount })),
  }));
}

function describeMatch(result: TransferFinding): string {
  return result.kind === 'found' ? `found ${result.transfer.id}` : result.kind === 'ambiguous' ? `ambiguous ${result.candidates}` : 'none';
}

/** How each job of the worker looks for the transfer in a get-transfer answer. */
function matchings(c: Captured): Array<{ name: string; run: (list: readonly Transaction[]) => TransferFinding }> {
  const track: KnownTransfer = { sequenceId: c.sequenceId, ...c.match };
  return [
    // submit, resolving a send with unknown outcome: nothing known but the sequenceId
    { name: 'resolve (sequenceId only)', run: (list) => findTransfer(list, { sequenceId: c.sequenceId }) },
    // track, first polls: destination and amount of the submitted record
    { name: 'track (destination and amount)', run: (list) => findTransfer(list, track) },
    // track, once the record id was seen
    { name: 'track (record id)', run: (list) => findTransfer(list, { ...track, transactionId: c.ourId }) },
    // reconcile: the records with the broadcast txid
    {
      name: 'reconcile (txid)',
      run: (list) =>
        findTransfer(
          list.filter((tx) => txidEquals(tx.txid, c.ourTxid)),
          track,
        ),
    },
  ];
}

function sendView(record: SubmittedTransfer) {
  return {
    id: record.id,
    sequenceId: record.sequenceId,
    destinationAddress: record.destinationAddress,
    amount: record.amount,
    exact: record[EXACT_AMOUNT],
  };
}

// ---------------------------------------------------------------------------------------------------

let captured: Captured;
let server: ScriptedServer;
let body = '';
let skipped: SkippedRecord[] = [];
let client: CustodyClient;

beforeAll(async () => {
  captured = await capture();
  server = await startScriptedServer(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body }));
  client = new CustodyClient({
    sdkUrl: server.url,
    baseUrl: server.url,
    clientId: 'mutation-client',
    clientSecret: 'mutation-secret',
    accessToken: 'mutation-token',
    timeoutMs: 5_000,
    connectTimeoutMs: 5_000,
    connections: 2,
    onSkippedRecords: (_endpoint, records) => skipped.push(...records),
  });
});
afterAll(async () => {
  await client?.close();
  await server?.close();
});

/** Serves `answer` and reads it with get-transfer by our sequenceId. */
async function readList(answer: Json): Promise<{ list: Transaction[]; skipped: SkippedRecord[] }> {
  body = serialize(answer);
  skipped = [];
  const list = await client.getTransfersBySequenceId(WALLET, captured.sequenceId);
  return { list, skipped };
}

async function refusal(call: Promise<unknown>): Promise<CustodyError> {
  try {
    const value = await call;
    throw new Error(`expected a refusal, read ${JSON.stringify(value)}`);
  } catch (error) {
    if (!(error instanceof CustodyError)) throw error;
    return error;
  }
}

/** A list of captured records, ours always among them, in their order (the others a subset). */
const listArb = fc.record({
  withSequenceIds: fc.boolean(),
  others: fc.subarray([0, 1, 2]),
});

function pickList(choice: { withSequenceIds: boolean; others: number[] }): { records: Json[]; ours: number } {
  const source = choice.withSequenceIds ? captured.listWithSequenceIds : captured.list;
  const ourIndex = source.findIndex((tx) => (tx as { id: string }).id === captured.ourId);
  const otherIndexes = source.map((_, i) => i).filter((i) => i !== ourIndex);
  const keep = new Set([ourIndex, ...choice.others.map((n) => otherIndexes[n]!)]);
  const records = source.filter((_, i) => keep.has(i));
  return { records, ours: records.findIndex((tx) => (tx as { id: string }).id === captured.ourId) };
}

describe('answers varied where the worker decides nothing: the same money decisions', () => {
  it(`get-transfer: the same records (ids, types, txids, sequenceIds, outputs) are read, none skipped, and every job matches the same transfer (${RUNS} runs)`, async () => {
    const outcomes = new Set<string>();
    await fc.assert(
      fc.asyncProperty(listArb, looseOpsArb, async (choice, ops) => {
        const { records } = pickList(choice);
        const before = await readList(records);
        const { value, done } = applyLoose(records, ops, LIST_USED);
        const after = await readList(value);
        expect(after.skipped, done.join('; ')).toEqual([]);
        expect(decisionView(after.list), done.join('; ')).toEqual(decisionView(before.list));
        for (const { name, run } of matchings(captured)) {
          const outcome = describeMatch(run(after.list));
          expect(outcome, `${name} after ${done.join('; ')}`).toBe(describeMatch(run(before.list)));
          outcomes.add(`${name}: ${outcome}`);
        }
      }),
      { numRuns: RUNS },
    );
    // Not vacuous: the transfer was found, and some answers were ambiguous to a job that knows little.
    expect([...outcomes]).toContain(`track (destination and amount): found ${captured.ourId}`);
    expect([...outcomes].some((o) => o.startsWith('resolve (sequenceId only): ambiguous'))).toBe(true);
  });

  it(`sendTransaction: the same id, sequenceId, destination and exact amount are read, and they match the same transaction (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: captured.sends.length - 1 }), looseOpsArb, async (which, ops) => {
        const { sequenceId, body: valid } = captured.sends[which]!;
        body = serialize(valid);
        const before = await client.sendTransaction(310, sampleSend(sequenceId));
        const { value, done } = applyLoose(valid, ops, SEND_USED);
        body = serialize(value);
        const after = await client.sendTransaction(310, sampleSend(sequenceId)).catch((error: unknown) => {
          throw new Error(`refused after ${done.join('; ')}: ${String(error)}`);
        });
        expect(sendView(after), done.join('; ')).toEqual(sendView(before));
        // The match the tracker builds from the record finds the same transaction.
        const { list } = await readList(captured.list);
        const match = (record: SubmittedTransfer) =>
          describeMatch(findTransfer(list, { sequenceId, destinationAddress: record.destinationAddress, amount: record[EXACT_AMOUNT] }));
        expect(match(after), done.join('; ')).toBe(match(before));
        if (sequenceId === captured.sequenceId) expect(match(after)).toBe(`found ${captured.ourId}`);
      }),
      { numRuns: RUNS },
    );
  });

  it(`is-enabled: the same gate fields are read and the travel rule is decided the same (${RUNS} runs)`, async () => {
    const gateArb = fc.record({ outgoingTxn: fc.constantFrom(0, 1, 2), mandatory: fc.boolean(), blockTxn: fc.boolean() });
    const decisions = new Set<boolean>();
    await fc.assert(
      fc.asyncProperty(gateArb, looseOpsArb, async (gate, ops) => {
        const valid = structuredClone(captured.isEnabled) as { data: Record<string, Json> };
        Object.assign(valid.data, gate);
        const { value, done } = applyLoose(valid as unknown as Json, ops, IS_ENABLED_USED);
        body = serialize(value);
        const setting = await client.getTravelRuleSetting().catch((error: unknown) => {
          throw new Error(`refused after ${done.join('; ')}: ${String(error)}`);
        });
        expect({ outgoingTxn: setting.outgoingTxn, mandatory: setting.mandatory, blockTxn: setting.blockTxn }, done.join('; ')).toEqual(
          gate,
        );
        expect(travelRuleApplies(setting)).toBe(gate.outgoingTxn === 1 && gate.mandatory);
        decisions.add(travelRuleApplies(setting));
      }),
      { numRuns: RUNS },
    );
    expect(decisions).toEqual(new Set([true, false]));
  });

  it(`wallet transaction: the same txid is read (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(looseOpsArb, async (ops) => {
        const { value, done } = applyLoose(captured.walletTransaction, ops, WALLET_TX_USED);
        body = serialize(value);
        const tx = await client.getWalletTransaction(310, captured.ourTxid).catch((error: unknown) => {
          throw new Error(`refused after ${done.join('; ')}: ${String(error)}`);
        });
        expect(tx.txid, done.join('; ')).toBe(captured.ourTxid);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('answers with a broken field the worker decides on: refused or skipped, never read as another transfer', () => {
  it(`get-transfer: the broken record is skipped and reported (ours when it carried the sequenceId looked for), the others read as before, and no job ever takes another transfer's record for ours (${RUNS} runs)`, async () => {
    const caseArb = listArb.chain((choice) => {
      const { records } = pickList(choice);
      return fc
        .record({
          choice: fc.constant(choice),
          target: fc.nat({ max: records.length - 1 }),
          noise: fc.array(looseOpArb, { maxLength: 3 }),
        })
        .chain(({ choice, target, noise }) =>
          badTransactionOps(records[target] as Record<string, Json>).map((bad) => ({ choice, target, noise, bad })),
        );
    });
    const tally = { ours: 0, others: 0, flaggedOurs: 0 };
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ choice, target, noise, bad }) => {
        const { records, ours } = pickList(choice);
        // Unused fields varied as well: the broken field is then the only decision field that differs.
        const { value: noisy } = applyLoose(records, noise, LIST_USED);
        const clean = await readList(noisy);
        fc.pre(clean.skipped.length === 0); // noise that alone loses a record is property (a)'s finding
        const broken = setAt(noisy, [target, ...bad.field], bad.value);
        const what = `record ${target}${target === ours ? ' (ours)' : ''}: ${bad.field.join('.')} = ${bad.value === undefined ? 'absent' : serialize(bad.value)}`;
        const after = await readList(broken);

        const carried = (records[target] as { sequenceId?: string }).sequenceId === captured.sequenceId && bad.field[0] !== 'sequenceId';
        expect(after.skipped, what).toHaveLength(1);
        expect(after.skipped[0], what).toMatchObject({ index: target, ours: carried });
        expect(after.skipped[0]!.paths.length, what).toBeGreaterThan(0);
        expect(decisionView(after.list), what).toEqual(decisionView(clean.list.filter((_, i) => i !== target)));

        const intended = clean.list[ours]!;
        for (const { name, run } of matchings(captured)) {
          const result = run(after.list);
          if (result.kind !== 'found') continue;
          expect(result.transfer.id, `${name}: ${what}; answer read as ${JSON.stringify(decisionView(after.list))}`).toBe(intended.id);
          expect(decisionView([result.transfer]), `${name}: ${what}`).toEqual(decisionView([intended]));
        }
        tally[target === ours ? 'ours' : 'others'] += 1;
        if (carried) tally.flaggedOurs += 1;
      }),
      { numRuns: RUNS },
    );
    // Not vacuous: ours and others were broken, and a skipped record was flagged as ours.
    expect(tally.ours, JSON.stringify(tally)).toBeGreaterThan(0);
    expect(tally.others, JSON.stringify(tally)).toBeGreaterThan(0);
    expect(tally.flaggedOurs, JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it(`sendTransaction: refused with CUSTODY_BAD_RESPONSE (${RUNS} runs)`, async () => {
    const badArb = fc.oneof(
      fc.constantFrom(...BAD_RECORD_ID, undefined).map((value) => ({ field: 'id', value })),
      fc
        .constantFrom<Json | undefined>(42, null, '', {}, [], true, 'another-sequence-id', undefined)
        .map((value) => ({ field: 'sequenceId', value })),
      fc.constantFrom(...BAD_ADDRESS, undefined).map((value) => ({ field: 'destinationAddress', value })),
      // A JSON number or decimal text is a valid 2.4 amount: only what is neither is broken.
      fc
        .constantFrom<Json | undefined>(null, true, {}, [], 'abc', '-1', -1, raw('-0.5'), '1e5', '1,5', '', undefined)
        .map((value) => ({ field: 'amount', value })),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: captured.sends.length - 1 }),
        badArb,
        fc.array(looseOpArb, { maxLength: 3 }),
        async (which, bad, noise) => {
          const { sequenceId, body: valid } = captured.sends[which]!;
          const { value: noisy } = applyLoose(valid, noise, SEND_USED);
          body = serialize(setAt(noisy, [bad.field], bad.value));
          const error = await refusal(client.sendTransaction(310, sampleSend(sequenceId)));
          expect(error.code, `${bad.field} = ${String(bad.value)}: ${error.message}`).toBe(CustodyErrorCode.BAD_RESPONSE);
          // The send went out and was answered: the transfer may exist, so it is looked up, never resent blindly.
          expect(error.maybeProcessed).toBe(true);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it(`is-enabled: refused with CUSTODY_BAD_RESPONSE, never a gate decision (${RUNS} runs)`, async () => {
    const badArb = fc.oneof(
      fc
        .constantFrom<Json | undefined>('1', '0', 1.5, null, true, {}, [], raw('1e400'), undefined)
        .map((value) => ({ field: 'outgoingTxn', value })),
      fc.constantFrom<Json | undefined>('true', 'false', 1, 0, null, {}, [], undefined).map((value) => ({ field: 'mandatory', value })),
      fc.constantFrom<Json | undefined>('true', 'false', 1, 0, null, {}, [], undefined).map((value) => ({ field: 'blockTxn', value })),
    );
    await fc.assert(
      fc.asyncProperty(badArb, fc.array(looseOpArb, { maxLength: 3 }), async (bad, noise) => {
        const valid = structuredClone(captured.isEnabled) as { data: Record<string, Json> };
        Object.assign(valid.data, { outgoingTxn: 1, mandatory: true, blockTxn: true });
        const { value: noisy } = applyLoose(valid as unknown as Json, noise, IS_ENABLED_USED);
        body = serialize(setAt(noisy, ['data', bad.field], bad.value));
        const error = await refusal(client.getTravelRuleSetting());
        expect(error.code, `${bad.field} = ${String(bad.value)}: ${error.message}`).toBe(CustodyErrorCode.BAD_RESPONSE);
      }),
      { numRuns: RUNS },
    );
  });

  it(`wallet transaction: refused with CUSTODY_BAD_RESPONSE (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...BAD_TEXT, null, undefined), fc.array(looseOpArb, { maxLength: 3 }), async (bad, noise) => {
        const { value: noisy } = applyLoose(captured.walletTransaction, noise, WALLET_TX_USED);
        body = serialize(setAt(noisy, ['result', 'txid'], bad));
        const error = await refusal(client.getWalletTransaction(310, captured.ourTxid));
        expect(error.code, `txid = ${String(bad)}: ${error.message}`).toBe(CustodyErrorCode.BAD_RESPONSE);
      }),
      { numRuns: RUNS },
    );
  });
});
