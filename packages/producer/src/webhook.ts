import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors.ts';

export { WebhookVerificationError } from './errors.ts';
export type { WebhookInvalidReason } from './errors.ts';

/** How far `webhook-timestamp` may be from the receiver's clock, either way, by default (the specification's 5 minutes). */
export const DEFAULT_WEBHOOK_TOLERANCE_SECONDS = 300;

/** The body of one of the worker's webhooks (docs/contract.md, "Outbound webhooks"). */
export interface WebhookMessage {
  /** The event type (`transfer.submitted`, …): a newer worker may send types this version does not know. */
  type: string;
  /** When the event happened (ISO 8601): the event's `at`. */
  timestamp: string;
  data: {
    sequenceId: string;
    walletId: string;
    coin: string;
    version: number;
    epoch: string | null;
    /** The event's `data`, parsed. */
    data: unknown;
    /** The transfer's metadata, only the values the worker's DASHBOARD_METADATA_KEYS shows, the rest "[redacted]". */
    metadata: unknown;
  };
}

/** The request's headers: a fetch `Headers`, or Node's `req.headers` (names in lower case), or a plain object. */
export type WebhookHeaders = { get(name: string): string | null } | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from now, in the past or the future (default 300 s). */
  toleranceSeconds?: number;
}

const SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Verifies one webhook request as the Standard Webhooks specification says, and returns its parsed
 * body: `webhook-signature` must hold a `v1,<base64>` signature (of the space-separated list; other
 * versions are ignored) equal to the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under one
 * of `secrets` (each `whsec_` and the base64 of its key: pass the old and the new while rotating),
 * compared in constant time; and `webhook-timestamp` must be within `toleranceSeconds` of now, either
 * way, which bounds how long a captured request can be replayed. `rawBody` is the body exactly as
 * received: a re-serialised copy does not verify. Throws `WebhookVerificationError` (`reason` says
 * which check failed); de-duplicate what it returns by `webhook-id`, the event's stream entry id.
 */
export function verifyWebhook(
  headers: WebhookHeaders,
  rawBody: string | Uint8Array,
  secrets: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookMessage {
  const tolerance = options.toleranceSeconds ?? DEFAULT_WEBHOOK_TOLERANCE_SECONDS;
  if (!Number.isFinite(tolerance) || tolerance < 0) throw new RangeError(`toleranceSeconds must be a number >= 0, got ${tolerance}`);
  const keys = (typeof secrets === 'string' ? [secrets] : secrets).map((secret, index) => secretKey(secret, index));
  if (keys.length === 0) throw new WebhookVerificationError('invalid-secret', 'no secret was given');

  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (id === undefined || timestamp === undefined || signatures === undefined) {
    throw new WebhookVerificationError('missing-headers', 'webhook-id, webhook-timestamp and webhook-signature are required');
  }
  if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError('invalid-timestamp', 'webhook-timestamp must be Unix seconds');
  const now = Math.floor(Date.now() / 1000);
  const sentAt = Number(timestamp);
  if (sentAt < now - tolerance) throw new WebhookVerificationError('timestamp-too-old', `sent more than ${tolerance} s ago`);
  if (sentAt > now + tolerance) throw new WebhookVerificationError('timestamp-too-new', `sent more than ${tolerance} s in the future`);

  const body =
    typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), body]);
  const expected = keys.map((key) => createHmac('sha256', key).update(signed).digest());
  const given = signatures
    .split(' ')
    .filter((part) => part.startsWith('v1,'))
    .map((part) => Buffer.from(part.slice(3), 'base64'));
  // Every pair is compared (no early exit on a match): the time taken says nothing about which matched.
  let matched = false;
  for (const signature of given) {
    for (const digest of expected) {
      if (signature.length === digest.length && timingSafeEqual(signature, digest)) matched = true;
    }
  }
  if (!matched) throw new WebhookVerificationError('no-matching-signature', 'no v1 signature matches any of the secrets');

  let message: unknown;
  try {
    message = JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid-body', 'the body is not JSON');
  }
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    throw new WebhookVerificationError('invalid-body', 'the body is not a JSON object');
  }
  return message as WebhookMessage;
}

/** The key bytes of one secret; the error names its position, never its value. */
function secretKey(secret: string, index: number): Buffer {
  const encoded = typeof secret === 'string' && secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : undefined;
  if (encoded === undefined || encoded === '' || !BASE64.test(encoded)) {
    throw new WebhookVerificationError('invalid-secret', `secret ${index + 1} is not whsec_ and the base64 of a key`);
  }
  return Buffer.from(encoded, 'base64');
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  let value: string | readonly string[] | null | undefined;
  if (typeof headers.get === 'function') value = (headers as { get(name: string): string | null }).get(name);
  else {
    const record = headers as Record<string, string | readonly string[] | undefined>;
    value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  }
  if (Array.isArray(value)) value = value[0] as string | undefined;
  return typeof value === 'string' && value !== '' ? value : undefined;
}
