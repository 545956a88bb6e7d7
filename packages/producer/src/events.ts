import { z } from 'zod';

/**
 * The events stream (CONTRACT section 4), v1.1. Every entry has the same string fields; `data` is JSON
 * whose shape depends on `event`. Changing a shape here is a breaking change for consumers.
 */
export const EVENT_TYPES = [
  'transfer.submitted',
  'transfer.unresolved',
  'transfer.broadcast',
  'transfer.rejected',
  'transfer.blocked',
  'transfer.failed',
  'transfer.expired',
  'reconcile.completed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const TERMINAL_EVENTS: ReadonlySet<EventType> = new Set([
  'transfer.broadcast',
  'transfer.rejected',
  'transfer.blocked',
  'transfer.failed',
  'transfer.expired',
]);

export const FailureCode = {
  INVALID_PAYLOAD: 'INVALID_PAYLOAD',
  TRAVEL_RULE_REQUIRED: 'TRAVEL_RULE_REQUIRED',
  TRAVEL_RULE_UNAVAILABLE: 'TRAVEL_RULE_UNAVAILABLE',
  TRACKING_DEADLINE: 'TRACKING_DEADLINE',
  /** A send may have gone out and neither a lookup nor a resend settled it (unresolved, then expired). */
  SEND_OUTCOME_UNKNOWN: 'SEND_OUTCOME_UNKNOWN',
  /** An operator resolved a transfer as failed (CLI `resolve --as failed`). */
  OPERATOR_RESOLVED: 'OPERATOR_RESOLVED',
} as const;

export interface TransferEvent {
  /** Stream entry id. */
  id: string;
  event: EventType;
  sequenceId: string;
  walletId: string;
  coin: string;
  version: number;
  at: string;
  data: unknown;
  metadata: unknown;
}

const entrySchema = z.object({
  event: z.enum(EVENT_TYPES),
  sequenceId: z.string(),
  walletId: z.string(),
  coin: z.string(),
  version: z.string().regex(/^\d+$/).transform(Number),
  at: z.string(),
  data: z.string(),
  metadata: z.string(),
});

/** Turns one XRANGE/XREAD entry into a TransferEvent; throws on an entry that is not ours. */
export function parseStreamEntry([id, fields]: [string, string[]]): TransferEvent {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!;
  const entry = entrySchema.parse(record);
  return {
    id,
    ...entry,
    data: JSON.parse(entry.data),
    metadata: entry.metadata === '' ? null : JSON.parse(entry.metadata),
  };
}
