/**
 * Types and defaults of the custody simulator, and the one validating deep merge used by both the
 * programmatic API and `PATCH /_sim/settings`, so a bad patch is refused the same way everywhere.
 */

export type SimEndpoint = 'token' | 'getTransfer' | 'sendTransaction' | 'getWalletTransaction' | 'isEnabled';

export const SIM_ENDPOINTS: readonly SimEndpoint[] = ['token', 'getTransfer', 'sendTransaction', 'getWalletTransaction', 'isEnabled'];

export type FaultKind =
  | '5xx'
  | '429'
  | 'timeout'
  | 'reset'
  | 'malformed'
  | 'schema'
  | '400'
  | '401'
  | '404'
  | 'success-false'
  | 'accept-reset'
  | 'accept-malformed'
  | 'accept-504'
  | 'accept-500'
  | 'accept-408'
  | 'accept-520'
  | 'accept-522'
  | 'accept-524';

export const FAULT_KINDS: readonly FaultKind[] = [
  '5xx',
  '429',
  'timeout',
  'reset',
  'malformed',
  'schema',
  '401',
  '400',
  '404',
  'success-false',
  'accept-reset',
  'accept-malformed',
  'accept-504',
  'accept-500',
  'accept-408',
  'accept-520',
  'accept-522',
  'accept-524',
];

/**
 * `sequence` is consumed one entry per request to the endpoint, then normal answers resume;
 * `probability` + `kinds`: each request fails with that probability, the kind picked at random.
 */
export interface FaultPlan {
  probability?: number;
  kinds?: FaultKind[];
  sequence?: Array<FaultKind | 'ok'>;
}

/** Spec 2.6, field for field. */
export interface TravelRuleSetting {
  id: number;
  appId: number;
  outgoingTxn: number;
  outgoingTxnTimeout: number | null;
  incomingTxn: number;
  mandatory: boolean;
  blockTxn: boolean;
  dataJson: {
    name: string;
    type: string;
    address: { city: string; country: string; address1: string; address2: string };
    identification: { type: string; number: string; country: string; authority: string };
  };
  status: number;
  updatedBy: number;
  orgId: number;
  createdAt: string;
  updatedAt: string;
}

export interface SimulatorSettings {
  travelRule: TravelRuleSetting;
  /** Wait before answering, per endpoint. */
  latencyMs: Record<SimEndpoint, number>;
  /** After an accepted send, the transfer appears in get-transfer (txid "") after this. */
  visibleAfterMs: number;
  /** And gets a non-empty txid this long after it became visible. */
  txidAfterMs: number;
  /** Up to this much more, drawn at random per transfer, before it becomes visible. */
  visibleJitterMs: number;
  /** Up to this much more, drawn at random per transfer, before its txid is set. */
  txidJitterMs: number;
  /** `expires_in` of issued tokens; a token past its life gets 401. */
  tokenLifetimeSec: number;
  /** false: get-transfer also returns the wallet's other transfers, newest first (upstream API 4.1 leaves it open). */
  narrowResults: boolean;
  /**
   * With narrowResults off, true: a lookup by sequenceId that matches no transfer still answers the
   * wallet's other transfers (a provider whose lookups ignore the sequenceId); false: not found.
   */
  unmatchedListsWallet: boolean;
  /**
   * With narrowResults off: how many of the wallet's other transfers get-transfer lists at most, newest
   * first (default 25: upstream API 4.1 shows no pagination, so the list is kept bounded).
   */
  otherTransfersListed: number;
  /** true: address letter case in get-transfer differs from the send record (upstream API 2.2). */
  mixedCaseAddresses: boolean;
  /** true: a second send of an accepted sequenceId gets 409; false: accepted and counted again. */
  rejectDuplicates: boolean;
  /** Retry-After of injected 429s. */
  retryAfterSec: number;
  /**
   * A provider's request limit, per client, over every endpoint but token: past it (a token bucket of
   * this rate holding one second's worth) the answer is 429 with Retry-After. 0: no limit.
   */
  maxRps: number;
  /** Adds `sequenceId` to get-transfer Transactions (upstream API 2.1 has no such field). */
  includeSequenceIdInTransactions: boolean;
  /** How answers are shaped: as documented, or with a real provider's variation. */
  profile: SimProfile;
  /**
   * Decimal text, e.g. "12345678901234.567891": transfers accepted while set move this amount instead
   * of the one derived from txHex (up to 16 integer and 18 fractional digits); null: derived.
   */
  fixedAmount: string | null;
  /**
   * true: sendTransaction writes 2.4 `amount` as a binary double's 17-significant-digit text
   * (64.079000000000008 for 64.079), as a provider serialising floats does; get-transfer's lists keep
   * their 8 fractional digits.
   */
  amountAsDouble: boolean;
}

/**
 * `spec`: answers exactly as docs/upstream-api.md documents them. `realistic`: as a real provider
 * sends them, varying what the spec leaves open (see realistic.ts).
 */
export type SimProfile = 'spec' | 'realistic';

export const SIM_PROFILES: readonly SimProfile[] = ['spec', 'realistic'];

export type DeepPartial<T> = {
  [K in keyof T]?: T[K] extends readonly unknown[] ? T[K] : T[K] extends object ? DeepPartial<T[K]> : T[K];
};

export interface SimulatorOptions {
  host?: string;
  /** 0 = any free port. */
  port?: number;
  clientId?: string;
  clientSecret?: string;
  settings?: DeepPartial<SimulatorSettings>;
}

export const DEFAULT_CLIENT_ID = 'sim-client';
export const DEFAULT_CLIENT_SECRET = 'sim-secret';
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 4000;

/** setTimeout cannot wait longer than this. */
const MAX_LATENCY_MS = 2_147_483_647;

export function defaultSettings(): SimulatorSettings {
  return {
    travelRule: {
      id: 42,
      appId: 1187,
      outgoingTxn: 0,
      outgoingTxnTimeout: null,
      incomingTxn: 0,
      mandatory: false,
      blockTxn: false,
      dataJson: {
        name: 'Jane Doe',
        type: 'natural',
        address: {
          city: 'Berlin',
          country: 'DE',
          address1: 'Invalidenstrasse 117',
          address2: 'Building C, 3rd floor',
        },
        identification: {
          type: 'passport',
          number: 'C01X00T47',
          country: 'DE',
          authority: 'Bundesdruckerei',
        },
      },
      status: 1,
      updatedBy: 1043,
      orgId: 17,
      createdAt: '2024-03-11T09:21:44.318Z',
      updatedAt: '2024-11-02T16:05:12.907Z',
    },
    latencyMs: { token: 0, getTransfer: 0, sendTransaction: 0, getWalletTransaction: 0, isEnabled: 0 },
    visibleAfterMs: 0,
    txidAfterMs: 0,
    visibleJitterMs: 0,
    txidJitterMs: 0,
    tokenLifetimeSec: 3600,
    narrowResults: true,
    unmatchedListsWallet: false,
    otherTransfersListed: 25,
    mixedCaseAddresses: false,
    rejectDuplicates: true,
    retryAfterSec: 1,
    maxRps: 0,
    includeSequenceIdInTransactions: false,
    profile: 'spec',
    fixedAmount: null,
    amountAsDouble: false,
  };
}

type Leaf = 'int' | 'count' | 'nullableInt' | 'ms' | 'bool' | 'string' | 'profile' | 'amountOrNull';
interface Shape {
  [key: string]: Leaf | Shape;
}

const MS_FIELDS: Shape = Object.fromEntries(SIM_ENDPOINTS.map((endpoint) => [endpoint, 'ms' as const]));

/** Mirrors SimulatorSettings; drives the validation of every patch. */
const SETTINGS_SHAPE: Shape = {
  travelRule: {
    id: 'int',
    appId: 'int',
    outgoingTxn: 'int',
    outgoingTxnTimeout: 'nullableInt',
    incomingTxn: 'int',
    mandatory: 'bool',
    blockTxn: 'bool',
    dataJson: {
      name: 'string',
      type: 'string',
      address: { city: 'string', country: 'string', address1: 'string', address2: 'string' },
      identification: { type: 'string', number: 'string', country: 'string', authority: 'string' },
    },
    status: 'int',
    updatedBy: 'int',
    orgId: 'int',
    createdAt: 'string',
    updatedAt: 'string',
  },
  latencyMs: MS_FIELDS,
  visibleAfterMs: 'ms',
  txidAfterMs: 'ms',
  visibleJitterMs: 'ms',
  txidJitterMs: 'ms',
  tokenLifetimeSec: 'ms',
  narrowResults: 'bool',
  unmatchedListsWallet: 'bool',
  otherTransfersListed: 'count',
  mixedCaseAddresses: 'bool',
  rejectDuplicates: 'bool',
  retryAfterSec: 'ms',
  maxRps: 'ms',
  includeSequenceIdInTransactions: 'bool',
  profile: 'profile',
  fixedAmount: 'amountOrNull',
  amountAsDouble: 'bool',
};

export class SettingsError extends Error {
  override name = 'SettingsError';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `fixedAmount`'s form: a JSON number's text, no exponent, so it can be written into a body as is;
 * 16 integer digits keep its USD value (× ~3,000) below 1e21, where toFixed would switch to exponents.
 */
const FIXED_AMOUNT = /^(0|[1-9]\d{0,15})(\.\d{1,18})?$/;

export function isFixedAmount(value: unknown): value is string {
  return typeof value === 'string' && FIXED_AMOUNT.test(value) && /[1-9]/.test(value);
}

function checkLeaf(kind: Leaf, value: unknown, path: string): void {
  const fail = (what: string): never => {
    throw new SettingsError(`${path}: must be ${what}`);
  };
  switch (kind) {
    case 'bool':
      if (typeof value !== 'boolean') fail('a boolean');
      return;
    case 'string':
      if (typeof value !== 'string') fail('a string');
      return;
    case 'int':
      if (!Number.isSafeInteger(value)) fail('an integer');
      return;
    case 'count':
      if (!Number.isSafeInteger(value) || (value as number) < 0) fail('a whole number from 0');
      return;
    case 'nullableInt':
      if (value !== null && !Number.isSafeInteger(value)) fail('an integer or null');
      return;
    case 'profile':
      if (!SIM_PROFILES.includes(value as SimProfile)) fail(SIM_PROFILES.join(' or '));
      return;
    case 'amountOrNull':
      if (value !== null && !isFixedAmount(value)) {
        fail('null or positive decimal text with up to 16 integer and 18 fractional digits');
      }
      return;
    case 'ms':
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > MAX_LATENCY_MS) {
        fail(`a number from 0 to ${MAX_LATENCY_MS}`);
      }
      return;
  }
}

function mergeInto(target: Record<string, unknown>, patch: unknown, shape: Shape, path: string): void {
  if (!isPlainObject(patch)) throw new SettingsError(`${path || 'settings'}: must be an object`);
  for (const [key, value] of Object.entries(patch)) {
    const where = path ? `${path}.${key}` : key;
    const kind = Object.hasOwn(shape, key) ? shape[key] : undefined;
    if (kind === undefined) throw new SettingsError(`${where}: unknown setting`);
    if (value === undefined) continue;
    if (typeof kind === 'string') {
      checkLeaf(kind, value, where);
      target[key] = value;
    } else {
      mergeInto(target[key] as Record<string, unknown>, value, kind, where);
    }
  }
}

/**
 * Returns a new settings object: `base` with `patch` deep-merged. Throws SettingsError naming the
 * first bad field; `base` is never modified, so a refused patch leaves no partial change behind.
 */
export function mergeSettings(base: SimulatorSettings, patch: unknown): SimulatorSettings {
  const next = structuredClone(base);
  mergeInto(next as unknown as Record<string, unknown>, patch ?? {}, SETTINGS_SHAPE, '');
  return next;
}

/** Validates a fault plan from untrusted input; null clears. */
export function parseFaultPlan(input: unknown): FaultPlan | null {
  if (input === null) return null;
  if (!isPlainObject(input)) throw new SettingsError('fault plan: must be an object or null');
  const plan: FaultPlan = {};
  for (const key of Object.keys(input)) {
    if (key !== 'probability' && key !== 'kinds' && key !== 'sequence') {
      throw new SettingsError(`fault plan.${key}: unknown field`);
    }
  }
  const { probability, kinds, sequence } = input;
  if (probability !== undefined) {
    if (typeof probability !== 'number' || !(probability >= 0 && probability <= 1)) {
      throw new SettingsError('fault plan.probability: must be a number from 0 to 1');
    }
    plan.probability = probability;
  }
  if (kinds !== undefined) {
    if (!Array.isArray(kinds) || !kinds.every((kind) => FAULT_KINDS.includes(kind as FaultKind))) {
      throw new SettingsError(`fault plan.kinds: must be an array of ${FAULT_KINDS.join(', ')}`);
    }
    plan.kinds = [...(kinds as FaultKind[])];
  }
  if (sequence !== undefined) {
    if (!Array.isArray(sequence) || !sequence.every((entry) => entry === 'ok' || FAULT_KINDS.includes(entry as FaultKind))) {
      throw new SettingsError(`fault plan.sequence: must be an array of ok, ${FAULT_KINDS.join(', ')}`);
    }
    plan.sequence = [...(sequence as Array<FaultKind | 'ok'>)];
  }
  if ((plan.probability ?? 0) > 0 && (plan.kinds?.length ?? 0) === 0) {
    throw new SettingsError('fault plan.kinds: required when probability is above 0');
  }
  return plan;
}

export function isSimEndpoint(value: string): value is SimEndpoint {
  return (SIM_ENDPOINTS as readonly string[]).includes(value);
}
