/**
 * The `/api/v1` answers as zod schemas, for `/openapi.json` (documentation, not checked at run time;
 * the tests check live answers against the document). docs/contract.md section 5 says what each means.
 */
import { z } from 'zod';
import { cancelResultSchema } from '../../../packages/producer/src/cancel-result.ts';
import { EVENT_TYPES, TRANSFER_STATES } from '../../../packages/producer/src/catalog.ts';
import { ATTENTION_REASONS } from '../../../packages/producer/src/keys.ts';
import { ACTION_OUTCOMES } from '../../operations/audit.ts';
import { transferViewSchema } from '../schemas.ts';

const when = z.iso.datetime({ offset: true }).nullable();
const count = z.number().int().min(0);
/** The cursor of the next page; null at the end. */
const next = z.string().nullable();

const listedItemSchema = z.object({
  sequenceId: z.string(),
  state: z.enum(TRANSFER_STATES),
  version: z.number().int(),
  jobId: z.string(),
  walletId: z.string(),
  coin: z.string(),
  metadata: z.unknown().meta({ description: 'The metadata, redacted as the dashboard redacts it' }),
  attempts: count,
  failures: count,
  lastError: z.string().nullable(),
  txid: z.string().nullable(),
  createdAt: when,
  updatedAt: when,
  submittedAt: when,
  broadcastAt: when,
  sendOutcomeUnknownSince: when,
  unresolvedAt: when,
  sequenceIdInUseSince: when,
  haltedAs: z.string().nullable(),
  haltedSince: when,
  expiredCode: z.string().nullable(),
});

export const listPageSchema = z.object({ items: z.array(listedItemSchema), next });

const timelineItem = z.looseObject({
  at: z.iso.datetime({ offset: true }),
  source: z.enum(['worker', 'provider', 'operator']),
  kind: z.string().meta({ description: 'An event type, operator.<action>, send.*, provider.*' }),
});

export const detailSchema = transferViewSchema.extend({
  counts: z.object({
    sends: count,
    failures: count,
    pollFailures: count,
    unmatchedPolls: count,
    enrichFailures: count,
    upstreamCalls: count,
    lastError: z.string().nullable(),
  }),
  haltedAs: z.string().nullable(),
  timeline: z.array(timelineItem),
  timelineComplete: z.boolean().meta({ description: 'false: the audit read stopped at its bound (10,000 entries)' }),
});

const banner = z.object({ active: z.boolean(), until: when });
export const summarySchema = z.object({
  states: z.record(z.enum(TRANSFER_STATES), count),
  attention: z.record(z.enum(ATTENTION_REASONS), count),
  banners: z.object({
    ledgerRecovery: banner.extend({ message: z.string().optional() }),
    providerPause: banner,
    redisWrites: z.object({ refused: z.boolean(), code: z.string().optional() }),
  }),
});

const actions = Object.keys(ACTION_OUTCOMES) as [keyof typeof ACTION_OUTCOMES, ...Array<keyof typeof ACTION_OUTCOMES>];
const outcomes = [...new Set(Object.values(ACTION_OUTCOMES).flat())] as [string, ...string[]];
export const auditPageSchema = z.object({
  items: z.array(
    z.object({
      id: z.string().meta({ description: 'The audit stream id' }),
      at: z.iso.datetime({ offset: true }),
      user: z.string(),
      role: z.enum(['viewer', 'operator']),
      via: z.enum(['console', 'api', 'cli']),
      remote: z.string(),
      action: z.enum(actions),
      sequenceId: z.string().meta({ description: 'Empty for an action on no transfer (accept-epoch)' }),
      reason: z.string(),
      outcome: z.enum(outcomes),
      forced: z.enum(['true', 'false']),
    }),
  ),
  next,
});

/** `POST /api/v1/transfers/:sequenceId/cancel`: 200 cancelled, 409 too-late or already-ended. */
export const actionCancelSchema = z.intersection(z.looseObject({ sequenceId: z.string() }), cancelResultSchema);

export const resolvedSchema = z.union([
  z.object({
    sequenceId: z.string(),
    resolvedAs: z.enum(['submitted', 'not-sent']),
    version: z.number().int(),
    event: z.enum(EVENT_TYPES),
    streamId: z.string(),
    trackJobId: z.string().optional(),
    forced: z.boolean(),
    checked: z
      .union([
        z.object({ finding: z.literal('found'), transactionId: z.string(), txid: z.string() }),
        z.object({ finding: z.literal('absent') }),
      ])
      .optional(),
  }),
  z
    .object({
      sequenceId: z.string(),
      resolvedAs: z.literal('submitted'),
      version: z.number().int(),
      tracking: z.literal('pending'),
      message: z.string(),
    })
    .meta({ description: 'Resolved and audited; its tracking job is left to reconciliation' }),
]);

export const recheckedSchema = z.object({
  sequenceId: z.string(),
  outcome: z.enum(['promoted', 'polling', 'added']),
  trackJobId: z.string(),
});

const epochState = z.looseObject({
  id: z.string().optional().meta({ description: 'Absent: the ledger has no epoch' }),
  createdAt: z.number(),
  recoveryUntil: z.number(),
  supersedes: z.array(z.string()),
  lostAt: z.number(),
  now: z.number(),
});
export const epochAcceptedSchema = z.object({ before: epochState, state: epochState });

/** `POST /api/v1/transfers`: 202 a new transfer. */
export const submittedSchema = z.object({ sequenceId: z.string(), jobId: z.string() });
/** 200: the same payload again, the transfer as its detail gives it (or queued, before the worker recorded it). */
export const resubmittedSchema = z.union([
  detailSchema.extend({ jobId: z.string() }),
  z.object({ sequenceId: z.string(), jobId: z.string(), state: z.literal('queued') }),
]);
