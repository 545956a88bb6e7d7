import { z } from 'zod';
import { EVENT_TYPES, TERMINAL_EVENT_TYPES, type EventType } from './catalog.ts';

/**
 * The events stream (docs/contract.md section 4), v1.1. Every entry has the same string fields; `data` is JSON
 * whose shape depends on `event`. Changing a shape here is a breaking change for consumers. The optional
 * `epoch` field is newer: entries without it stay valid.
 */
export { EVENT_TYPES, FailureCode, type EventType } from './catalog.ts';

export const TERMINAL_EVENTS: ReadonlySet<EventType> = new Set(TERMINAL_EVENT_TYPES);

// ---------------------------------------------------------------------------------------------------
// The `data` of each event type. Objects are open (extra keys allowed): within a major version events
// only grow, and a consumer ignores what it does not know. What is named here is always there, typed.
// The JSON Schemas under `schemas/` are generated from these (scripts/generate-schemas.ts): titles and
// descriptions given here with `.meta()` end up there, for producers and consumers in other languages.

const count = z.number().int().nonnegative();
const isoTime = z.iso.datetime().describe('ISO 8601 UTC time with milliseconds');
const decimalText = z.string().regex(/^[0-9]+(\.[0-9]+)?$/);

/** Longest `reason` of a cancel (transfer.cancelled), in characters. */
export const CANCEL_REASON_MAX = 256;
/** Longest `by` of a cancel (transfer.cancelled), in characters. */
export const CANCEL_BY_MAX = 256;
/**
 * One line of free text: at least one character that is not white space, no control characters (a
 * newline, an escape sequence: the text ends up in logs and terminals), at most `max` characters
 * (UTF-16 code units, as JavaScript counts them; JSON Schema counts code points, so it is never stricter).
 */
// eslint-disable-next-line no-control-regex
const ONE_LINE = /^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$/;
function oneLine(max: number) {
  return z.string().max(max).regex(ONE_LINE);
}

/** What a cancel's `reason` (and `by`) must be, in words, for error messages. */
export const CANCEL_TEXT_RULE = `one line of 1-${CANCEL_REASON_MAX} characters, not blank, without control characters`;

/** A provider's record id as text: digits (the first provider), or BitGo's 32 lowercase hex. */
const RECORD_ID = /^(?:[0-9]+|[0-9a-f]{32})$/;

/** 2.1 Transaction as an event carries it: the fields that identify and match it, the rest as upstream sent them. */
export const transactionDataSchema = z
  .looseObject({
    id: z
      .string()
      .regex(/^(?:[0-9]+|[0-9a-f]{32})$/)
      .meta({ description: "The provider's record id: digits, or BitGo's 32 hex" }),
    type: z.string(),
    /** Empty while the transfer is not broadcast yet. */
    txid: z.string(),
    outputs: z.array(z.looseObject({ address: z.string(), amount: decimalText })),
    sequenceId: z.string().optional(),
  })
  .meta({
    description: 'The 2.1 Transaction (get-transfer): documented keys only, as upstream sent them; id, type, txid and outputs checked',
  });

/** 2.4 Submitted transfer record, without `raw` (it echoes the request and carries a person). */
export const submittedRecordSchema = z
  .looseObject({
    id: z.union([count, z.string().regex(RECORD_ID)]),
    sequenceId: z.string().min(1),
    destinationAddress: z
      .string()
      .optional()
      .meta({ description: 'Where the transfer goes, when the provider states it (BitGo: when one recipient is readable)' }),
    amount: z
      .union([z.number().nonnegative(), decimalText])
      .optional()
      .meta({ description: "How much, in the provider's unit (BitGo: base units), when the provider states it" }),
    raw: z.never().optional().meta({ description: "Never present: raw echoes the producer's own request and carries a person" }),
  })
  .meta({ description: 'The 2.4 record sendTransaction answered: documented keys only, without raw' });

const transferSubmitted = z
  .union([
    z.looseObject({ transfer: submittedRecordSchema }),
    z.looseObject({
      transfer: z.null(),
      recoveredBy: z.literal('get-transfer').meta({ description: 'A lookup by sequenceId found the accepted transfer' }),
      transaction: transactionDataSchema,
    }),
    z.looseObject({
      transfer: z.null(),
      recoveredBy: z.literal('duplicate').meta({ description: 'A resend was answered 409: the sequenceId was accepted earlier' }),
    }),
    z.looseObject({
      transfer: z.null(),
      recoveredBy: z.literal('operator').meta({ description: 'An operator resolved the unresolved transfer as submitted' }),
      reason: z.string().min(1).meta({ description: "The operator's reason" }),
    }),
  ])
  .meta({
    title: 'transfer.submitted',
    description:
      'sendTransaction accepted the transfer. `transfer` is the 2.4 record without raw; it is null when acceptance was established otherwise, and `recoveredBy` says how.',
  });

export const EVENT_DATA_SCHEMAS = {
  'transfer.submitted': transferSubmitted,
  'transfer.unresolved': z
    .looseObject({
      code: z.enum(['SEND_OUTCOME_UNKNOWN', 'SEQUENCE_ID_IN_USE']),
      attempts: count.meta({ description: 'sendTransaction requests made' }),
      lastError: z.string().min(1).meta({ description: 'The last error code' }),
    })
    .meta({
      title: 'transfer.unresolved',
      description:
        'Not terminal, at most once per transfer. SEND_OUTCOME_UNKNOWN: a send may have gone out and neither a lookup nor a resend settled it within UNRESOLVED_AFTER. SEQUENCE_ID_IN_USE: the first send was answered 409 although no earlier send of this transfer may have been processed; nothing is claimed or tracked, an operator settles it.',
    }),
  'transfer.broadcast': z
    .looseObject({
      txid: z.string().min(1),
      transaction: transactionDataSchema,
      walletTransaction: z
        .looseObject({ txid: z.string() })
        .nullable()
        .meta({ description: 'The 2.5 wallet transaction, or null when it was not available' }),
    })
    .meta({ title: 'transfer.broadcast', description: 'get-transfer shows the transfer with a non-empty txid. Terminal.' }),
  'transfer.rejected': z
    .looseObject({
      code: z.literal('INVALID_PAYLOAD'),
      issues: z.array(z.looseObject({ path: z.string(), message: z.string() })).min(1),
    })
    .meta({
      title: 'transfer.rejected',
      description: 'The job payload broke docs/contract.md section 3; nothing was sent upstream. Terminal.',
    }),
  'transfer.blocked': z
    .looseObject({
      code: z.literal('TRAVEL_RULE_REQUIRED'),
      setting: z.looseObject({ outgoingTxn: z.number().int(), mandatory: z.boolean(), blockTxn: z.boolean() }),
    })
    .meta({
      title: 'transfer.blocked',
      description: 'The travel rule applies and the job has no travelRule.reference; nothing was sent. Terminal.',
    }),
  'transfer.failed': z
    .looseObject({
      code: z.string().min(1).meta({ description: 'A custody error code (CUSTODY_...), TRAVEL_RULE_UNAVAILABLE or OPERATOR_RESOLVED' }),
      httpStatus: z.number().int().nullable(),
      message: z.string(),
      attempts: count.meta({ description: 'sendTransaction HTTP requests made' }),
      resolvedBy: z.literal('operator').optional(),
    })
    .meta({
      title: 'transfer.failed',
      description:
        'Upstream refused the transfer for good, or retries ran out, and no send may have been accepted; or an operator resolved it as failed. Terminal.',
    }),
  'transfer.expired': z
    .looseObject({
      code: z.enum(['TRACKING_DEADLINE', 'SEND_OUTCOME_UNKNOWN', 'SEQUENCE_ID_IN_USE']),
      submittedAt: isoTime,
      deadline: isoTime,
    })
    .meta({
      title: 'transfer.expired',
      description:
        'No txid by TRACK_DEADLINE after submission (TRACKING_DEADLINE); or, unresolved until then, a send of unknown outcome (SEND_OUTCOME_UNKNOWN) or a sequenceId held by another transaction, none of our sends accepted (SEQUENCE_ID_IN_USE, v1.4). Terminal.',
    }),
  'transfer.cancelled': z
    .looseObject({
      reason: oneLine(CANCEL_REASON_MAX).meta({
        description: `Why it was cancelled: one line of at most ${CANCEL_REASON_MAX} characters, never personal data`,
      }),
      by: oneLine(CANCEL_BY_MAX).meta({
        description: 'Who cancelled it, free text: "cli", "http:<dashboard user>", "http" (loopback without credentials), "producer"',
      }),
    })
    .meta({
      title: 'transfer.cancelled',
      description:
        'Cancelled before any send of it may have been processed (no record yet, received or gated); nothing was sent and nothing ever will be for this sequenceId, under any job id. Terminal. (v1.3)',
    }),
  'transfer.halted': z
    .looseObject({
      state: z
        .string()
        .min(1)
        .max(64)
        .meta({ description: "The provider's own name of the final state (BitGo: rejected, failed, deleted)" }),
      providerTransferId: z.string().regex(RECORD_ID).meta({ description: "The provider's record id of the transfer" }),
    })
    .meta({
      title: 'transfer.halted',
      description:
        'The provider reports a final state in which the transfer will never reach the chain (BitGo: an approver rejected it, or it failed or was deleted before it got a txid). Published once; the sequenceId stays used and is never sent again. Terminal. (v1.4)',
    }),
  'reconcile.completed': z
    .looseObject({
      checked: count,
      resubmitted: count,
      trackersRestored: count,
      unrecoverable: count,
      verified: count,
      mismatches: count,
      verifyErrors: count,
      retentionRemoved: count,
      staleIndexRemoved: count,
      interrupted: z.boolean(),
      durationMs: z.number().nonnegative(),
    })
    .meta({
      title: 'reconcile.completed',
      description: 'One reconciliation run ended (sequenceId empty, version 0): what it checked and repaired.',
    }),
} as const satisfies Record<EventType, z.ZodType>;

/** Whether `text` may be a cancel's `reason` (transfer.cancelled's schema: CANCEL_TEXT_RULE). */
export function isCancelReason(text: unknown): text is string {
  return EVENT_DATA_SCHEMAS['transfer.cancelled'].shape.reason.safeParse(text).success;
}

export type EventData = { [K in EventType]: z.output<(typeof EVENT_DATA_SCHEMAS)[K]> };

/** An event to publish: its type and data of that type's shape (checked again at run time by checkEventData). */
export type EventOf = { [K in EventType]: { type: K; data: EventData[K] } }[EventType];

/** Thrown when data does not match its event type's schema: a bug on the publishing side. */
export class EventShapeError extends Error {
  readonly code = 'EVENT_SHAPE';
  readonly type: EventType;
  readonly paths: string[];
  constructor(type: EventType, paths: string[]) {
    super(`${type} data does not match its schema at ${paths.join(', ')}`);
    this.name = 'EventShapeError';
    this.type = type;
    this.paths = paths;
  }
}

/** Checks one event's data against its schema (the worker does before it publishes); throws EventShapeError. */
export function checkEventData<K extends EventType>(type: K, data: unknown): EventData[K] {
  const parsed = EVENT_DATA_SCHEMAS[type].safeParse(data);
  if (!parsed.success) throw new EventShapeError(type, issuePaths(parsed.error.issues));
  return parsed.data as EventData[K];
}

/** Where data broke its schema (paths, never values); inside a union, the paths of every branch. */
function issuePaths(issues: readonly z.core.$ZodIssue[], prefix: PropertyKey[] = []): string[] {
  const paths = issues.flatMap((issue): string[] => {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union' && issue.errors.length > 0) return issue.errors.flatMap((branch) => issuePaths(branch, path));
    return [path.map(String).join('.') || '(root)'];
  });
  return [...new Set(paths)];
}

interface EventBase {
  /** Stream entry id. */
  id: string;
  sequenceId: string;
  walletId: string;
  coin: string;
  version: number;
  at: string;
  metadata: unknown;
  /**
   * The ledger's epoch (its "life") when the event was published: after Redis lost its data the worker
   * starts a new epoch, and a transfer enqueued again lives a second life whose versions start again at
   * 1. Absent on entries without the field (published before epochs existed) or with it empty.
   * `(epoch, sequenceId, version)` identifies an event.
   */
  epoch?: string;
}

/** One entry of the events stream, typed by its `event`: switch on it and `data` has that type's shape. */
export type TransferEvent = { [K in EventType]: EventBase & { event: K; data: EventData[K] } }[EventType];

const entrySchema = z.object({
  event: z.enum(EVENT_TYPES),
  sequenceId: z.string(),
  walletId: z.string(),
  coin: z.string(),
  version: z.string().regex(/^\d+$/).transform(Number),
  at: z.string(),
  data: z.string(),
  metadata: z.string(),
  /** Optional: entries published before epochs existed have none. */
  epoch: z.string().optional(),
});

/** Turns one XRANGE/XREAD entry into a typed TransferEvent; throws on an entry that is not ours. */
export function parseStreamEntry([id, fields]: [string, string[]]): TransferEvent {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!;
  const { epoch, ...entry } = entrySchema.parse(record);
  return {
    id,
    ...entry,
    // Absent rather than empty, so `event.epoch === undefined` covers both kinds of older entry.
    ...(epoch ? { epoch } : {}),
    data: checkEventData(entry.event, JSON.parse(entry.data)),
    metadata: entry.metadata === '' ? null : JSON.parse(entry.metadata),
  } as TransferEvent;
}
