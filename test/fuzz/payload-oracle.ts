/**
 * An independent reading of docs/contract.md section 3 (the `submit-transaction` job data), written with plain
 * loops instead of the worker's zod schema, and fast-check arbitraries of valid and broken payloads.
 *
 * Readings where the contract leaves a choice (kept in line with the README):
 * - a walletId number must be a safe integer (a larger JSON number is not exactly the integer sent);
 *   a walletId string is digits only (leading zeros allowed) whose value is a positive safe integer,
 *   or BitGo's wallet id: exactly 32 lowercase hex characters (kept as the string). A string of digits
 *   only is always read by the first rule, even 32 long (so 32 digits above the safe range are refused);
 * - sizes: hex and base64 limits count the whole field (a `0x` prefix included; ASCII, so characters
 *   are bytes); `reference` counts Unicode code points; metadata counts UTF-8 bytes of its JSON text;
 * - `0x` is the only prefix (`0X` is not); base64 is the standard alphabet with `=` padding to a
 *   multiple of 4;
 * - `null` for an optional field (travelRule, metadata) means absent;
 * - a field is what the object itself holds (JSON has no inheritance).
 */
import fc from 'fast-check';

export const MIB = 1024 * 1024;
export const MAX_HEX = MIB;
export const MAX_BASE64 = Math.floor(1.4 * MIB);
export const MAX_METADATA_BYTES = 4096;

const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';
const HEX_DIGITS = `${DIGITS}abcdefABCDEF`;
const LOWER_HEX_DIGITS = `${DIGITS}abcdef`;
/** The length of BitGo's wallet id. */
export const BITGO_WALLET_ID_LENGTH = 32;
const COIN_CHARS = `${LOWER}${DIGITS}._-`;
const SEQUENCE_CHARS = `${LOWER}${LOWER.toUpperCase()}${DIGITS}_-`;
const BASE64_CHARS = `${LOWER.toUpperCase()}${LOWER}${DIGITS}+/`;

function every(text: string, allowed: string): boolean {
  for (const char of text) if (!allowed.includes(char)) return false;
  return true;
}

function isObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function own(object: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

function validWalletId(value: unknown): boolean {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0;
  if (typeof value !== 'string' || value.length === 0) return false;
  if (every(value, DIGITS)) {
    const n = Number(value);
    return Number.isSafeInteger(n) && n > 0;
  }
  return isBitgoWalletId(value);
}

/** BitGo's wallet id, the walletId form kept as text: 32 lowercase hex characters, not digits only. */
export function isBitgoWalletId(value: unknown): value is string {
  return typeof value === 'string' && value.length === BITGO_WALLET_ID_LENGTH && every(value, LOWER_HEX_DIGITS) && !every(value, DIGITS);
}

function validCoin(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= 32 && every(value, COIN_CHARS);
}

function validHex(value: unknown): boolean {
  if (typeof value !== 'string' || value.length > MAX_HEX) return false;
  const digits = value.startsWith('0x') ? value.slice(2) : value;
  return digits.length >= 1 && every(digits, HEX_DIGITS);
}

function validBase64(value: unknown): boolean {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_BASE64 || value.length % 4 !== 0) return false;
  let end = value.length;
  while (end > 0 && value[end - 1] === '=') end--;
  const padding = value.length - end;
  return padding <= 2 && end > 0 && every(value.slice(0, end), BASE64_CHARS);
}

function validSequenceId(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= 128 && every(value, SEQUENCE_CHARS);
}

function validReference(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  const codePoints = [...value].length;
  return codePoints >= 1 && codePoints <= 256;
}

function metadataBytes(value: unknown): number | undefined {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? undefined : Buffer.byteLength(text, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * The paths of every rule the payload breaks (empty: the payload is valid). `(root)` when the data is
 * not an object at all.
 */
export function payloadProblems(data: unknown): string[] {
  if (!isObject(data)) return ['(root)'];
  const problems: string[] = [];
  if (!validWalletId(own(data, 'walletId'))) problems.push('walletId');
  if (!validCoin(own(data, 'coin'))) problems.push('coin');
  if (!validHex(own(data, 'txHex'))) problems.push('txHex');
  const halfSigned = own(data, 'halfSigned');
  if (!isObject(halfSigned)) {
    problems.push('halfSigned');
  } else {
    if (!validBase64(own(halfSigned, 'txBase64'))) problems.push('halfSigned.txBase64');
    if (!validHex(own(halfSigned, 'txHex'))) problems.push('halfSigned.txHex');
    if (!validSequenceId(own(halfSigned, 'sequenceId'))) problems.push('halfSigned.sequenceId');
  }
  const travelRule = own(data, 'travelRule');
  if (travelRule !== undefined && travelRule !== null) {
    if (!isObject(travelRule)) problems.push('travelRule');
    else if (!validReference(own(travelRule, 'reference'))) problems.push('travelRule.reference');
  }
  const metadata = own(data, 'metadata');
  if (metadata !== undefined && metadata !== null) {
    const bytes = metadataBytes(metadata);
    if (!isObject(metadata) || bytes === undefined || bytes > MAX_METADATA_BYTES) problems.push('metadata');
  }
  return problems;
}

export function isValidSequenceId(value: unknown): value is string {
  return validSequenceId(value);
}

/** Defines an own property even for keys such as `__proto__`, which plain assignment would not. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A deep copy through JSON (own `__proto__` keys stay own data properties). */
export function jsonCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

// ---------------------------------------------------------------------------------------------------
// Arbitraries

const charsOf = (chars: string, minLength: number, maxLength: number) =>
  fc.string({ unit: fc.constantFrom(...chars), minLength, maxLength });

const validHexArb = fc.tuple(fc.boolean(), charsOf(HEX_DIGITS, 1, 120)).map(([prefix, digits]) => (prefix ? `0x${digits}` : digits));
const validBase64Arb = fc.uint8Array({ minLength: 1, maxLength: 90 }).map((bytes) => Buffer.from(bytes).toString('base64'));
const validSequenceIdArb = charsOf(SEQUENCE_CHARS, 1, 128);
const validWalletIdArb = fc.oneof(
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }).map(String),
  fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 99_999 })).map(([zeros, n]) => `${'0'.repeat(zeros)}${n}`),
  // BitGo's wallet id: 32 lowercase hex, at least one a-f (32 digits are the integer form).
  fc
    .tuple(charsOf(LOWER_HEX_DIGITS, BITGO_WALLET_ID_LENGTH - 1, BITGO_WALLET_ID_LENGTH - 1), fc.constantFrom(...'abcdef'), fc.nat(31))
    .map(([rest, letter, at]) => `${rest.slice(0, at)}${letter}${rest.slice(at)}`),
);
const smallJson = fc.jsonValue({ maxDepth: 2 });
const validMetadataArb = fc.dictionary(fc.string({ maxLength: 12 }), smallJson, { maxKeys: 5 });

/** A payload that satisfies section 3 (checked against the oracle). */
export const validPayloadArb = fc
  .record(
    {
      walletId: validWalletIdArb,
      coin: charsOf(COIN_CHARS, 1, 32),
      txHex: validHexArb,
      halfSigned: fc.record({ txBase64: validBase64Arb, txHex: validHexArb, sequenceId: validSequenceIdArb }),
      travelRule: fc.oneof(fc.constant(null), fc.record({ reference: fc.string({ minLength: 1, maxLength: 256 }).filter(validReference) })),
      metadata: fc.oneof(fc.constant(null), validMetadataArb),
      extra: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: ['walletId', 'coin', 'txHex', 'halfSigned'] },
  )
  .filter((payload) => payloadProblems(payload).length === 0);

const HUGE_HEX = 'a'.repeat(MAX_HEX);
const HUGE_BASE64 = 'A'.repeat(MAX_BASE64 - (MAX_BASE64 % 4));

/** Strings at and just past each limit, and the traps that look valid. */
const trickyStrings = fc.constantFrom(
  '',
  ' ',
  '0',
  '310',
  ' 310',
  '310 ',
  '+310',
  '-310',
  '310.0',
  '3e2',
  '0x1f',
  '0x',
  '0X12',
  '0x0x12',
  'g1',
  '12 34',
  'ab\n',
  '\u0000',
  '١٢٣',
  '０１２',
  'ETH',
  'ｅｔｈ',
  'еth',
  'eth\u200b',
  '😀',
  '\ud800',
  'AAA',
  'AA=',
  'A===',
  'AA==',
  'AAA=',
  'AAAA====',
  '=AAA',
  'AA-_',
  'AAAA\nAAAA',
  '00000000000000000000310',
  '9007199254740991',
  '9007199254740992',
  '0000000000000000',
  // walletId: BitGo's 32 lowercase hex, and the texts next to it.
  '0123456789abcdef0123456789abcdef',
  '0123456789ABCDEF0123456789ABCDEF',
  '0123456789abcdef0123456789abcde',
  '0123456789abcdef0123456789abcdef0',
  '0x0123456789abcdef0123456789abcd',
  ' 0123456789abcdef0123456789abcde',
  'f'.repeat(32),
  'g'.repeat(32),
  '1'.repeat(32),
  `${'0'.repeat(31)}7`,
  `${'0'.repeat(16)}9007199254740991`,
  'a'.repeat(32),
  'a'.repeat(33),
  'A'.repeat(128),
  'A'.repeat(129),
  'x'.repeat(256),
  'x'.repeat(257),
  '😀'.repeat(256),
  '😀'.repeat(257),
  '__proto__',
  'constructor',
  HUGE_HEX,
  `${HUGE_HEX}a`,
  `0x${HUGE_HEX.slice(2)}`,
  `0x${HUGE_HEX}`,
  HUGE_BASE64,
  `${HUGE_BASE64}AAAA`,
);

const trickyNumbers = fc.constantFrom(
  0,
  -0,
  -1,
  1,
  1.5,
  -310,
  2 ** 53 - 1,
  2 ** 53,
  1e21,
  Number.MAX_VALUE,
  Number.MIN_VALUE,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
);

/** Metadata at the 4 KiB boundary, by bytes: ASCII and multi-byte text of the same length in characters. */
function metadataOfBytes(bytes: number, char = 'x'): Record<string, unknown> {
  const overhead = Buffer.byteLength(JSON.stringify({ k: '' }));
  const unit = Buffer.byteLength(char);
  return { k: char.repeat(Math.floor((bytes - overhead) / unit)) };
}

const trickyObjects = fc.constantFrom<unknown>(
  {},
  [],
  [1, 2],
  { reference: '' },
  { reference: 'tr-1' },
  { reference: 5 },
  { reference: ['tr-1'] },
  JSON.parse('{"__proto__": {"polluted": "yes", "reference": "tr-1"}}'),
  JSON.parse('{"constructor": {"prototype": {"polluted": "yes"}}}'),
  metadataOfBytes(MAX_METADATA_BYTES),
  metadataOfBytes(MAX_METADATA_BYTES + 1),
  metadataOfBytes(MAX_METADATA_BYTES, 'é'),
  metadataOfBytes(MAX_METADATA_BYTES + 2, 'é'),
  { txBase64: 'AA==', txHex: '00', sequenceId: 'a' },
);

/** Any value a field might be replaced with. */
export const fieldValueArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: trickyStrings },
  { weight: 2, arbitrary: trickyNumbers },
  { weight: 2, arbitrary: trickyObjects },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.double() },
  { weight: 1, arbitrary: fc.integer().map(String) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, undefined) },
  { weight: 1, arbitrary: validHexArb },
  { weight: 1, arbitrary: validBase64Arb },
  { weight: 1, arbitrary: validSequenceIdArb },
);

const PATHS = [
  'walletId',
  'coin',
  'txHex',
  'halfSigned',
  'halfSigned.txBase64',
  'halfSigned.txHex',
  'halfSigned.sequenceId',
  'travelRule',
  'travelRule.reference',
  'metadata',
  '__proto__',
  'constructor',
  'prototype',
  'halfSigned.__proto__',
  'metadata.__proto__',
  'metadata.constructor',
] as const;

type Mutation = { path: string; op: 'delete' } | { path: string; op: 'set'; value: unknown };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ path: fc.constantFrom(...PATHS), op: fc.constant('delete' as const) }) },
  { weight: 5, arbitrary: fc.record({ path: fc.constantFrom(...PATHS), op: fc.constant('set' as const), value: fieldValueArb }) },
);

function applyMutation(payload: Record<string, unknown>, mutation: Mutation): void {
  const parts = mutation.path.split('.');
  let target: unknown = payload;
  for (const part of parts.slice(0, -1)) {
    let next = isObject(target) ? own(target, part) : undefined;
    if (!isObject(next)) {
      // Create the parent so the mutation has somewhere to land (e.g. travelRule.reference on no travelRule).
      next = {};
      if (isObject(target)) setOwn(target, part, next);
    }
    target = next;
  }
  if (!isObject(target)) return;
  const key = parts.at(-1)!;
  if (mutation.op === 'delete') delete target[key];
  else setOwn(target, key, mutation.value);
}

/** A valid payload (generated, or a copy of `samples`) with one to four fields broken, removed or retyped. */
export function mutatedPayloadArb(samples: Array<Record<string, unknown>>): fc.Arbitrary<unknown> {
  const bases = samples.length > 0 ? fc.oneof(validPayloadArb, fc.constantFrom(...samples)) : validPayloadArb;
  return fc.tuple(bases, fc.array(mutationArb, { minLength: 1, maxLength: 4 })).map(([base, mutations]) => {
    const payload = jsonCopy(base) as Record<string, unknown>;
    for (const mutation of mutations) applyMutation(payload, mutation);
    return payload;
  });
}

/** Anything at all where a payload should be: random JSON, or a random value at the root. */
export const randomPayloadArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.dictionary(fc.constantFrom('walletId', 'coin', 'txHex', 'halfSigned', 'travelRule', 'metadata', '__proto__', 'x'), fieldValueArb),
  fc.anything({ maxDepth: 2 }),
);
