/**
 * The point of the request hooks (src/custody/port.ts, RequestHooks): a second provider gets the
 * request budget (CUSTODY_MAX_RPS) and the upstream metrics from the decorators (src/custody/decorators.ts)
 * without a line of budget or metrics code of its own. The adapter here is written in the test: it
 * implements getTransfersBySequenceId with the generic transport (src/custody/http/transport.ts) against
 * the real simulator, and does its one duty: each request carries its call's hooks. Wrapped by the same
 * decorators as the worker's provider (decorate, as src/custody/provider.ts does), every call takes a
 * slot in a real RequestBudget on Redis and is observed; unwrapped, it takes none.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { BudgetClass, RequestBudget } from '../../src/custody/budget.ts';
import { decorate } from '../../src/custody/decorators.ts';
import { CustodyError, CustodyErrorCode } from '../../src/custody/errors.ts';
import { basicAuthorization } from '../../src/custody/http/auth.ts';
import { Transport } from '../../src/custody/http/transport.ts';
import type {
  CallOptions,
  CustodyPort,
  KnownTransfer,
  ListedTransfer,
  ListedTransfers,
  TransferFinding,
  WalletRef,
} from '../../src/custody/port.ts';
import { findInAnswer } from '../../src/custody/matching.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { simulatorClient } from '../helpers/sim-client.ts';

/** A second provider, as small as it gets: one lookup, over the generic transport, no budget, no metrics. */
class MinimalAdapter implements CustodyPort {
  readonly #transport = new Transport({ timeoutMs: 2_000, connectTimeoutMs: 1_000, connections: 2 });
  readonly #url: URL;
  readonly #authorization: string;

  constructor(sim: Simulator) {
    this.#url = new URL(`${sim.url}/api/wallet/get-transfer`);
    this.#authorization = basicAuthorization(sim.clientId, sim.clientSecret);
  }

  async getTransfersBySequenceId(wallet: WalletRef, sequenceId: string, options: CallOptions = {}): Promise<ListedTransfers> {
    const response = await this.#transport.request({
      endpoint: 'lookup',
      url: this.#url,
      method: 'POST',
      headers: { authorization: this.#authorization, accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify({ wallet: { walletId: Number(wallet.walletId), coin: wallet.coin }, sequenceId }),
      signal: options.signal,
      budget: options.budget ?? { klass: BudgetClass.POLL, member: sequenceId },
      // The adapter's whole share of the budget, the metrics and the tracing: pass the call's hooks on.
      hooks: options.hooks,
    });
    if (response.status !== 200)
      throw new CustodyError(CustodyErrorCode.UNAVAILABLE, `getTransfer: HTTP ${response.status}`, { endpoint: 'lookup' });
    const body = JSON.parse(response.text) as unknown;
    const list = Array.isArray(body) ? body : ((body as { data?: unknown[] }).data ?? []);
    return list as ListedTransfer[];
  }

  async findTransfer(wallet: WalletRef, known: KnownTransfer, options: CallOptions = {}): Promise<TransferFinding> {
    return findInAnswer(await this.getTransfersBySequenceId(wallet, known.sequenceId, options), known);
  }

  getTransfersByTxId(): never {
    throw new Error('not implemented');
  }
  getWalletTransaction(): never {
    throw new Error('not implemented');
  }
  getTravelRuleSetting(): never {
    throw new Error('not implemented');
  }
  sendTransaction(): never {
    throw new Error('not implemented');
  }
  walletProblem(): string | undefined {
    return undefined;
  }

  close(): Promise<void> {
    return this.#transport.close();
  }
}

const WALLET = { walletId: 310, coin: 'eth' };
const CALLS = 4;

let sim: Simulator;
const closing: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterEach(async () => {
  sim.reset();
  await Promise.all(closing.splice(0).map((c) => c.close()));
  await closeAllRedis();
});
afterAll(async () => {
  await sim.close();
});

/** A transfer the simulator knows, sent by the first provider's client (not decorated: it takes no slot, is not observed). */
async function seededTransfer(): Promise<string> {
  const sequenceId = newSequenceId();
  const seeder = simulatorClient(sim);
  closing.push(seeder);
  await seeder.sendTransaction(310, sampleSend(sequenceId));
  return sequenceId;
}

/** A RequestBudget on the test Redis at `rps` whose observer writes down every admission. */
function observedBudget(rps: number) {
  const admitted: BudgetClass[] = [];
  const refused: BudgetClass[] = [];
  const budget = new RequestBudget(newRedis(), `${uniquePrefix('decorated-adapter')}:rate`, rps, {
    admitted: (klass) => admitted.push(klass),
    refused: (klass) => refused.push(klass),
  });
  return { budget, admitted, refused };
}

describe('a second adapter wrapped by the decorators', () => {
  it('gets the request budget and the metrics without any code of its own', async () => {
    const sequenceId = await seededTransfer();
    const { budget, admitted, refused } = observedBudget(5);
    const requests: Array<{ endpoint: string; status: string; code: string }> = [];
    const port = decorate(new MinimalAdapter(sim), {
      budget: { budget },
      metrics: (endpoint, status, code) => requests.push({ endpoint, status, code }),
    });
    closing.push(port);
    const requestsBefore = sim.requestCount();
    // Settling lookups reserve their slot and wait for it: at 5 per second, every call is admitted in turn.
    for (let i = 0; i < CALLS; i += 1) {
      const found = await port.getTransfersBySequenceId(WALLET, sequenceId, { budget: { klass: BudgetClass.SETTLE, member: sequenceId } });
      // The simulator lists the seeded transfer (its records carry no sequenceId: upstream API 4.1).
      expect(found.length).toBeGreaterThan(0);
    }
    expect(sim.requestCount() - requestsBefore).toBe(CALLS);
    expect(admitted).toEqual(Array.from({ length: CALLS }, () => BudgetClass.SETTLE));
    expect(refused).toEqual([]);
    expect(requests).toEqual(Array.from({ length: CALLS }, () => ({ endpoint: 'lookup', status: '200', code: 'none' })));
  });

  it('undecorated, the same adapter takes no slot', async () => {
    const sequenceId = await seededTransfer();
    const { admitted } = observedBudget(5);
    const adapter = new MinimalAdapter(sim);
    closing.push(adapter);
    for (let i = 0; i < CALLS; i += 1) await adapter.getTransfersBySequenceId(WALLET, sequenceId);
    expect(admitted).toEqual([]);
  });
});
