import { z } from 'zod';

/*
 * Schemas of BitGo's answers (docs/bitgo-api.md sections 2 to 4), by the first adapter's rule: strict
 * only where money or tracking is decided, tolerant everywhere else.
 *
 * Strict: a transfer's `id`, `type`, `sequenceId`, `txid` (text once set; absent, null or "" mean "not
 * on chain yet": a transfer waiting for approval has none), and of each entry `address` and
 * `valueString` (base units as integer text, `^-?\d+$`). Amounts are never read from the JSON numbers
 * `value`/`baseValue` ("may be approximate" above 2^53 − 1): only from the `…String` fields.
 * Tolerant: every other documented field may be absent, null or of another type and rides along as
 * given. Undocumented keys are dropped, and so are `history` (it names users) and `comment` (free text
 * a person typed): neither reaches events.
 */

/** Base units as integer text, signed (a send's value is negative). */
export const BASE_UNITS = /^-?\d+$/;
const baseUnitsText = z.string().regex(BASE_UNITS, 'expected base units as integer text');
/** A documented field the worker does not decide on: any JSON value, or absent. */
const loose = z.unknown().optional();
/** Any BitGo id: text (32 lowercase hex as documented; not enforced, so a format change is not an outage). */
const idText = z.string().min(1).max(128);
/** A txid: text once set; null, absent or empty all mean "not on chain yet". */
const txidText = z
  .union([z.string(), z.null()])
  .optional()
  .transform((value) => value ?? '');
/**
 * Our sequenceId as the transfer carries it: text as we sent it (public-types' `TxSendBody` also takes
 * a number, so a number is read as its text); null counts as absent.
 */
const sequenceIdText = z
  .union([z.string(), z.number().int().nonnegative(), z.null()])
  .optional()
  .transform((value) => (value === null || value === undefined ? undefined : String(value)));

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * One entry of a transfer (api.yaml `Transfer.entries[]`): an address and its balance change. An entry
 * the worker cannot read (no address, no `valueString`) is kept out of `outputs` but never fails the
 * transfer: `entries` rides along as given.
 */
export const entrySchema = z.object({
  address: z.string().min(1),
  valueString: baseUnitsText,
  wallet: loose,
  isChange: loose,
  isPayGo: loose,
});

export type BitgoEntry = z.infer<typeof entrySchema>;

/** The transfer's entries that are readable, in order. */
export function readableEntries(entries: unknown): BitgoEntry[] {
  if (!Array.isArray(entries)) return [];
  const readable: BitgoEntry[] = [];
  for (const entry of entries) {
    const parsed = entrySchema.safeParse(entry);
    if (parsed.success) readable.push(parsed.data);
  }
  return readable;
}

/**
 * The entries money went to: a positive balance change on an address that is not the sending wallet's
 * own (its `wallet` is another wallet or absent), not change and not BitGo's PayGo fee. For a send these
 * are its recipients.
 */
export function recipientEntries(entries: unknown, walletId: string | undefined): BitgoEntry[] {
  return readableEntries(entries).filter(
    (entry) =>
      !entry.valueString.startsWith('-') &&
      /[1-9]/.test(entry.valueString) &&
      (walletId === undefined || entry.wallet !== walletId) &&
      entry.isChange !== true &&
      entry.isPayGo !== true,
  );
}

/**
 * api.yaml `Transfer` (the lookups' answer, section 3/4) and `Transfer1` (inside the send's 200):
 * strict in what identifies and matches it, every other documented field passed through.
 */
export const transferSchema = z.object({
  id: idText,
  type: z.string(),
  txid: txidText,
  sequenceId: sequenceIdText,
  state: loose,
  entries: loose,
  coin: loose,
  wallet: loose,
  enterprise: loose,
  organization: loose,
  txidType: loose,
  height: loose,
  heightId: loose,
  date: loose,
  confirmations: loose,
  value: loose,
  valueString: loose,
  baseValue: loose,
  baseValueString: loose,
  feeString: loose,
  payGoFeeString: loose,
  usd: loose,
  usdRate: loose,
  tags: loose,
  pendingApproval: loose,
  normalizedTxHash: loose,
  replaces: loose,
  replacedBy: loose,
  createdTime: loose,
  signedTime: loose,
  unconfirmedTime: loose,
  confirmedTime: loose,
  coinSpecific: loose,
});

export type BitgoTransfer = z.infer<typeof transferSchema>;

/**
 * The send's 200 (api.yaml `TransactionResponse`): `transfer` nested, with `txid`, `tx`, `status`. The
 * flat form of public-types' `TxSendResponse` (the transfer's fields at the top) is tolerated
 * (docs/bitgo-api.md section 2): a body without a `transfer` object is read as the transfer itself.
 */
export const sendAnswerSchema = z.preprocess(
  (body) => (isPlainObject(body) && !isPlainObject(body.transfer) ? { transfer: body } : body),
  z.object({
    transfer: transferSchema,
    txid: loose,
    tx: loose,
    status: loose,
  }),
);

export type BitgoSendAnswer = z.infer<typeof sendAnswerSchema>;

/** A recipient of a pending approval's transaction request: only a base-units text amount is read. */
const requestedRecipient = z.object({ address: z.string().min(1), amount: z.string().regex(/^\d+$/) });

/**
 * The send's 202 (api.yaml `PendingApproval`): the approval BitGo waits for. Its `id` is the pending
 * approval's, not a transfer's; it names neither the transfer nor the sequenceId.
 */
export const pendingApprovalSchema = z.object({
  id: idText,
  state: loose,
  coin: loose,
  wallet: loose,
  enterprise: loose,
  createDate: loose,
  scope: loose,
  approvalsRequired: loose,
  info: z
    .unknown()
    .optional()
    .transform((info) => {
      // Only the recipients of info.transactionRequest are read; the rest (comment, creator) stays behind.
      const request = isPlainObject(info) && isPlainObject(info.transactionRequest) ? info.transactionRequest : undefined;
      const recipients = Array.isArray(request?.recipients) ? request.recipients : [];
      const readable = recipients.flatMap((recipient) => {
        const parsed = requestedRecipient.safeParse(recipient);
        return parsed.success ? [parsed.data] : [];
      });
      return { recipients: readable, unreadableRecipients: recipients.length - readable.length };
    }),
});

export type BitgoPendingApproval = z.infer<typeof pendingApprovalSchema>;

/** BitGo's error envelope (section 5): `name` is the stable code; `error` is human-readable and may change. */
export const errorEnvelopeSchema = z.object({
  name: z.string().optional(),
  error: z.string().optional(),
  requestId: z.string().optional(),
});

/**
 * BitGo's `transfer` webhook body (docs/bitgo-api.md section 7): `{ type: 'transfer', wallet, coin,
 * transfer: <id>, hash, state, ... }`. Only the transfer id and the hash (txid) are read, as a hint of
 * which transfer to poll; the rest (state, value…) is never taken as fact, so it is not read at all.
 */
export const transferWebhookSchema = z.object({
  type: z.literal('transfer'),
  transfer: idText.optional().catch(undefined),
  hash: z.string().min(1).max(256).optional().catch(undefined),
});

/** The answer to a webhook registration: BitGo's record of it (id, type, url…), passed on as given. */
export const webhookRecordSchema = z.looseObject({ id: idText });
