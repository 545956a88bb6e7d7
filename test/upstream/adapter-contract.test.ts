/**
 * The custody port's contract, one suite for every adapter: each runs against its own simulator over
 * real HTTP (port 0), and must read the same situations the same way in the port's terms (codes and
 * proofs), whatever its provider's statuses say.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BitgoClient } from '../../src/custody/bitgo/client.ts';
import { CustodyErrorCode } from '../../src/custody/errors.ts';
import { EXACT_AMOUNT, type CustodyPort, type RequestHooks, type WalletRef } from '../../src/custody/port.ts';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { startSimulator, type FaultKind, type Simulator } from '../../src/simulator/index.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { failure } from '../helpers/custody-error.ts';

const TRANSPORT = { timeoutMs: 2_000, connectTimeoutMs: 1_000, connections: 8 };

/** What the suite needs of a provider: its simulator, its adapter, and the words for both. */
interface Provider {
  start(): Promise<void>;
  stop(): Promise<void>;
  reset(): void;
  /** The adapter; with `badSecret`, credentials the simulator refuses (that secret returned too). */
  client(badSecret?: string): CustodyPort;
  /** The adapter, knowing that its lookups by sequenceId are narrowed (the first provider finds out by a probe). */
  narrowedClient(): CustodyPort;
  /** The secret the adapter holds (token or client secret). */
  secret(): string;
  wallet: WalletRef;
  fault(endpoint: 'send' | 'lookup', kind: FaultKind): void;
  accepted(sequenceId: string): number;
  /** Every API request the simulator saw (control requests excluded). */
  requests(): number;
}

function walletService(): Provider {
  let sim: Simulator;
  let badSecret: string | undefined;
  return {
    async start() {
      // The first provider's spec shows no sequenceId on listed transfers; its simulator adds it when asked.
      sim = await startSimulator({ port: 0, settings: { includeSequenceIdInTransactions: true } });
    },
    stop: () => sim.close(),
    reset: () => sim.reset(),
    client(bad) {
      badSecret = bad;
      return new CustodyClient({
        ...TRANSPORT,
        sdkUrl: sim.url,
        baseUrl: sim.url,
        clientId: sim.clientId,
        clientSecret: bad ?? sim.clientSecret,
        tokenUrl: `${sim.url}/oauth/token`,
      });
    },
    narrowedClient: () =>
      new CustodyClient({
        ...TRANSPORT,
        sdkUrl: sim.url,
        baseUrl: sim.url,
        clientId: sim.clientId,
        clientSecret: sim.clientSecret,
        tokenUrl: `${sim.url}/oauth/token`,
        narrowing: { narrows: async () => true },
      }),
    secret: () => badSecret ?? sim.clientSecret,
    wallet: { walletId: 310, coin: 'eth' },
    fault: (endpoint, kind) => sim.setFault(endpoint === 'send' ? 'sendTransaction' : 'getTransfer', { sequence: [kind] }),
    accepted: (sequenceId) => sim.stats().sends[sequenceId]?.accepted ?? 0,
    requests: () => sim.requestCount(),
  };
}

function bitgo(): Provider {
  let sim: BitgoSimulator;
  let badSecret: string | undefined;
  return {
    async start() {
      sim = await startBitgoSimulator({ port: 0, accessToken: 'contract-bitgo-token' });
    },
    stop: () => sim.close(),
    reset: () => sim.reset(),
    client(bad) {
      badSecret = bad;
      return new BitgoClient({ ...TRANSPORT, baseUrl: sim.url, accessToken: bad ?? sim.accessToken });
    },
    // BitGo's lookup by sequenceId is narrowed by design (its route answers that sequenceId's transfer or 404).
    narrowedClient: () => new BitgoClient({ ...TRANSPORT, baseUrl: sim.url, accessToken: sim.accessToken }),
    secret: () => badSecret ?? sim.accessToken,
    wallet: { walletId: '5d1f0c9b2a7d4e3f8a6b1c0d9e8f7a6b', coin: 'hteth' },
    fault: (endpoint, kind) => sim.setFault(endpoint === 'send' ? 'sendTransaction' : 'transferBySequenceId', { sequence: [kind] }),
    accepted: (sequenceId) => sim.stats().sends[sequenceId]?.accepted ?? 0,
    requests: () =>
      Object.values(sim.stats().requests).reduce((sum, byStatus) => sum + Object.values(byStatus).reduce((a, b) => a + b, 0), 0),
  };
}

/** Hooks that count what they are told. */
function countingHooks() {
  const seen = { before: 0, after: 0, rateLimited: [] as Array<{ pauseMs: number; retryAfter: string | undefined }> };
  const hooks: RequestHooks = {
    beforeRequest: async () => {
      seen.before += 1;
    },
    afterRequest: () => {
      seen.after += 1;
    },
    onRateLimited: (pauseMs, asked) => {
      seen.rateLimited.push({ pauseMs, retryAfter: asked.retryAfter });
    },
  };
  return { hooks, seen };
}

describe.each([
  { name: 'wallet-service', make: walletService },
  { name: 'bitgo', make: bitgo },
])('custody adapter contract: $name', ({ make }) => {
  const provider = make();
  const clients: CustodyPort[] = [];
  const client = (bad?: string) => {
    const c = provider.client(bad);
    clients.push(c);
    return c;
  };

  beforeAll(() => provider.start());
  afterEach(async () => {
    provider.reset();
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(() => provider.stop());

  it('an accepted send is then found by a lookup of its sequenceId, the record carrying it', async () => {
    const c = client();
    const sequenceId = newSequenceId();
    const accepted = await c.sendTransaction(provider.wallet, sampleSend(sequenceId));
    expect(accepted.sequenceId).toBe(sequenceId);
    const found = await c.getTransfersBySequenceId(provider.wallet, sequenceId);
    expect(found).toHaveLength(1);
    expect(found[0]!.sequenceId).toBe(sequenceId);
    expect(found[0]!.type.toLowerCase()).toBe('send');
    expect(provider.accepted(sequenceId)).toBe(1);
  });

  it('a second send of the same sequenceId fails DUPLICATE with proof conflict, and only one send was accepted', async () => {
    const c = client();
    const sequenceId = newSequenceId();
    await c.sendTransaction(provider.wallet, sampleSend(sequenceId));
    const error = await failure(c.sendTransaction(provider.wallet, sampleSend(sequenceId)));
    expect(error.code).toBe(CustodyErrorCode.DUPLICATE);
    expect(error.proof).toBe('conflict');
    expect(error.maybeProcessed).toBe(false);
    expect(provider.accepted(sequenceId)).toBe(1);
  });

  it("findTransfer names the accepted send's own record: by sequenceId alone, and by what the send's answer stated", async () => {
    const c = client();
    const sequenceId = newSequenceId();
    const accepted = await c.sendTransaction(provider.wallet, sampleSend(sequenceId));
    const alone = await c.findTransfer(provider.wallet, { sequenceId });
    expect(alone).toMatchObject({ kind: 'found', bySequenceId: true, transfer: { sequenceId } });
    const known = { sequenceId, destinationAddress: accepted.destinationAddress, amount: accepted[EXACT_AMOUNT] };
    const stated = await c.findTransfer(provider.wallet, known);
    expect(stated.kind === 'found' && stated.transfer.id).toBe(alone.kind === 'found' && alone.transfer.id);
    expect(stated.others.size).toBe(0);
  });

  it('findTransfer of a sequenceId never used is absent, and makes one lookup', async () => {
    const before = provider.requests();
    const found = await client().findTransfer(provider.wallet, { sequenceId: newSequenceId() });
    expect(found).toMatchObject({ kind: 'absent', sendsListed: 0 });
    expect(provider.requests() - before).toBe(1);
  });

  it('a lookup of an unknown sequenceId answers an empty list', async () => {
    expect(await client().getTransfersBySequenceId(provider.wallet, newSequenceId())).toEqual([]);
  });

  it('a 429 reports onRateLimited and fails RATE_LIMITED with proof rate-limited', async () => {
    provider.fault('send', '429');
    const { hooks, seen } = countingHooks();
    const sequenceId = newSequenceId();
    const error = await failure(client().sendTransaction(provider.wallet, sampleSend(sequenceId), { hooks }));
    expect(error.code).toBe(CustodyErrorCode.RATE_LIMITED);
    expect(error.proof).toBe('rate-limited');
    expect(error.retryAfterMs).toBeGreaterThan(0);
    expect(seen.rateLimited).toHaveLength(1);
    expect(seen.rateLimited[0]!.pauseMs).toBe(error.retryAfterMs);
    expect(provider.accepted(sequenceId)).toBe(0);
  });

  it('a 5xx answer to a send after processing is proof maybe-processed', async () => {
    provider.fault('send', 'accept-504');
    const sequenceId = newSequenceId();
    const error = await failure(client().sendTransaction(provider.wallet, sampleSend(sequenceId)));
    expect(error.httpStatus).toBe(504);
    expect(error.code).toBe(CustodyErrorCode.UNAVAILABLE);
    expect(error.proof).toBe('maybe-processed');
    expect(error.maybeProcessed).toBe(true);
    // it was processed: the lookup settles it
    expect((await client().getTransfersBySequenceId(provider.wallet, sequenceId)).map((t) => t.sequenceId)).toEqual([sequenceId]);
  });

  it('a garbage 200 body is a typed BAD_RESPONSE with proof maybe-processed', async () => {
    for (const kind of ['malformed', 'schema'] as const) {
      provider.fault('send', kind);
      const error = await failure(client().sendTransaction(provider.wallet, sampleSend(newSequenceId())));
      expect(error.code).toBe(CustodyErrorCode.BAD_RESPONSE);
      expect(error.httpStatus).toBe(200);
      expect(error.proof).toBe('maybe-processed');
    }
    provider.fault('lookup', 'malformed');
    const lookup = await failure(client().getTransfersBySequenceId(provider.wallet, newSequenceId()));
    expect(lookup.code).toBe(CustodyErrorCode.BAD_RESPONSE);
  });

  it('findTransfer: a record it cannot read in a narrowed answer is unreadable, never absent, whatever is known', async () => {
    // The simulators' schema-breaking lookup answer: one record that carries no readable sequenceId.
    const c = provider.narrowedClient();
    clients.push(c);
    const sequenceId = newSequenceId();
    for (const known of [
      { sequenceId },
      { sequenceId, transactionId: '70000009' },
      { sequenceId, destinationAddress: '0x00000000000000000000000000000000000000aa', amount: '1' },
    ]) {
      provider.fault('lookup', 'schema');
      expect((await c.findTransfer(provider.wallet, known)).kind).toBe('unreadable');
    }
  });

  it('findTransfer: a lookup answered 5xx, or whose connection dropped, is an error, never a finding', async () => {
    const c = provider.narrowedClient();
    clients.push(c);
    provider.fault('lookup', '5xx');
    expect((await failure(c.findTransfer(provider.wallet, { sequenceId: newSequenceId() }))).code).toBe(CustodyErrorCode.UNAVAILABLE);
    provider.fault('lookup', 'reset');
    expect((await failure(c.findTransfer(provider.wallet, { sequenceId: newSequenceId() }))).code).toBe(CustodyErrorCode.UNAVAILABLE);
  });

  it('bad credentials fail UNAUTHORIZED, nothing sent', async () => {
    const sequenceId = newSequenceId();
    const error = await failure(client('not-the-secret-4c1d').sendTransaction(provider.wallet, sampleSend(sequenceId)));
    expect(error.code).toBe(CustodyErrorCode.UNAUTHORIZED);
    expect(error.proof).toBe('not-taken');
    expect(provider.accepted(sequenceId)).toBe(0);
  });

  it('the hooks run once per request: beforeRequest and afterRequest as many as the requests the provider saw', async () => {
    const c = client();
    const { hooks, seen } = countingHooks();
    const before = provider.requests();
    const sequenceId = newSequenceId();
    await c.sendTransaction(provider.wallet, sampleSend(sequenceId), { hooks });
    await c.getTransfersBySequenceId(provider.wallet, sequenceId, { hooks });
    await c.getTransfersBySequenceId(provider.wallet, newSequenceId(), { hooks });
    provider.fault('lookup', '5xx');
    await failure(c.getTransfersBySequenceId(provider.wallet, sequenceId, { hooks }));
    const made = provider.requests() - before;
    expect(made).toBeGreaterThanOrEqual(4);
    expect(seen.before).toBe(made);
    expect(seen.after).toBe(made);
  });

  it('the secret appears in no error message and no JSON of an error', async () => {
    const errors = [
      await failure(client('very-secret-value-9f2e').sendTransaction(provider.wallet, sampleSend(newSequenceId()))),
      await failure(client('very-secret-value-9f2e').getTransfersBySequenceId(provider.wallet, newSequenceId())),
    ];
    const good = client();
    provider.fault('send', '429');
    errors.push(await failure(good.sendTransaction(provider.wallet, sampleSend(newSequenceId()))));
    provider.fault('send', 'accept-504');
    errors.push(await failure(good.sendTransaction(provider.wallet, sampleSend(newSequenceId()))));
    for (const [index, error] of errors.entries()) {
      const secret = index < 2 ? 'very-secret-value-9f2e' : provider.secret();
      expect(error.message).not.toContain(secret);
      expect(JSON.stringify(error)).not.toContain(secret);
      expect(String(error.upstreamMessage)).not.toContain(secret);
    }
  });
});
