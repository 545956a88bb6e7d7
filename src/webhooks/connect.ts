import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { addressRefusal, type RefusedAddress } from './address.ts';

/** A connection the address check refused: nothing was sent (retried like any network error). */
export class WebhookAddressError extends Error {
  readonly code = 'WEBHOOK_ADDRESS_REFUSED';
  readonly kind: RefusedAddress;
  constructor(kind: RefusedAddress) {
    super(`the endpoint resolves to a ${kind} address, refused unless WEBHOOK_ALLOW_PRIVATE=1`);
    this.name = 'WebhookAddressError';
    this.kind = kind;
  }
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * dns.lookup, keeping only the addresses webhooks may go to. It runs inside every connect, on the
 * addresses the socket then uses, so a name that resolves elsewhere between two connections (DNS
 * rebinding) is judged by what it resolves to at that moment, not when the URL was checked.
 */
function guardedLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const refused = addresses.map((entry) => addressRefusal(entry.address));
    const allowed = addresses.filter((_, i) => refused[i] === undefined);
    if (allowed.length === 0) return callback(new WebhookAddressError(refused[0] ?? 'unspecified') as NodeJS.ErrnoException, []);
    if (options.all) return callback(null, allowed);
    callback(null, allowed[0]!.address, allowed[0]!.family);
  });
}

/**
 * The dispatcher of one endpoint's deliveries: a connect time-out, and unless `allowPrivate`, the
 * address check at connect time (an address literal before the socket opens, a name through its
 * lookup). Redirects are never followed: undici follows none without its redirect interceptor.
 */
export function createWebhookAgent(options: { allowPrivate: boolean; timeoutMs: number; connections: number }): Agent {
  const connector = buildConnector({
    timeout: options.timeoutMs,
    ...(options.allowPrivate ? {} : { lookup: guardedLookup as never }),
  });
  return new Agent({
    connections: options.connections,
    connect: (connectOptions, callback) => {
      const refused = !options.allowPrivate && isIP(connectOptions.hostname) !== 0 ? addressRefusal(connectOptions.hostname) : undefined;
      if (refused !== undefined) return callback(new WebhookAddressError(refused), null);
      connector(connectOptions, callback);
    },
  });
}
