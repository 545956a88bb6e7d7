/**
 * The answers of the HTTP routes as zod schemas, for `/openapi.json` (openapi.ts): documentation, never
 * a check at run time. The request schemas are the routes' own, next to them.
 */
import { z } from 'zod';
import { EVENT_TYPES, TRANSFER_STATES } from '../../packages/producer/src/catalog.ts';
import { sequenceIdSchema } from '../../packages/producer/src/sequence-id.ts';
import { API_TAG } from './openapi.ts';

/** An ISO 8601 time, or null when the fact did not happen. */
const when = z.iso.datetime({ offset: true }).nullable();

export const sequenceIdParams = z.object({ sequenceId: sequenceIdSchema });

/** Every refusal: a code, and a message or the issues; some add details (a resolve's `retryAfterSeconds`). */
export const errorBody = z.looseObject({
  error: z.string(),
  message: z.string().optional(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});

/** One entry of the events stream as the routes show it (docs/contract.md section 4), metadata redacted. */
export const transferEventSchema = z.object({
  id: z.string(),
  event: z.enum(EVENT_TYPES),
  sequenceId: z.string(),
  walletId: z.string(),
  coin: z.string(),
  version: z.number().int(),
  at: z.string(),
  epoch: z.string().optional(),
  data: z.looseObject({}).meta({ description: "The event type's data (docs/events.md)" }),
  metadata: z.unknown(),
});

/** `GET /transfers/:sequenceId` (src/ledger/transfer-view.ts). */
export const transferViewSchema = z.object({
  sequenceId: z.string(),
  state: z.enum(TRANSFER_STATES),
  walletId: z.string().optional(),
  coin: z.string().optional(),
  attempts: z.number().int(),
  failures: z.number().int(),
  lastError: z.string().nullable(),
  txid: z.string().nullable(),
  gate: z.unknown(),
  createdAt: when,
  updatedAt: when,
  submittedAt: when,
  sendOutcomeUnknownSince: when,
  unresolvedAt: when,
  sequenceIdInUseSince: when,
  leaseUntil: when,
  version: z.number().int(),
  events: z.array(transferEventSchema),
});

/**
 * A documented route's schema: the tag that puts it in the document, the answers by status (each
 * refusal's code an errorBody unless given), and the request schemas given.
 */
export function documented(
  summary: string,
  schema: { response: Record<number, z.ZodType>; refusals?: readonly number[]; [part: string]: unknown },
) {
  const { response, refusals = [], ...rest } = schema;
  const answers: Record<number, z.ZodType> = Object.fromEntries(refusals.map((status) => [status, errorBody]));
  return { tags: [API_TAG], summary, ...rest, response: Object.assign(answers, response) };
}
