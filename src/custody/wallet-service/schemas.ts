import { z } from 'zod';
import { decimalFromNumber, decimalFromNumberText, normalizeDecimal } from '../../lib/decimal.ts';
import { EXACT_AMOUNT, UNREADABLE, type SkippedRecord } from '../port.ts';

// The port owns the symbols; re-exported for this implementation's callers.
export { EXACT_AMOUNT, UNREADABLE };

/*
 * Schemas of the upstream resources (docs/upstream-api.md section 2). A real provider differs from its documentation
 * somewhere, so the rule is: strict only where money or tracking is decided, tolerant everywhere else.
 *
 * Strict (a wrong type or shape is a typed error, or for a list element: that record is skipped):
 * - record ids (2.1 `id`, 2.4 `id`), `sequenceId`, `txid` (a string once set; null, absent or "" mean
 *   "not broadcast yet"), 2.1 `type`, the 2.1 outputs' `address` and `amount` (decimal text) used for
 *   matching, 2.4 `destinationAddress` and `amount` (kept exact, see EXACT_AMOUNT), the travel-rule
 *   gate's `outgoingTxn`, `mandatory` and `blockTxn`, the token.
 * Tolerant: every other documented field may be absent, null or of another type; its value is passed
 * on as given. Undocumented keys are dropped (they never reach events), and a `user` object inside any
 * `raw` is removed, so no person travels past the client.
 */

const unsignedDecimal = z.string().regex(/^\d+(\.\d+)?$/, 'expected unsigned decimal text');
const numericText = z.string().regex(/^\d+$/, 'expected numeric text');
/** A documented field the worker does not decide on: any JSON value, or absent. */
const loose = z.unknown().optional();
/** A record id: numeric text as documented, or a whole number (some providers send one), kept as text. */
const recordIdText = z.union([numericText, z.number().int().nonnegative().transform(String)]);
/** A txid: text once set; null, absent or empty all mean "no txid yet". */
const txidText = z
  .union([z.string(), z.null()])
  .optional()
  .transform((value) => value ?? '');
/** An optional text field that decides something when present: null counts as absent. */
const optionalText = z
  .union([z.string(), z.null()])
  .optional()
  .transform((value) => value ?? undefined);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Removes a `user` object (a person, upstream API 2.4) from any object, whatever the endpoint. */
function withoutUser(value: unknown): unknown {
  if (!isPlainObject(value) || !Object.hasOwn(value, 'user')) return value;
  const { user: _user, ...rest } = value;
  return rest;
}

/**
 * The documented keys of an object whose fields the worker does not decide on: when the value is an
 * object, its undocumented keys are dropped; anything else (null, a string, an older format) passes as
 * given. Never fails.
 */
function knownKeys(keys: readonly string[]) {
  return z
    .unknown()
    .transform((value) => {
      if (!isPlainObject(value)) return value;
      const picked: Record<string, unknown> = {};
      for (const key of keys) if (Object.hasOwn(value, key)) picked[key] = key === 'raw' ? withoutUser(value[key]) : value[key];
      return picked;
    })
    .optional();
}

/** 2.3 Wallet embedded in transfer parties: unused by the worker, documented keys passed through. */
const WALLET_KEYS = [
  'id',
  'name',
  'type',
  'config',
  'status',
  'balance',
  'balanceusd',
  'raw',
  'issynced',
  'walletpath',
  'walletidentifier',
  'coin',
  'chain',
  'parentchain',
  'subtype',
  'isArchived',
  'teamId',
  'version',
  'orgid',
] as const;
const looseWallet = knownKeys(WALLET_KEYS);

/** 2.2 Transfer party as an output: its address and amount decide a match, the rest is passed through. */
export const outputPartySchema = z.object({
  address: z.string(),
  amount: unsignedDecimal,
  isMine: loose,
  wallet: looseWallet,
});

/** 2.2 Transfer party as an input: nothing in it is decided on. */
const inputParty = knownKeys(['address', 'amount', 'isMine', 'wallet']).transform((party) =>
  isPlainObject(party) && isPlainObject(party.wallet) ? { ...party, wallet: looseWallet.parse(party.wallet) } : party,
);

/**
 * 2.1 Transaction (get-transfer). Strict in what identifies and matches it (`id`, `type`, `txid`, the
 * outputs, an undocumented `sequenceId` some providers add); everything else passed through.
 */
export const transactionSchema = z.object({
  id: recordIdText,
  type: z.string(),
  txid: txidText,
  sequenceId: optionalText,
  outputs: z.preprocess((value) => value ?? [], z.array(outputPartySchema)),
  inputs: z
    .unknown()
    .optional()
    .transform((value) => (Array.isArray(value) ? value.map((party) => inputParty.parse(party)) : value)),
  coin: loose,
  wallet: loose,
  date: loose,
  value: loose,
  valueString: loose,
  baseValue: loose,
  baseValueString: loose,
  feeString: loose,
  usd: loose,
  walletType: loose,
  DestinationTag: loose,
});

/**
 * get-transfer answers a list (upstream API 4.1), also accepted inside a `{ data }` or `{ result }` envelope.
 * Only the list itself is checked here: its records are parsed one by one (parseTransactionList), so
 * one odd record never hides the rest.
 */
export const transactionListSchema = z.preprocess(unwrap, z.array(z.unknown()));

/** Takes a body out of a `{ data }` or `{ result }` envelope, so schema errors point at the record's own fields. */
export function unwrap(body: unknown): unknown {
  // A body that is itself a record (it has an id or a sequenceId) is never unwrapped: an undocumented
  // `data` or `result` key inside a record is just an extra key.
  if (!isPlainObject(body) || Object.hasOwn(body, 'id') || Object.hasOwn(body, 'sequenceId')) return body;
  for (const key of ['data', 'result'] as const) {
    const inner = body[key];
    if (Array.isArray(inner) || isPlainObject(inner)) return inner;
  }
  return body;
}

// The port owns it (any adapter may skip unreadable records of a list); re-exported for this adapter's callers.
export type { SkippedRecord };

/**
 * Parses a get-transfer list record by record: those that fail are skipped and reported (by paths,
 * never values), matching then runs among the rest. `sequenceId`, when given, flags a skipped record
 * that carried it: the one record that mattered is unreadable, which the caller must say loudly.
 */
export function parseTransactionList(
  list: readonly unknown[],
  sequenceId?: string,
): { transactions: TransactionList; skipped: SkippedRecord[] } {
  const transactions: TransactionList = [];
  const skipped: SkippedRecord[] = [];
  list.forEach((item, index) => {
    const parsed = transactionSchema.safeParse(item);
    if (parsed.success) {
      transactions.push(parsed.data);
      return;
    }
    const paths = [...new Set(parsed.error.issues.map((issue) => issue.path.join('.') || '(record)'))].slice(0, 5);
    const ours = sequenceId !== undefined && isPlainObject(item) && item.sequenceId === sequenceId;
    skipped.push({ index, paths, ours });
  });
  if (skipped.length > 0) transactions[UNREADABLE] = skipped.length;
  return { transactions, skipped };
}

export type TransactionList = Transaction[] & { [UNREADABLE]?: number };

/** A JSON number read together with its own text (JSON.parse's reviver `context.source`). */
export class ExactNumber {
  readonly value: number;
  readonly source: string;
  constructor(value: number, source: string) {
    this.value = value;
    this.source = source;
  }
}

/** An amount that decides a match: a JSON number (exact when read as ExactNumber) or decimal text. */
const exactAmount = z.union([
  z.instanceof(ExactNumber).refine((n) => n.value >= 0, 'expected a non-negative amount'),
  z.number().nonnegative(),
  unsignedDecimal,
]);

/** 2.4 `raw`: JSON text as documented; its `user` object is removed; dropped when it is not readable. */
const rawSubmission = z
  .unknown()
  .optional()
  .transform((value) => {
    if (typeof value === 'string') {
      try {
        return JSON.stringify(withoutUser(JSON.parse(value)));
      } catch {
        return undefined; // unreadable text might hold a person we cannot find: it does not travel
      }
    }
    return isPlainObject(value) ? withoutUser(value) : value;
  });

/** 2.4 Submitted transfer record (sendTransaction): strict in its id, sequenceId, destination and amount. */
const submittedTransferObject = z.object({
  id: z.union([z.number().int().nonnegative(), numericText]),
  sequenceId: z.string().min(1),
  destinationAddress: z.string(),
  amount: exactAmount,
  raw: rawSubmission,
  userid: loose,
  status: loose,
  walletid: loose,
  type: loose,
  asset: loose,
  chain: loose,
  timestamp: loose,
  transactionSequenceId: loose,
  usdamount: loose,
});

/**
 * The record keeps `amount` as upstream typed it (a number, as documented); the exact decimal text
 * rides along on a symbol key for matching.
 */
function withExactAmount<T extends { amount: ExactNumber | number | string }>(
  record: T,
): Omit<T, 'amount'> & { amount: number | string; [EXACT_AMOUNT]: string } {
  const { amount } = record;
  if (amount instanceof ExactNumber) {
    return { ...record, amount: amount.value, [EXACT_AMOUNT]: decimalFromNumberText(amount.source) ?? decimalFromNumber(amount.value) };
  }
  return { ...record, amount, [EXACT_AMOUNT]: typeof amount === 'number' ? decimalFromNumber(amount) : normalizeDecimal(amount)! };
}

export const submittedTransferSchema = submittedTransferObject.transform(withExactAmount);

/**
 * The same record without `raw`, for a caller that does not use it (the submit handler: raw never
 * reaches an event, docs/contract.md section 4 v1.1): raw is then neither parsed nor written again, and dropped like
 * any undocumented key. Everything that decides money is checked as in submittedTransferSchema.
 */
export const submittedTransferWithoutRawSchema = submittedTransferObject.omit({ raw: true }).transform(withExactAmount);

/** sendTransaction answers the record itself; defensive: also inside `data` or `result`. */
export const sendTransactionResponseSchema = z.preprocess(unwrap, submittedTransferSchema);
export const sendTransactionResponseWithoutRawSchema = z.preprocess(unwrap, submittedTransferWithoutRawSchema);

/** 2.5 Wallet transaction (under `result`): only its `txid` is decided on (reconciliation compares it). */
export const walletTransactionSchema = z.object({
  txid: z.string(),
  id: loose,
  raw: z.unknown().optional().transform(withoutUser),
  walletid: loose,
  type: loose,
  fee: loose,
  effectivechange: loose,
  runningbalance: loose,
  timestamp: loose,
  externaladdress: loose,
  coin: loose,
  effectivechangeusd: loose,
  wallet: knownKeys([
    'id',
    'name',
    'type',
    'config',
    'balance',
    'address',
    'coin',
    'chain',
    'parentchain',
    'subtype',
    'access',
    'balanceUSD',
  ]),
  explorerLink: loose,
});

export const walletTransactionResponseSchema = z.object({ result: walletTransactionSchema });

/**
 * 2.6 Travel rule setting (under `data`): the three fields that decide the gate are strict; the rest is
 * passed through for operators (CLI), whatever its shape. The originator data `dataJson` is never kept
 * or logged by the worker.
 */
export const travelRuleSettingSchema = z.object({
  outgoingTxn: z.number().int(),
  mandatory: z.boolean(),
  blockTxn: z.boolean(),
  id: loose,
  appId: loose,
  outgoingTxnTimeout: loose,
  incomingTxn: loose,
  dataJson: loose,
  status: loose,
  updatedBy: loose,
  orgId: loose,
  createdAt: loose,
  updatedAt: loose,
});

export const isEnabledResponseSchema = z.object({ success: z.literal(true), data: travelRuleSettingSchema });

/** `{ "success": false, "message" }`: an error whatever the HTTP status (upstream API section 7 shows no error bodies). */
export const failureEnvelopeSchema = z.object({ success: z.literal(false), message: z.string().optional() });

export type TransferParty = z.infer<typeof outputPartySchema>;
export type Transaction = z.infer<typeof transactionSchema>;
/** `raw` is absent when the caller asked for the record without it (submittedTransferWithoutRawSchema). */
export type SubmittedTransfer = Omit<z.infer<typeof submittedTransferSchema>, 'raw'> & { raw?: unknown };
export type WalletTransaction = z.infer<typeof walletTransactionSchema>;
export type TravelRuleSetting = z.infer<typeof travelRuleSettingSchema>;
