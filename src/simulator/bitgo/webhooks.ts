/**
 * The BitGo simulator's `transfer` webhooks (docs/bitgo-api.md section 7): registered per wallet and
 * coin (`POST /api/v2/{coin}/wallet/{walletId}/webhooks`, `{ type: 'transfer', url }`), called with
 * `{ type: 'transfer', wallet, coin, transfer, hash, state }` signed in `x-signature-sha256` (the hex
 * HMAC-SHA256 of the body with the simulator's webhook secret) when a transfer is first seen and when
 * its txid is shown. A target must be a loopback address: the simulator calls nothing else. One try
 * per call, no retry: a lost call is what the worker's scheduled polls are for.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';

export const DEFAULT_BITGO_WEBHOOK_SECRET = 'sim-bitgo-webhook-secret';

/** How long one call may take before it is dropped. */
const CALL_TIMEOUT_MS = 2_000;

export interface BitgoWebhook {
  id: string;
  type: 'transfer';
  coin: string;
  wallet: string;
  url: string;
}

export interface BitgoWebhookCall {
  type: 'transfer';
  wallet: string;
  coin: string;
  transfer: string;
  hash: string;
  state: string;
}

/** Why `url` cannot be a target (undefined: it can): http(s) to 127.0.0.0/8, ::1 or localhost only. */
export function targetProblem(url: unknown): string | undefined {
  if (typeof url !== 'string') return 'url must be a string';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'url must be an absolute http(s) URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'url must be an absolute http(s) URL';
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  return loopback ? undefined : 'the simulator calls loopback addresses only (127.0.0.0/8, ::1, localhost)';
}

export class BitgoWebhooks {
  private hooks: BitgoWebhook[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly calls = new Set<AbortController>();
  /** Calls made since the start (or reset). */
  sent = 0;

  private readonly secret: string;

  constructor(secret: string) {
    this.secret = secret;
  }

  add(wallet: string, coin: string, url: string): BitgoWebhook {
    const hook: BitgoWebhook = { id: randomBytes(16).toString('hex'), type: 'transfer', coin, wallet, url };
    this.hooks.push(hook);
    return hook;
  }

  list(): BitgoWebhook[] {
    return this.hooks.map((hook) => ({ ...hook }));
  }

  /** Calls every webhook of the call's wallet and coin now, or at `at` (ms) when later: `make` is asked then. */
  notify(wallet: string, coin: string, make: () => BitgoWebhookCall | undefined, at = Date.now()): void {
    if (!this.hooks.some((hook) => hook.wallet === wallet && hook.coin === coin)) return;
    const delay = at - Date.now();
    if (delay <= 0) {
      this.callAll(wallet, coin, make());
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.callAll(wallet, coin, make());
    }, delay);
    timer.unref();
    this.timers.add(timer);
  }

  private callAll(wallet: string, coin: string, call: BitgoWebhookCall | undefined): void {
    if (!call) return;
    const body = JSON.stringify(call);
    const signature = createHmac('sha256', this.secret).update(body).digest('hex');
    for (const hook of this.hooks) {
      if (hook.wallet !== wallet || hook.coin !== coin) continue;
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), CALL_TIMEOUT_MS);
      timer.unref();
      this.calls.add(controller);
      this.sent += 1;
      fetch(hook.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-signature-sha256': signature },
        body,
        signal: controller.signal,
      })
        .then((response) => response.arrayBuffer())
        .catch(() => {})
        .finally(() => {
          clearTimeout(timer);
          this.calls.delete(controller);
        });
    }
  }

  /** Forgets every webhook and drops pending and running calls. */
  reset(): void {
    this.hooks = [];
    this.sent = 0;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const call of this.calls) call.abort();
    this.calls.clear();
  }
}
