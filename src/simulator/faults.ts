/**
 * Fault plans per endpoint, and what each fault kind answers.
 *
 * 'timeout' and the 'accept-…' kinds let the request be processed, then lose the answer: 'timeout' never
 * sends one, 'accept-reset' drops the connection, 'accept-malformed' answers a truncated 200 body and
 * 'accept-504' a gateway time-out, and 'accept-500', 'accept-408', 'accept-520', 'accept-522',
 * 'accept-524' that status (a provider failing after it recorded the send, or a proxy in front of it
 * such as a CDN: 520 unknown error, 522 connection timed out, 524 a timeout occurred). Every other kind answers (or drops the socket) instead of processing,
 * so e.g. a send hit by '5xx' was not recorded.
 */
import { SIM_ENDPOINTS } from './settings.ts';
import type { FaultKind, FaultPlan, SimEndpoint } from './settings.ts';

interface ActivePlan {
  plan: FaultPlan;
  /** Next entry of plan.sequence to consume. */
  next: number;
}

/** `E`: the endpoint names of one provider's simulator (the wallet-service one's by default). */
export class FaultBoard<E extends string = SimEndpoint> {
  private plans = new Map<E, ActivePlan>();
  private readonly endpoints: readonly E[];

  constructor(endpoints: readonly E[] = SIM_ENDPOINTS as readonly string[] as readonly E[]) {
    this.endpoints = endpoints;
  }

  set(endpoint: E, plan: FaultPlan | null): void {
    if (plan === null) this.plans.delete(endpoint);
    else this.plans.set(endpoint, { plan: structuredClone(plan), next: 0 });
  }

  clear(): void {
    this.plans.clear();
  }

  /** Decides the fault of one request to `endpoint`; undefined means answer normally. */
  pick(endpoint: E): FaultKind | undefined {
    const active = this.plans.get(endpoint);
    if (!active) return undefined;
    const { plan } = active;
    const sequence = plan.sequence;
    if (sequence && active.next < sequence.length) {
      const entry = sequence[active.next]!;
      active.next += 1;
      return entry === 'ok' ? undefined : entry;
    }
    const kinds = plan.kinds ?? [];
    if (kinds.length === 0 || !(Math.random() < (plan.probability ?? 0))) return undefined;
    return kinds[Math.floor(Math.random() * kinds.length)];
  }

  snapshot(): Partial<Record<E, FaultPlan & { consumed: number }>> {
    const out: Partial<Record<E, FaultPlan & { consumed: number }>> = {};
    for (const endpoint of this.endpoints) {
      const active = this.plans.get(endpoint);
      if (active) out[endpoint] = { ...structuredClone(active.plan), consumed: active.next };
    }
    return out;
  }
}

export interface FaultAnswer {
  status: number;
  headers?: Record<string, string>;
  /** Sent as is, with content-type application/json (also when it is deliberately not JSON). */
  body: string;
}

/** 200 bodies that parse as JSON but break docs/upstream-api.md section 2: wrong types, missing fields. */
const SCHEMA_BREAKING: Record<SimEndpoint, unknown> = {
  token: { access_token: 1234567890, expires_in: '3600' },
  getTransfer: [
    {
      coin: 'eth',
      id: 70000001,
      wallet: '310',
      txid: 12345,
      value: -0.01234567,
      feeString: 0.00021,
      inputs: null,
      type: 'send',
    },
  ],
  sendTransaction: {
    id: 'not-a-number',
    sequenceId: 12345,
    amount: '0.01234567',
    destinationAddress: null,
    timestamp: 1700000000000,
  },
  getWalletTransaction: { result: { id: 'x', txid: 42, fee: 0.00021, wallet: 'hot' } },
  isEnabled: { success: true, data: { outgoingTxn: 'yes', mandatory: 'true', blockTxn: 0 } },
};

/** Truncated JSON: what a proxy cutting a body short would deliver. */
const MALFORMED: Record<SimEndpoint, string> = {
  token: '{"access_token":"eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIi',
  getTransfer: '[{"coin":"eth","id":"70000001","wallet":310,"txid":"0x4f3a',
  sendTransaction: '{"id":150001,"userid":1043,"raw":"{\\"txHex\\":\\"02f8',
  getWalletTransaction: '{"result":{"id":3000001,"txid":"0x9b1c',
  isEnabled: '{"success":true,"data":{"id":42,"appId":1187,"outgoingTxn":',
};

/** The answer of every fault kind but 'timeout' and 'reset', which send none. */
export function faultAnswer(endpoint: SimEndpoint, kind: FaultKind, retryAfterSec: number): FaultAnswer {
  switch (kind) {
    case '5xx':
      return {
        status: 503,
        body: JSON.stringify({ success: false, message: 'service temporarily unavailable (simulated)' }),
      };
    case '429':
      return {
        status: 429,
        headers: { 'retry-after': String(Math.ceil(retryAfterSec)) },
        body: JSON.stringify({ success: false, message: 'too many requests (simulated)' }),
      };
    case '401':
      return {
        status: 401,
        body: JSON.stringify(endpoint === 'token' ? { error: 'invalid_client' } : { success: false, message: 'unauthorized' }),
      };
    case '400':
      return { status: 400, body: JSON.stringify({ success: false, message: 'bad request (simulated)' }) };
    case 'accept-504':
      return { status: 504, body: JSON.stringify({ success: false, message: 'gateway time-out (simulated)' }) };
    case 'accept-500':
    case 'accept-408':
    case 'accept-520':
    case 'accept-522':
    case 'accept-524':
      // A proxy's error page is rarely JSON: the worker must not need a body to read the status.
      return { status: Number(kind.slice('accept-'.length)), body: '<html><body>origin error (simulated)</body></html>' };
    case '404':
      return { status: 404, body: JSON.stringify({ success: false, message: 'not found (simulated)' }) };
    case 'malformed':
    case 'accept-malformed':
      return { status: 200, body: MALFORMED[endpoint] };
    case 'schema':
      return { status: 200, body: JSON.stringify(SCHEMA_BREAKING[endpoint]) };
    case 'success-false':
      return {
        status: 200,
        body: JSON.stringify({ success: false, message: 'request could not be completed (simulated)' }),
      };
    case 'timeout':
    case 'reset':
    case 'accept-reset':
      throw new Error(`fault ${kind} has no answer`);
  }
}
