/**
 * `verifyWebhook` (the producer package, node:crypto only) against what the Standard Webhooks reference
 * library signs, and against the headers the worker itself sends (src/webhooks/message.ts): every way
 * a request can be genuine verifies, every way it can be forged, stale or mangled is refused with its
 * reason.
 */
import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verifyWebhook, WebhookVerificationError, type WebhookInvalidReason } from '../../packages/producer/src/index.ts';
import { webhookHeaders } from '../../src/webhooks/message.ts';

const secret = () => `whsec_${randomBytes(24).toString('base64')}`;
const OLD = secret();
const NEW = secret();
const BODY = JSON.stringify({
  type: 'transfer.submitted',
  timestamp: '2026-05-01T12:00:00.000Z',
  data: { sequenceId: 'seq-1', walletId: '310', coin: 'eth', version: 1, epoch: null, data: { txid: 'ab' }, metadata: null },
});
const ID = '1718000000000-0';

/** The headers the reference library's `sign` gives, one `v1,` signature per secret, `secondsAgo` old. */
function signed(secrets: string[], body = BODY, secondsAgo = 0): Record<string, string> {
  const at = new Date(Date.now() - secondsAgo * 1000);
  return {
    'webhook-id': ID,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(ID, at, body)).join(' '),
  };
}

function refusal(run: () => unknown): WebhookInvalidReason | 'accepted' {
  try {
    run();
    return 'accepted';
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerificationError);
    expect((error as WebhookVerificationError).code).toBe('WEBHOOK_INVALID');
    return (error as WebhookVerificationError).reason;
  }
}

describe('verifyWebhook', () => {
  it("returns the parsed body of what the reference library signed, as string, Buffer, Node's or fetch's headers", () => {
    const headers = signed([NEW]);
    expect(verifyWebhook(headers, BODY, NEW)).toEqual(JSON.parse(BODY));
    expect(verifyWebhook(headers, Buffer.from(BODY), [NEW]).data.sequenceId).toBe('seq-1');
    expect(verifyWebhook(new Headers(headers), new TextEncoder().encode(BODY), NEW).type).toBe('transfer.submitted');
    const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), [v]]));
    expect(verifyWebhook(upper, BODY, NEW).data.version).toBe(1);
  });

  it('verifies the headers the worker sends, with either secret while they rotate', () => {
    const headers = webhookHeaders(ID, BODY, [OLD, NEW], new Date());
    expect(verifyWebhook(headers, BODY, OLD).data.sequenceId).toBe('seq-1');
    expect(verifyWebhook(headers, BODY, NEW).data.sequenceId).toBe('seq-1');
    expect(verifyWebhook(signed([NEW]), BODY, [OLD, NEW]).type).toBe('transfer.submitted');
    // A body with multi-byte characters is signed over its UTF-8 bytes.
    const text = JSON.stringify({ type: 'transfer.cancelled', timestamp: 'x', data: { reason: 'annulé ✓' } });
    expect(verifyWebhook(webhookHeaders(ID, text, [NEW], new Date()), Buffer.from(text), NEW).type).toBe('transfer.cancelled');
  });

  it('refuses a changed body, id or timestamp, another secret, and signatures of other versions', () => {
    const headers = signed([NEW]);
    expect(refusal(() => verifyWebhook(headers, BODY.replace('seq-1', 'seq-2'), NEW))).toBe('no-matching-signature');
    expect(refusal(() => verifyWebhook({ ...headers, 'webhook-id': '1718000000000-1' }, BODY, NEW))).toBe('no-matching-signature');
    const later = String(Number(headers['webhook-timestamp']) + 1);
    expect(refusal(() => verifyWebhook({ ...headers, 'webhook-timestamp': later }, BODY, NEW))).toBe('no-matching-signature');
    expect(refusal(() => verifyWebhook(headers, BODY, OLD))).toBe('no-matching-signature');
    const v2 = headers['webhook-signature']!.replace('v1,', 'v1a,');
    expect(refusal(() => verifyWebhook({ ...headers, 'webhook-signature': v2 }, BODY, NEW))).toBe('no-matching-signature');
    expect(refusal(() => verifyWebhook({ ...headers, 'webhook-signature': 'v1,!!!! v1,' }, BODY, NEW))).toBe('no-matching-signature');
  });

  it('refuses a timestamp outside the tolerance either way (300 s by default, or as given)', () => {
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, 290), BODY, NEW))).toBe('accepted');
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, 310), BODY, NEW))).toBe('timestamp-too-old');
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, -310), BODY, NEW))).toBe('timestamp-too-new');
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, 60), BODY, NEW, { toleranceSeconds: 30 }))).toBe('timestamp-too-old');
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, -60), BODY, NEW, { toleranceSeconds: 30 }))).toBe('timestamp-too-new');
    expect(refusal(() => verifyWebhook(signed([NEW], BODY, 3_000), BODY, NEW, { toleranceSeconds: 3_600 }))).toBe('accepted');
    expect(refusal(() => verifyWebhook({ ...signed([NEW]), 'webhook-timestamp': '1e9' }, BODY, NEW))).toBe('invalid-timestamp');
  });

  it('refuses missing headers, a malformed secret and a signed body that is not a JSON object', () => {
    const { 'webhook-signature': _, ...unsigned } = signed([NEW]);
    expect(refusal(() => verifyWebhook(unsigned, BODY, NEW))).toBe('missing-headers');
    expect(refusal(() => verifyWebhook(signed([NEW]), BODY, NEW.slice('whsec_'.length)))).toBe('invalid-secret');
    expect(refusal(() => verifyWebhook(signed([NEW]), BODY, 'whsec_not base64!'))).toBe('invalid-secret');
    expect(refusal(() => verifyWebhook(signed([NEW]), BODY, []))).toBe('invalid-secret');
    expect(refusal(() => verifyWebhook(signed([NEW], '[1]'), '[1]', NEW))).toBe('invalid-body');
    expect(refusal(() => verifyWebhook(signed([NEW], 'not json'), 'not json', NEW))).toBe('invalid-body');
  });

  it('never quotes a secret, a signature or the body in its message', () => {
    const headers = signed([NEW]);
    const messages = [
      () => verifyWebhook(headers, `${BODY} `, OLD),
      () => verifyWebhook(headers, BODY, `whsec_${'*'.repeat(8)}`),
      () => verifyWebhook(signed([NEW], 'not json'), 'not json', NEW),
    ].map((run) => {
      try {
        run();
      } catch (error) {
        return (error as Error).message;
      }
      return '';
    });
    for (const text of [OLD, NEW, headers['webhook-signature']!.slice(3), 'seq-1', 'not json', '****']) {
      expect(messages.join('\n')).not.toContain(text);
    }
  });
});
