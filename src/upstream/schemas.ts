import { z } from 'zod';

/*
 * Schemas of every upstream resource (spec section 2). Rules:
 * - types are strict: a number where text is documented fails, and so does the reverse;
 * - amounts stay decimal text, checked by pattern, never parsed into floating point;
 * - fields documented with "known values" accept any string (the sets are not complete);
 * - fields documented as "null in all known cases" or "null or value" accept null or any JSON value;
 * - unknown extra fields are dropped, so nothing undocumented travels further.
 */

const signedDecimal = z.string().regex(/^-?\d+(\.\d+)?$/, 'expected signed decimal text');
const unsignedDecimal = z.string().regex(/^\d+(\.\d+)?$/, 'expected unsigned decimal text');
const timestamp = z.iso.datetime({ offset: true });
const numericText = z.string().regex(/^\d+$/, 'expected numeric text');
const anyValue = z.unknown();

/**
 * 2.3 and 2.5 `raw` ("null or any value"): kept as given, except that a `user` object inside it is
 * dropped as it is from 2.4's, so no person reaches events or logs whatever a provider puts there.
 */
const looseRaw = anyValue.transform((value) => {
  if (!value || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, 'user')) return value;
  const { user: _user, ...rest } = value as Record<string, unknown>;
  return rest;
});
const int = z.number().int();

/** 2.3 Wallet, embedded in transfer parties. */
export const walletSchema = z.object({
  id: int,
  name: z.string(),
  type: z.string(),
  config: z.string().regex(/^\d+of\d+$/, 'expected <m>of<n>'),
  status: int,
  balance: signedDecimal,
  balanceusd: signedDecimal,
  raw: looseRaw,
  issynced: z.boolean(),
  walletpath: anyValue,
  walletidentifier: z.string(),
  coin: z.string(),
  chain: z.string(),
  parentchain: z.string(),
  subtype: z.string(),
  isArchived: z.boolean(),
  teamId: anyValue,
  version: int,
  orgid: int,
});

/** 2.2 Transfer party. */
export const transferPartySchema = z.object({
  address: z.string().min(1),
  amount: unsignedDecimal,
  isMine: z.boolean(),
  wallet: walletSchema.optional(),
});

/** 2.1 Transaction (get-transfer). `sequenceId` is not documented; kept when a record carries one. */
export const transactionSchema = z.object({
  coin: z.string(),
  id: numericText,
  wallet: int,
  txid: z.string(),
  date: timestamp,
  value: signedDecimal,
  valueString: signedDecimal,
  baseValue: z.number(),
  baseValueString: signedDecimal,
  feeString: unsignedDecimal,
  usd: signedDecimal,
  walletType: z.string(),
  inputs: z.array(transferPartySchema),
  outputs: z.array(transferPartySchema),
  type: z.string(),
  DestinationTag: z.union([z.null(), z.string(), z.number()]),
  sequenceId: z.string().optional(),
});

/**
 * get-transfer answers a list (spec 4.1). Defensive: also accepted inside an envelope under `data` or
 * `result`, since the spec shows no envelope but the other endpoints have one.
 */
export const transactionListSchema = z.preprocess(unwrap, z.array(transactionSchema));

/** Takes a body out of a `{ data }` or `{ result }` envelope, so schema errors point at the record's own fields. */
function unwrap(body: unknown): unknown {
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    const envelope = body as { data?: unknown; result?: unknown };
    if (envelope.data !== undefined && typeof envelope.data === 'object') return envelope.data;
    if (envelope.result !== undefined && typeof envelope.result === 'object') return envelope.result;
  }
  return body;
}

/** The person inside a submitted record's `raw` (2.4). Validated, then dropped by the client. */
export const rawUserSchema = z.object({
  id: int,
  displayName: z.string(),
  photoURL: z.string(),
  lastLoginAt: z.string(),
  email: z.string(),
  phoneNumber: z.string().nullable(),
  status: int,
  created_at: z.string(),
  clientid: z.string(),
  type: int,
});

const rawSubmissionSchema = z.looseObject({
  txHex: z.string(),
  halfSigned: z.looseObject({
    txBase64: z.string().optional(),
    txHex: z.string().optional(),
    sequenceId: z.string().optional(),
    payload: z.string().optional(),
  }),
  user: rawUserSchema.optional(),
  sequenceId: z.string(),
});

/**
 * `raw` arrives as JSON text. It is parsed and validated, the `user` object is dropped, and it is
 * handed on as JSON text again, so a record never carries a person past the client.
 */
const rawText = z.string().transform((text, ctx) => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'raw is not JSON text' });
    return z.NEVER;
  }
  const result = rawSubmissionSchema.safeParse(parsed);
  if (!result.success) {
    for (const issue of result.error.issues) {
      ctx.addIssue({ code: 'custom', message: `raw.${issue.path.join('.')}: ${issue.message}` });
    }
    return z.NEVER;
  }
  const { user: _user, ...withoutUser } = result.data;
  return JSON.stringify(withoutUser);
});

/** 2.4 Submitted transfer record (sendTransaction), with `raw.user` removed. */
export const submittedTransferSchema = z.object({
  id: int,
  userid: int,
  raw: rawText,
  status: int,
  walletid: numericText,
  type: int,
  asset: z.string(),
  chain: z.string(),
  timestamp,
  transactionSequenceId: int,
  sequenceId: z.string().min(1),
  amount: z.number(),
  destinationAddress: z.string(),
  usdamount: z.number(),
});

/** sendTransaction answers the record itself; defensive: also inside `data` or `result`. */
export const sendTransactionResponseSchema = z.preprocess(unwrap, submittedTransferSchema);

/** 2.5 Wallet transaction (under `result`). */
export const walletTransactionSchema = z.object({
  id: int,
  txid: z.string(),
  raw: looseRaw,
  walletid: int,
  type: z.string(),
  fee: signedDecimal,
  effectivechange: signedDecimal,
  runningbalance: anyValue,
  timestamp,
  externaladdress: z.string(),
  coin: z.string(),
  effectivechangeusd: signedDecimal,
  wallet: z.object({
    id: int,
    name: z.string(),
    type: z.string(),
    config: z.string().regex(/^\d+of\d+$/, 'expected <m>of<n>'),
    balance: signedDecimal,
    address: z.string(),
    coin: z.string(),
    chain: z.string(),
    parentchain: z.string(),
    subtype: z.string(),
    access: z.string(),
    balanceUSD: signedDecimal,
  }),
  explorerLink: z.string(),
});

export const walletTransactionResponseSchema = z.object({ result: walletTransactionSchema });

/** 2.6 Travel rule setting (under `data`). `dataJson` describes the originator: validated, never logged. */
export const travelRuleSettingSchema = z.object({
  id: int,
  appId: int,
  outgoingTxn: int,
  outgoingTxnTimeout: anyValue,
  incomingTxn: int,
  mandatory: z.boolean(),
  blockTxn: z.boolean(),
  dataJson: z.object({
    name: z.string(),
    type: z.string(),
    address: z.object({ city: z.string(), country: z.string(), address1: z.string(), address2: z.string() }),
    identification: z.object({ type: z.string(), number: z.string(), country: z.string(), authority: z.string() }),
  }),
  status: int,
  updatedBy: int,
  orgId: int,
  createdAt: timestamp,
  updatedAt: timestamp,
});

export const isEnabledResponseSchema = z.object({ success: z.literal(true), data: travelRuleSettingSchema });

/** `{ "success": false, "message" }`: an error whatever the HTTP status (spec 7 shows no error bodies). */
export const failureEnvelopeSchema = z.object({ success: z.literal(false), message: z.string().optional() });

export const tokenResponseSchema = z.object({
  access_token: z.string().min(1),
  expires_in: z.number().positive().optional(),
  token_type: z.string().optional(),
});

export type Wallet = z.infer<typeof walletSchema>;
export type TransferParty = z.infer<typeof transferPartySchema>;
export type Transaction = z.infer<typeof transactionSchema>;
export type SubmittedTransfer = z.infer<typeof submittedTransferSchema>;
export type WalletTransaction = z.infer<typeof walletTransactionSchema>;
export type TravelRuleSetting = z.infer<typeof travelRuleSettingSchema>;
