/**
 * What BitGo's answers prove, by this adapter's own table (docs/bitgo-api.md, "What an answer proves"),
 * and the CustodyErrors its statuses become. BitGo's statuses do not mean what the first provider's do
 * (src/transfers/send-proof.ts): a reused sequenceId is a 400, not a 409, and no 5xx is known to be
 * "not taken" (503 included). Every CustodyError made here carries the proof this table gives
 * (CustodyErrorDetails.proof), so the domain reads BitGo's answers by BitGo's rules.
 */
import type { z } from 'zod';
import { schemaFailure } from '../http/schema-failure.ts';
import type { SendProof } from '../../transfers/send-proof.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from '../errors.ts';
import type { TransportResponse } from '../http/transport.ts';
import { statusError } from '../http/status-error.ts';
import { errorEnvelopeSchema } from './schemas.ts';

/** BitGo's `name` for a second send of a sequenceId the wallet already holds (api.yaml `DuplicateSequenceId`). */
export const DUPLICATE_SEQUENCE_ID = 'DuplicateSequenceIdError';

/** The facts of one answer, as this adapter saw them. */
export type BitgoAnswer =
  /** The request never left: connection refused, DNS or TLS failure, a header refused before writing. */
  | { kind: 'never-written' }
  /** Written, then no complete answer: a time-out or a dropped connection. */
  | { kind: 'no-answer' }
  /**
   * An HTTP status, with the error envelope's `name` when there was one, and for a 2xx what its body
   * held: `transfer` a readable transfer carrying our sequenceId, `pending-approval` a readable
   * PendingApproval, `unreadable` anything else (not JSON, failing the schema, another sequenceId).
   */
  | { kind: 'status'; status: number; name?: string | undefined; body?: 'transfer' | 'pending-approval' | 'unreadable' };

export interface BitgoSendProofRow {
  /** The answers the row covers, in docs/bitgo-api.md's words. */
  answer: string;
  proof: SendProof;
  /** Where the row comes from. */
  basis: string;
  /** Answers of the row (the docs and the unit test check that the table gives each its row's proof). */
  examples: readonly BitgoAnswer[];
  covers(answer: BitgoAnswer): boolean;
}

const isStatus = (answer: BitgoAnswer, ...statuses: number[]): answer is Extract<BitgoAnswer, { kind: 'status' }> =>
  answer.kind === 'status' && statuses.includes(answer.status);
const is2xx = (answer: BitgoAnswer): answer is Extract<BitgoAnswer, { kind: 'status' }> =>
  answer.kind === 'status' && answer.status >= 200 && answer.status < 300;

/**
 * BitGo's send proof table: the first row that covers an answer decides. The last row covers
 * everything: an answer this table does not know may have been processed, never "not taken" (a resend
 * under the same sequenceId is safe with BitGo: it cannot move money twice).
 */
export const BITGO_SEND_PROOF: readonly BitgoSendProofRow[] = [
  {
    answer: '2xx whose `transfer` is readable and carries our sequenceId',
    proof: 'accepted',
    basis: 'api.yaml `v2.wallet.tx.send` 200 `TransactionResponse`',
    examples: [{ kind: 'status', status: 200, body: 'transfer' }],
    covers: (answer) => is2xx(answer) && answer.body === 'transfer',
  },
  {
    answer: '202 with a readable `PendingApproval`: accepted, waiting for an approval (the lookup finds it in `pendingApproval`)',
    proof: 'accepted',
    basis: 'api.yaml `v2.wallet.tx.send` 202; never read as "not taken"',
    examples: [{ kind: 'status', status: 202, body: 'pending-approval' }],
    covers: (answer) => isStatus(answer, 202) && answer.body === 'pending-approval',
  },
  {
    answer: '400 named `DuplicateSequenceIdError`: the sequenceId is taken in this wallet',
    proof: 'conflict',
    basis: "api.yaml `DuplicateSequenceId` under the send's 400 (not 409)",
    examples: [{ kind: 'status', status: 400, name: DUPLICATE_SEQUENCE_ID }],
    covers: (answer) => isStatus(answer, 400) && answer.name === DUPLICATE_SEQUENCE_ID,
  },
  {
    answer: '429',
    proof: 'rate-limited',
    basis: "API overview's status codes; a Retry-After may be absent (then 1 s)",
    examples: [{ kind: 'status', status: 429 }],
    covers: (answer) => isStatus(answer, 429),
  },
  {
    answer: '400 with any other `name` (or none), 401, 403, 404, 423; a request never written',
    proof: 'not-taken',
    basis: 'api.yaml (400 `InvalidWalletId`, `AddressError`…, 423), API overview (401, 403, 404)',
    examples: [
      { kind: 'status', status: 400, name: 'InvalidWalletId' },
      { kind: 'status', status: 400 },
      { kind: 'status', status: 401 },
      { kind: 'status', status: 403 },
      { kind: 'status', status: 404 },
      { kind: 'status', status: 423 },
      { kind: 'never-written' },
    ],
    covers: (answer) => answer.kind === 'never-written' || isStatus(answer, 400, 401, 403, 404, 423),
  },
  {
    answer:
      'every 5xx (503 included), 408, any status not listed above (1xx, 3xx, other 4xx), a 2xx unreadable or not about our sequenceId, a time-out or dropped connection after writing',
    proof: 'maybe-processed',
    basis: 'not documented; no 5xx is known to be "not taken": settled by lookup, then a resend under the same sequenceId',
    examples: [
      { kind: 'status', status: 500 },
      { kind: 'status', status: 503 },
      { kind: 'status', status: 504 },
      { kind: 'status', status: 408 },
      { kind: 'status', status: 409 },
      { kind: 'status', status: 302 },
      { kind: 'status', status: 200, body: 'unreadable' },
      { kind: 'status', status: 202, body: 'unreadable' },
      { kind: 'no-answer' },
    ],
    covers: () => true,
  },
];

/** What an answer proves, by BITGO_SEND_PROOF: its first row that covers the answer. */
export function bitgoSendProof(answer: BitgoAnswer): SendProof {
  return BITGO_SEND_PROOF.find((row) => row.covers(answer))!.proof;
}

/** The error envelope's `name` and `requestId` when the body is one (section 5); never its `error` text. */
export function envelopeOf(text: string): { name?: string | undefined; requestId?: string | undefined } {
  try {
    const parsed = errorEnvelopeSchema.safeParse(JSON.parse(text));
    return parsed.success ? { name: parsed.data.name?.slice(0, 100), requestId: parsed.data.requestId?.slice(0, 100) } : {};
  } catch {
    return {};
  }
}

/**
 * The CustodyError of a non-2xx answer, with the proof of BITGO_SEND_PROOF; undefined for a 2xx.
 * `upstreamMessage` is BitGo's stable `name` and its `requestId` (for BitGo's support), never the
 * human-readable `error`, which may echo our request.
 */
export function errorForStatus(endpoint: CustodyEndpoint, response: TransportResponse): CustodyError | undefined {
  const { status } = response;
  if (status >= 200 && status < 300) return undefined;
  const { name, requestId } = envelopeOf(response.text);
  const proof = bitgoSendProof({ kind: 'status', status, name });
  const upstreamMessage = name === undefined ? undefined : requestId === undefined ? name : `${name} (requestId ${requestId})`;
  // BitGo documents no Retry-After for a 429 here: statusError then pauses 1 s.
  return statusError(response, {
    what: `${endpoint}: HTTP ${status}${name === undefined ? '' : ` ${name}`}`,
    details: { endpoint, httpStatus: status, upstreamMessage, proof },
    duplicate:
      status === 400 && name === DUPLICATE_SEQUENCE_ID && endpoint === 'send' ? 'sequenceId already used in this wallet' : undefined,
    unauthorized: 'access token refused',
  });
}

/** The body as JSON, then the schema; a failure is BAD_RESPONSE with the table's proof for an unreadable 2xx. Names paths, never values. */
export function readBody<S extends z.ZodType>(endpoint: CustodyEndpoint, response: TransportResponse, schema: S): z.output<S> {
  const read = tryBody(endpoint, response, schema);
  if ('unreadable' in read) throw read.unreadable;
  return read.body;
}

/**
 * readBody without the throw: the body, or the BAD_RESPONSE readBody would throw and the field paths
 * where the body broke the schema (`(body)` when it is not JSON), never values.
 */
export function tryBody<S extends z.ZodType>(
  endpoint: CustodyEndpoint,
  response: TransportResponse,
  schema: S,
): { body: z.output<S> } | { unreadable: CustodyError; paths: string[] } {
  let body: unknown;
  try {
    body = JSON.parse(response.text);
  } catch {
    return { unreadable: badResponse(endpoint, response.status, `HTTP ${response.status} body is not JSON`), paths: ['(body)'] };
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return { body: parsed.data };
  const where = schemaFailure(parsed.error);
  const paths = [...new Set(parsed.error.issues.map((issue) => issue.path.join('.') || '(record)'))].slice(0, 5);
  return { unreadable: badResponse(endpoint, response.status, `answer fails the schema (${where})`), paths };
}

/** A 2xx this adapter cannot use: may have been processed (BITGO_SEND_PROOF's last row). */
export function badResponse(endpoint: CustodyEndpoint, status: number, what: string): CustodyError {
  return new CustodyError(CustodyErrorCode.BAD_RESPONSE, `${endpoint}: ${what}`, {
    endpoint,
    httpStatus: status,
    proof: bitgoSendProof({ kind: 'status', status, body: 'unreadable' }),
  });
}
