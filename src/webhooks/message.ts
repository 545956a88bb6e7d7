import { Webhook } from 'standardwebhooks';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { redactMetadata } from '../http/job-view.ts';

/**
 * The body of one event's webhook (docs/contract.md, webhooks): the event's type and time, and its
 * transfer's fields with `data` parsed and `metadata` redacted by the dashboard's one rule
 * (DASHBOARD_METADATA_KEYS). Built once, when the event is queued for an endpoint: every try and
 * replay of it sends the same bytes under the same webhook-id.
 */
export function webhookBody(event: TransferEvent, metadataKeys: readonly string[]): string {
  return JSON.stringify({
    type: event.event,
    timestamp: event.at,
    data: {
      sequenceId: event.sequenceId,
      walletId: event.walletId,
      coin: event.coin,
      version: event.version,
      epoch: event.epoch ?? null,
      data: event.data,
      metadata: redactMetadata(event.metadata, metadataKeys) ?? null,
    },
  });
}

/**
 * What the store queues for one event of the stream: its lane (the transfer's sequenceId, or
 * `@<entry id>` for an event of no transfer), its body, and its time, read from the entry id. The
 * worker's consumer and `webhooks replay` both queue through it, so a replay is the same delivery.
 */
export function queuedEvent(
  event: TransferEvent,
  entryId: string,
  metadataKeys: readonly string[],
  dueAt: number,
): { entryId: string; lane: string; body: string; type: string; dueAt: number; eventAt: number } {
  return {
    entryId,
    lane: event.sequenceId === '' ? `@${entryId}` : event.sequenceId,
    body: webhookBody(event, metadataKeys),
    type: event.event,
    dueAt,
    eventAt: Number(entryId.split('-')[0]),
  };
}

/**
 * The Standard Webhooks headers of one try: `webhook-signature` holds one `v1,<signature>` per secret,
 * space-separated, so a receiver rotating its secret verifies with either. Signed by the
 * specification's own library.
 */
export function webhookHeaders(id: string, body: string, secrets: readonly string[], now: Date): Record<string, string> {
  const signature = secrets.map((secret) => new Webhook(secret).sign(id, now, body)).join(' ');
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': signature,
  };
}
