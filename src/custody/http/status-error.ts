import { DEFAULT_MAX_PAUSE_MS } from '../../timing.ts';
import { CustodyError, CustodyErrorCode, type CustodyErrorDetails } from '../errors.ts';
import { parseRetryAfter, retryAfterPause, type TransportResponse } from './transport.ts';

/** What differs between providers in how a non-2xx status reads (each adapter's responses.ts). */
export interface StatusReading {
  /** The start of every message: `${endpoint}: HTTP ${status}` and whatever the provider adds. */
  what: string;
  details: CustodyErrorDetails;
  /** This answer is the provider's "sequenceId already taken" (DUPLICATE), with the phrase to say so. */
  duplicate: string | undefined;
  /** The phrase of a 401: what the provider refused. */
  unauthorized: string;
}

/**
 * The CustodyError of a non-2xx answer, by the codes every adapter shares (401, 404, 429 with its
 * Retry-After pause, 408 and 5xx, any other refusal); undefined for a 2xx.
 */
export function statusError(
  response: TransportResponse,
  { what, details, duplicate, unauthorized }: StatusReading,
): CustodyError | undefined {
  const { status } = response;
  if (status >= 200 && status < 300) return undefined;
  if (duplicate !== undefined) return new CustodyError(CustodyErrorCode.DUPLICATE, `${what}, ${duplicate}`, details);
  if (status === 401) return new CustodyError(CustodyErrorCode.UNAUTHORIZED, `${what}, ${unauthorized}`, details);
  if (status === 404) return new CustodyError(CustodyErrorCode.NOT_FOUND, `${what}, not found`, details);
  if (status === 429) {
    // The transport caps it at CUSTODY_MAX_PAUSE; a response made elsewhere gets the default cap (1 s when absent).
    const retryAfterMs = response.retryAfterMs ?? retryAfterPause(parseRetryAfter(response.headers['retry-after']), DEFAULT_MAX_PAUSE_MS);
    return new CustodyError(CustodyErrorCode.RATE_LIMITED, `${what}, rate limited for ${retryAfterMs} ms`, { ...details, retryAfterMs });
  }
  if (status === 408 || status >= 500) return new CustodyError(CustodyErrorCode.UNAVAILABLE, `${what}, upstream unavailable`, details);
  return new CustodyError(CustodyErrorCode.REJECTED, `${what}, request refused`, details);
}
