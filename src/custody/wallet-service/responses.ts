import type { z } from 'zod';
import { schemaFailure } from '../http/schema-failure.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from '../errors.ts';
import { ExactNumber, failureEnvelopeSchema } from './schemas.ts';
import type { TransportResponse } from '../http/transport.ts';
import { statusError } from '../http/status-error.ts';

/** Maps a non-2xx status to its CustodyError; returns quietly for 2xx. */
export function throwForStatus(endpoint: CustodyEndpoint, response: TransportResponse): void {
  const { status } = response;
  if (status >= 200 && status < 300) return;
  throw statusError(response, {
    what: `${endpoint}: HTTP ${status}`,
    details: { endpoint, httpStatus: status, upstreamMessage: upstreamMessage(response.text) },
    // A 409 to a send: the provider knows the sequenceId (classify-send.ts decides what that means).
    duplicate: status === 409 && endpoint === 'send' ? 'sequenceId conflict' : undefined,
    unauthorized: 'credentials refused',
  });
}

/**
 * The body as JSON. Numbers under the keys in `exact` are read as ExactNumber (value and their own
 * text), for amounts whose digits must not go through a double.
 */
export function parseJsonBody(endpoint: CustodyEndpoint, response: TransportResponse, exact?: ReadonlySet<string>): unknown {
  try {
    if (!exact) return JSON.parse(response.text);
    return JSON.parse(response.text, (key, value, context?: { source?: string }) =>
      typeof value === 'number' && exact.has(key) && context?.source !== undefined ? new ExactNumber(value, context.source) : value,
    );
  } catch {
    throw new CustodyError(CustodyErrorCode.BAD_RESPONSE, `${endpoint}: HTTP ${response.status} body is not JSON`, {
      endpoint,
      httpStatus: response.status,
    });
  }
}

/**
 * The whole answer handling of one call: status, JSON, the `{ success: false }` envelope (an error
 * even on HTTP 200), then the schema. Schema failures name paths, never values.
 */
export function readResponse<S extends z.ZodType>(
  endpoint: CustodyEndpoint,
  response: TransportResponse,
  schema: S,
  exact?: ReadonlySet<string>,
): z.output<S> {
  throwForStatus(endpoint, response);
  const body = parseJsonBody(endpoint, response, exact);
  const failure = failureEnvelopeSchema.safeParse(body);
  if (failure.success) {
    throw new CustodyError(CustodyErrorCode.REJECTED, `${endpoint}: HTTP ${response.status} with success: false`, {
      endpoint,
      httpStatus: response.status,
      upstreamMessage: clip(failure.data.message),
    });
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const where = schemaFailure(parsed.error);
    throw new CustodyError(CustodyErrorCode.BAD_RESPONSE, `${endpoint}: answer fails the schema (${where})`, {
      endpoint,
      httpStatus: response.status,
    });
  }
  return parsed.data;
}

function upstreamMessage(text: string): string | undefined {
  try {
    const parsed = failureEnvelopeSchema.partial({ success: true }).safeParse(JSON.parse(text));
    return parsed.success ? clip(parsed.data.message) : undefined;
  } catch {
    return undefined;
  }
}

function clip(message: string | undefined): string | undefined {
  return message === undefined ? undefined : message.slice(0, 200);
}
