/** Small HTTP helpers for the simulator tests: real sockets, node's global fetch. */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.ts';

export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

export function basicOf(sim: Simulator): string {
  return basic(sim.clientId, sim.clientSecret);
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  const init: RequestInit = {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
  if (signal) init.signal = signal;
  return fetch(url, init);
}

export async function token(sim: Simulator): Promise<string> {
  const res = await postJson(`${sim.url}/oauth/token`, {
    grant_type: 'client_credentials',
    client_id: sim.clientId,
    client_secret: sim.clientSecret,
    audience: 'custody',
  });
  if (res.status !== 200) throw new Error(`token request answered ${res.status}`);
  const body = (await res.json()) as { access_token: string };
  return body.access_token;
}

let counter = 0;

/** A fresh UUID-like sequenceId per call, so tests never collide. */
export function newSequenceId(): string {
  counter += 1;
  return `${crypto.randomUUID().slice(0, 24)}${String(counter).padStart(12, '0')}`;
}

export function sendBody(sequenceId: string, txHex = `02f8b1${Buffer.from(sequenceId).toString('hex')}`): unknown {
  return {
    txHex,
    halfSigned: { txBase64: Buffer.from(txHex, 'hex').toString('base64'), txHex, sequenceId },
  };
}

export async function send(
  sim: Simulator,
  bearer: string,
  sequenceId: string,
  walletId: number | string = 310,
  signal?: AbortSignal,
): Promise<Response> {
  return postJson(`${sim.url}/api/wallet/${walletId}/sendTransaction`, sendBody(sequenceId), { authorization: `Bearer ${bearer}` }, signal);
}

export async function getTransfer(
  sim: Simulator,
  lookup: { sequenceId: string } | { txId: string },
  walletId = 310,
  coin = 'eth',
): Promise<Response> {
  return postJson(
    `${sim.url}/api/wallet/get-transfer`,
    { wallet: { coin, walletId }, ...lookup },
    {
      authorization: basicOf(sim),
    },
  );
}

export async function transfersOf(
  sim: Simulator,
  lookup: { sequenceId: string } | { txId: string },
  walletId = 310,
): Promise<Array<Record<string, unknown>>> {
  const res = await getTransfer(sim, lookup, walletId);
  if (res.status !== 200) throw new Error(`get-transfer answered ${res.status}`);
  return (await res.json()) as Array<Record<string, unknown>>;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * One simulator for the file, reset before each test, with a bearer token ready. Returns a live view:
 * read `ctx.sim` and `ctx.bearer` inside tests, not at module load.
 */
export function useSimulator(options: Partial<SimulatorOptions> = {}): { sim: Simulator; bearer: string } {
  const ctx = {} as { sim: Simulator; bearer: string };
  beforeAll(async () => {
    ctx.sim = await startSimulator({ port: 0, ...options });
    ctx.bearer = await token(ctx.sim);
  });
  afterAll(async () => {
    await ctx.sim.close();
  });
  beforeEach(() => {
    ctx.sim.reset();
  });
  return ctx;
}
