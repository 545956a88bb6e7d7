import { z } from 'zod';
import { CustodyError, CustodyErrorCode } from '../errors.ts';
import type { Transport, TransportResponse } from './transport.ts';
import type { RequestHooks } from '../port.ts';
import { DEFAULT_TOKEN_LIFETIME_MS, MAX_TOKEN_RENEW_MARGIN_MS } from '../../timing.ts';

/**
 * `Authorization` value for HTTP Basic over `<id>:<secret>` (wallet-service: its `{sdk_url}` endpoints,
 * upstream API section 5).
 */
export function basicAuthorization(clientId: string, clientSecret: string): string {
  return `Basic ${Buffer.from(`${clientId}:${clientSecret}`, 'utf8').toString('base64')}`;
}

export interface TokenProvider {
  /**
   * A bearer token believed valid now. `hooks`: those of the call that needs it; a token request made
   * for it runs them (custody/port.ts, RequestHooks).
   */
  token(hooks?: RequestHooks): Promise<string>;
  /** Drop `token` after upstream refused it; returns whether a different one can be had. */
  invalidate(token: string): boolean;
}

/** A fixed `CUSTODY_ACCESS_TOKEN`: nothing to renew, so a 401 is final. */
export class StaticTokenProvider implements TokenProvider {
  readonly #token: string;
  constructor(token: string) {
    this.#token = token;
  }
  async token(): Promise<string> {
    return this.#token;
  }
  invalidate(): boolean {
    return false;
  }
}

export interface OAuthTokenOptions {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  audience?: string | undefined;
  /**
   * The token endpoint's answer as JSON, or the provider's CustodyError for a failed one: how statuses
   * and error bodies read is the provider's (wallet-service/responses.ts).
   */
  readAnswer: (response: TransportResponse) => unknown;
  now?: () => number;
}

/** OAuth2 token answer: `expires_in` as a number or numeric text; `token_type`, when given, must say bearer. */
export const tokenResponseSchema = z.object({
  // Visible ASCII only (RFC 6750's b64token is a subset): a token of spaces or control characters
  // could not travel in an Authorization header as given (HTTP trims and refuses them).
  access_token: z.string().regex(/^[\x21-\x7e]+$/, 'expected a token of visible ASCII characters'),
  expires_in: z
    .union([
      z.number().positive(),
      z
        .string()
        .regex(/^\d+(\.\d+)?$/)
        .transform(Number),
      z.null(),
    ])
    .optional()
    .transform((value) => (value === null || value === 0 ? undefined : value)),
  token_type: z
    .union([z.string(), z.null()])
    .optional()
    .refine((value) => value === undefined || value === null || value.toLowerCase() === 'bearer', 'expected token_type bearer'),
});

/**
 * OAuth2 client credentials (docs/contract.md section 2). One token cached per process, renewed ahead of
 * `expires_in`, and at most one token request in flight at a time (concurrent callers share it: the
 * request runs the hooks of the caller that started it).
 */
export class OAuthTokenProvider implements TokenProvider {
  readonly #transport: Transport;
  readonly #options: OAuthTokenOptions;
  readonly #now: () => number;
  #cached: { token: string; renewAt: number } | undefined;
  #inflight: Promise<string> | undefined;

  constructor(transport: Transport, options: OAuthTokenOptions) {
    this.#transport = transport;
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  async token(hooks?: RequestHooks): Promise<string> {
    if (this.#cached && this.#now() < this.#cached.renewAt) return this.#cached.token;
    this.#inflight ??= this.#fetch(hooks).finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  invalidate(token: string): boolean {
    if (this.#cached?.token === token) this.#cached = undefined;
    return true;
  }

  async #fetch(hooks: RequestHooks | undefined): Promise<string> {
    const body = {
      grant_type: 'client_credentials',
      client_id: this.#options.clientId,
      client_secret: this.#options.clientSecret,
      ...(this.#options.audience ? { audience: this.#options.audience } : {}),
    };
    const response = await this.#transport.request({
      endpoint: 'token',
      url: new URL(this.#options.tokenUrl),
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      // No budget tag: the budget counts a token request with sends (DEFAULT_CLASS, custody/decorators.ts).
      hooks,
    });
    const parsed = tokenResponseSchema.safeParse(this.#options.readAnswer(response));
    if (!parsed.success) {
      throw new CustodyError(CustodyErrorCode.BAD_RESPONSE, 'token: answer is not a token response', { endpoint: 'token' });
    }
    const lifetimeMs = parsed.data.expires_in ? parsed.data.expires_in * 1000 : DEFAULT_TOKEN_LIFETIME_MS;
    const margin = Math.min(MAX_TOKEN_RENEW_MARGIN_MS, lifetimeMs / 10);
    this.#cached = { token: parsed.data.access_token, renewAt: this.#now() + lifetimeMs - margin };
    return parsed.data.access_token;
  }
}
