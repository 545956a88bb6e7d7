import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../../packages/producer/src/catalog.ts';
import { DURATION_GRAMMAR, parseDuration } from '../config/duration.ts';
import { addressRefusal } from './address.ts';

/**
 * WEBHOOK_ENDPOINTS and WEBHOOK_RETRY_SCHEDULE as src/config/config.ts validates them. A problem names
 * the entry by its position and name, never a URL (it may carry credentials) or a secret.
 */

/** An endpoint's name: it is part of Redis keys, consumer group names and metric labels. */
export const ENDPOINT_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** `whsec_` and the standard base64 of at least 16 key bytes (what the specification's library reads). */
const SECRET = /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const MIN_KEY_BYTES = 16;

export interface WebhookEndpoint {
  readonly name: string;
  readonly url: string;
  readonly secrets: readonly string[];
  /** The event types it receives; every type when the entry named none. */
  readonly events: readonly EventType[];
}

const entrySchema = z.object(
  {
    name: z.string({ error: 'name is required' }).regex(ENDPOINT_NAME, 'name must be 1-64 of letters, digits, _ and -'),
    url: z
      .string({ error: 'url is required' })
      .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), 'url must be an http(s) URL'),
    secrets: z
      .array(
        z.string().refine((v) => SECRET.test(v) && Buffer.from(v.slice(6), 'base64').length >= MIN_KEY_BYTES, {
          // Never the value: it is a secret.
          error: `every secret must be whsec_ and the base64 of at least ${MIN_KEY_BYTES} bytes`,
        }),
        { error: 'secrets must be an array of whsec_ secrets' },
      )
      .min(1, 'secrets must hold at least one secret'),
    events: z
      .array(z.enum(EVENT_TYPES, { error: `events must name known event types (${EVENT_TYPES.join(', ')})` }))
      .min(1, 'events, when given, must name at least one type')
      .optional(),
  },
  { error: 'must be an object' },
);

/** The text of WEBHOOK_ENDPOINTS (`@path` read from the file) as endpoints, or the problems (no value quoted). */
export function parseEndpoints(text: string): { endpoints: WebhookEndpoint[] } | { problems: string[] } {
  let json = text;
  if (text.startsWith('@')) {
    try {
      json = readFileSync(text.slice(1), 'utf8');
    } catch (error) {
      return { problems: [`cannot read the file after @ (${(error as NodeJS.ErrnoException).code ?? 'error'})`] };
    }
  }
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return { problems: ['must be a JSON array of endpoints, or @ and the path of a file holding one'] };
  }
  if (!Array.isArray(raw)) return { problems: ['must be a JSON array of endpoints'] };
  const problems: string[] = [];
  const endpoints: WebhookEndpoint[] = [];
  const names = new Set<string>();
  for (const [index, item] of raw.entries()) {
    const result = entrySchema.safeParse(item);
    const named = (item as { name?: unknown } | null)?.name;
    const valid = typeof named === 'string' && ENDPOINT_NAME.test(named);
    const which = `entry ${index + 1}${valid ? ` (${named})` : ''}`;
    if (!result.success) problems.push(...new Set(result.error.issues.map((issue) => `${which}: ${issue.message}`)));
    if (valid && names.has(named)) problems.push(`${which}: name is used by an earlier entry`);
    if (valid) names.add(named);
    if (!result.success) continue;
    const { name, url, secrets, events } = result.data;
    endpoints.push({ name, url, secrets, events: events === undefined ? [...EVENT_TYPES] : [...new Set(events)] });
  }
  if (raw.length === 0) problems.push('must name at least one endpoint (leave it unset for none)');
  return problems.length > 0 ? { problems } : { endpoints };
}

/**
 * What WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE refuse of the endpoints' URLs at start-up: an
 * http:// URL, and a host that is a refused address literal. A name is checked when it resolves, at
 * every connection (src/webhooks/connect.ts).
 */
export function endpointUrlProblems(endpoints: readonly WebhookEndpoint[], allow: { http: boolean; private: boolean }): string[] {
  const problems: string[] = [];
  for (const [index, endpoint] of endpoints.entries()) {
    const url = new URL(endpoint.url);
    const which = `entry ${index + 1} (${endpoint.name})`;
    if (url.protocol !== 'https:' && !allow.http) problems.push(`${which}: url must be https:// unless WEBHOOK_ALLOW_HTTP=1`);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const refused = isIP(host) === 0 ? undefined : addressRefusal(host);
    if (refused !== undefined && !allow.private) {
      problems.push(`${which}: url names a ${refused} address, refused unless WEBHOOK_ALLOW_PRIVATE=1`);
    }
  }
  return problems;
}

/** WEBHOOK_RETRY_SCHEDULE: the delay before each try, the first usually 0; after the last, the dead-letter. */
export function parseRetrySchedule(text: string): number[] | undefined {
  const delays = text.split(',').map((part) => parseDuration(part));
  if (delays.length === 0 || delays.length > 100 || delays.some((ms) => ms === undefined)) return undefined;
  return delays as number[];
}

export const RETRY_SCHEDULE_RULE = `must be 1-100 comma-separated durations (${DURATION_GRAMMAR})`;
