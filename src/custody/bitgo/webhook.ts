/**
 * BitGo's `transfer` webhook as a wake-up for tracking (custody/port.ts, Wakeups): the call's
 * signature, `x-signature-sha256`, is the hex HMAC-SHA256 of the raw body with BITGO_WEBHOOK_SECRET,
 * compared in constant time; a good one yields the transfer id and the hash (txid) the body names,
 * nothing else. Whatever it names, tracking polls the provider and decides by what the poll finds.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ProviderWakeup } from '../port.ts';
import { transferWebhookSchema } from './schemas.ts';

export const BITGO_WEBHOOK_PATH = '/providers/bitgo/webhook';
export const BITGO_SIGNATURE_HEADER = 'x-signature-sha256';

/** The hex HMAC-SHA256 of `body` with `secret`: what BitGo sends in x-signature-sha256 (the simulator signs with it too). */
export function bitgoSignature(secret: string, body: Buffer | string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Whether `header` is the signature of `body`: in constant time over the digests, whatever the header holds. */
export function signedBy(secret: string, header: string | string[] | undefined, body: Buffer): boolean {
  if (typeof header !== 'string' || !/^[0-9a-fA-F]{64}$/.test(header)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(Buffer.from(header, 'hex'), expected);
}

/** One call of the webhook: forged, or what it names (nothing, when the body is not a transfer webhook). */
export function readBitgoWakeup(
  secret: string,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  body: Buffer,
): ProviderWakeup {
  if (!signedBy(secret, headers[BITGO_SIGNATURE_HEADER], body)) return { kind: 'forged' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return { kind: 'named' };
  }
  const read = transferWebhookSchema.safeParse(parsed);
  if (!read.success) return { kind: 'named' };
  return { kind: 'named', providerTransferId: read.data.transfer, txid: read.data.hash };
}
