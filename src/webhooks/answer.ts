import { parseRetryAfter, retryAfterHeader } from '../custody/http/transport.ts';

/**
 * What one try of a delivery came to, as `custody_webhook_attempts_total{result}` counts it:
 * `delivered` (any 2xx), `gone` (410: the endpoint is disabled), `throttled` (429 or 503, with the
 * answer's Retry-After), `redirect` (3xx: never followed), `http-error` (any other status), `timeout`
 * (WEBHOOK_TIMEOUT), `address-refused` (the address check) or `network` (any other failure to get an answer).
 */
export const TRY_RESULTS = ['delivered', 'gone', 'throttled', 'redirect', 'http-error', 'timeout', 'address-refused', 'network'] as const;
export type TryResult = (typeof TRY_RESULTS)[number];

/** The longest wait one Retry-After may impose: the longest step of the default schedule. */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** What a status says. Precedence: 2xx, then 410, then 429/503, then 3xx, then the rest. */
export function classifyStatus(status: number, retryAfter?: string | string[]): { result: TryResult; retryAfterMs?: number } {
  if (status >= 200 && status < 300) return { result: 'delivered' };
  if (status === 410) return { result: 'gone' };
  if (status === 429 || status === 503) {
    // Without the header the schedule alone decides.
    if (retryAfterHeader(retryAfter) === undefined) return { result: 'throttled' };
    return { result: 'throttled', retryAfterMs: Math.min(parseRetryAfter(retryAfter), MAX_RETRY_AFTER_MS) };
  }
  if (status >= 300 && status < 400) return { result: 'redirect' };
  return { result: 'http-error' };
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ABORT_ERR']);

/** What a try that got no answer came to, from its error's code (or name, for an abort). */
export function classifyFailure(error: unknown): TryResult {
  const { code, name, cause } = (error ?? {}) as { code?: unknown; name?: unknown; cause?: unknown };
  if (code === 'WEBHOOK_ADDRESS_REFUSED' || (cause as { code?: unknown } | undefined)?.code === 'WEBHOOK_ADDRESS_REFUSED') {
    return 'address-refused';
  }
  if (name === 'TimeoutError' || name === 'AbortError' || (typeof code === 'string' && TIMEOUT_CODES.has(code))) return 'timeout';
  return 'network';
}

/**
 * When the next try of a delivery whose try number `tried` (1 for the first) failed is due, in ms from
 * now, or undefined when the schedule is spent (the delivery goes to the dead-letter). A Retry-After is
 * honoured as a floor: the next try never comes sooner than the endpoint asked, nor sooner than the
 * schedule says.
 */
export function nextTryDelay(tried: number, schedule: readonly number[], retryAfterMs?: number): number | undefined {
  const scheduled = schedule[tried];
  if (scheduled === undefined) return undefined;
  return Math.max(scheduled, retryAfterMs ?? 0);
}
