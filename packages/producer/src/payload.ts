import { z } from 'zod';
import { SEQUENCE_ID, sequenceIdSchema } from './sequence-id.ts';

export { SEQUENCE_ID, sequenceIdSchema };

export const SUBMIT_TRANSACTION = 'submit-transaction';

const MIB = 1024 * 1024;
const MAX_HEX = MIB;
const MAX_BASE64 = Math.floor(1.4 * MIB);
const MAX_METADATA_BYTES = 4 * 1024;

const hex = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_HEX, 'must be at most 1 MiB')
  .regex(/^(0x)?[0-9a-fA-F]+$/, 'must be hex, with an optional 0x prefix')
  .meta({ description: 'Hex, with an optional 0x prefix, at most 1 MiB' });

const base64 = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_BASE64, 'must be at most 1.4 MiB')
  .refine((v) => v.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(v), 'must be standard base64 with padding')
  // The same rule as one pattern, for the JSON Schema only: its repeated group would overflow V8's
  // regexp stack on a very long string, which the check above never does.
  .meta({ pattern: '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$' });

/**
 * Digit text whose value is 1..max, leading zeros allowed, as one pattern: what the walletId text rule
 * (a regex, then a range check in code) accepts, for the JSON Schema.
 */
function positiveIntegerText(max: number): string {
  const digits = String(max);
  const shorter = digits.length > 1 ? [`[1-9][0-9]{0,${digits.length - 2}}`] : [];
  // Same length as max: equal up to position i, then a smaller digit, then anything.
  const below = [...digits].flatMap((digit, i) => {
    const low = i === 0 ? 1 : 0;
    const high = Number(digit) - 1;
    if (high < low) return [];
    const rest = digits.length - i - 1;
    return [`${digits.slice(0, i)}${high === low ? low : `[${low}-${high}]`}${rest === 0 ? '' : rest === 1 ? '[0-9]' : `[0-9]{${rest}}`}`];
  });
  return `^0*(?:${[...shorter, ...below, digits].join('|')})$`;
}

/**
 * BitGo's wallet id with its length checked apart (32): lowercase hex with at least one letter, so that a
 * text of digits only is always the positive-integer form (one reading, no lookahead for JSON Schema).
 */
const BITGO_WALLET_ID = /^[0-9]*[a-f][0-9a-f]*$/;

/** What a walletId text that is neither form is told (zod reports one of the string forms' checks). */
const WALLET_ID_MESSAGE = 'must be a positive integer or a 32-hex wallet id';

/**
 * The `submit-transaction` job (docs/contract.md section 3), parsed at the edge. Unknown fields are dropped.
 * The schema only ever grows by optional fields, so jobs enqueued before a deploy still validate.
 */
export const submitPayloadSchema = z
  .object({
    walletId: z
      .union(
        [
          z.number().int('must be a whole number').positive('must be positive').max(Number.MAX_SAFE_INTEGER),
          z
            .string()
            // Leading zeros are still a string of digits (docs/contract.md section 3); past them, 16 digits hold every safe integer.
            .regex(/^0*\d{1,16}$/, WALLET_ID_MESSAGE)
            .transform(Number)
            .refine((n) => n > 0 && Number.isSafeInteger(n), WALLET_ID_MESSAGE)
            .meta({ pattern: positiveIntegerText(Number.MAX_SAFE_INTEGER) }),
          // BitGo's wallet id (CUSTODY_PROVIDER=bitgo), kept as the text. Digits only is the rule above's, whatever the
          // length: a 32-digit text is read as a number (or refused) exactly as before, never as a hex id.
          z.string().length(32, WALLET_ID_MESSAGE).regex(BITGO_WALLET_ID, WALLET_ID_MESSAGE),
        ],
        { error: WALLET_ID_MESSAGE },
      )
      .meta({
        description:
          "A positive integer (a string of digits is accepted and normalised to the number), or BitGo's wallet id: 32 lowercase hex characters, at least one of them a-f, kept as the string (a text of digits only, even 32 long, is the integer form)",
      }),
    coin: z
      .string({ error: 'required' })
      .regex(/^[a-z0-9._-]{1,32}$/, 'must be 1-32 of a-z 0-9 . _ -')
      .meta({ description: 'Lowercase asset code' }),
    txHex: hex,
    halfSigned: z.object({
      txBase64: base64.meta({ description: 'Standard base64 with padding, at most 1.4 MiB' }),
      txHex: hex,
      sequenceId: sequenceIdSchema.meta({
        description: "The transfer's identity end to end: one sequenceId is one transfer, whatever job ids it arrives under",
      }),
    }),
    travelRule: z
      .object({
        reference: z
          .string()
          .min(1, 'must not be empty')
          .max(256, 'must be at most 256 characters')
          .meta({ description: "The producer's proof that the travel-rule exchange for this transfer is done" }),
      })
      .nullish()
      .transform((v) => v ?? undefined)
      .meta({ description: 'Optional (null means absent)' }),
    metadata: z
      .custom<Record<string, unknown>>(isPlainObject, { error: 'must be a JSON object' })
      .transform((v, ctx) => {
        const text = jsonText(v);
        if (text === undefined) {
          ctx.addIssue({ code: 'custom', message: 'must be serialisable as JSON' });
          return z.NEVER;
        }
        if (Buffer.byteLength(text, 'utf8') > MAX_METADATA_BYTES) {
          ctx.addIssue({ code: 'custom', message: 'must be at most 4 KiB as JSON' });
          return z.NEVER;
        }
        // A copy read back from its JSON text, which is what the queue stores anyway. It keeps keys such
        // as `__proto__` as plain data (a record schema drops them), so every event echoes the metadata
        // exactly as given.
        return JSON.parse(text) as Record<string, unknown>;
      })
      // What JSON Schema can say of it: an object. The size is checked by the producer and the worker.
      .meta({
        type: 'object',
        description: 'Any JSON object, at most 4 KiB (4096 bytes) as UTF-8 JSON text; echoed in every event of the transfer',
      })
      .nullish()
      .transform((v) => v ?? undefined)
      .meta({ description: 'Optional (null means absent)' }),
  })
  .meta({
    title: 'submit-transaction job data',
    description:
      'The data of a job named submit-transaction in the queue submit-transaction (docs/contract.md section 3). Unknown fields are ignored. Not checkable here: metadata at most 4 KiB as JSON.',
  });

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** JSON text of a value, or undefined when it has none (a BigInt, a cycle): parsing never throws. */
function jsonText(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

export type SubmitPayload = z.output<typeof submitPayloadSchema>;
export type SubmitPayloadInput = z.input<typeof submitPayloadSchema>;

export interface PayloadIssue {
  path: string;
  message: string;
}

export type ParsedPayload = { ok: true; payload: SubmitPayload } | { ok: false; issues: PayloadIssue[] };

export function parseSubmitPayload(data: unknown): ParsedPayload {
  const result = submitPayloadSchema.safeParse(data);
  if (result.success) return { ok: true, payload: result.data };
  return {
    ok: false,
    issues: result.error.issues.map((issue) => ({ path: issue.path.join('.') || '(root)', message: issue.message })),
  };
}

/**
 * `parseSubmitPayload`, then the same schema again on what the queue will hold: BullMQ stores a job's
 * data as its JSON text (`JSON.stringify`), and the worker validates that text parsed back. A value whose
 * JSON is not itself (an object with `toJSON`, e.g. metadata `{ toJSON: () => 'x' }`) passes the first
 * check and is refused by the worker; this refuses it here, with the issues of the serialised payload.
 * On success `payload` is what to enqueue: its JSON text is the one that was validated.
 */
export function parseEnqueuedPayload(input: unknown): ParsedPayload {
  const parsed = parseSubmitPayload(input);
  if (!parsed.ok) return parsed;
  const text = jsonText(parsed.payload);
  if (text === undefined) return { ok: false, issues: [{ path: '(root)', message: 'must be serialisable as JSON' }] };
  const stored = parseSubmitPayload(JSON.parse(text));
  if (stored.ok) return parsed;
  return { ok: false, issues: stored.issues.map((issue) => ({ ...issue, message: `${issue.message} (once serialised as JSON)` })) };
}

/**
 * What a rejected event can still say about a payload that failed: the fields as given when they are
 * plain values, else empty (docs/contract.md section 4).
 */
export function describeInvalidPayload(data: unknown): { sequenceId: string; walletId: string; coin: string; metadata: string } {
  const obj = (v: unknown): Record<string, unknown> =>
    v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  const plain = (v: unknown, max: number) =>
    (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v))) && String(v).length <= max ? String(v) : '';
  const root = obj(data);
  const metadata = isPlainObject(root.metadata) ? (jsonText(root.metadata) ?? '') : '';
  return {
    // Text only: a number is not a sequenceId (docs/contract.md section 3), and keying its rejection under its text would
    // make a later, valid transfer with that text a "duplicate" of the rejected job.
    sequenceId: typeof obj(root.halfSigned).sequenceId === 'string' ? plain(obj(root.halfSigned).sequenceId, 256) : '',
    walletId: plain(root.walletId, 64),
    coin: plain(root.coin, 64),
    metadata: Buffer.byteLength(metadata, 'utf8') <= MAX_METADATA_BYTES ? metadata : '',
  };
}
