/**
 * The custody decorators (src/custody/decorators.ts) over a fake CustodyPort whose every call makes
 * requests the way an adapter must (src/custody/port.ts, RequestHooks): a token request with no budget
 * tag, then the call's own request with its tag, each inside the call's hooks. The decorators put their
 * hooks on every call, compose them with those the call carries, and so reach every request.
 */
import { describe, expect, it } from 'vitest';
import { BudgetClass } from '../../src/custody/budget.ts';
import { budgetHooks, composeHooks, decorate, DEFAULT_CLASS, withRequestHooks } from '../../src/custody/decorators.ts';
import type { CustodyEndpoint } from '../../src/custody/errors.ts';
import {
  EXACT_AMOUNT,
  type AcceptedSend,
  type BudgetTag,
  type CallOptions,
  type CustodyPort,
  type ListedTransfers,
  type RequestHooks,
} from '../../src/custody/port.ts';

/** A fake adapter: each call makes a token request (no tag) and then its own request, answered 200 (429 when told). */
function fakePort(answer: { status: number } = { status: 200 }) {
  const seen: Array<{ call: string; options: CallOptions | undefined }> = [];
  let closed = 0;
  const request = async (
    endpoint: CustodyEndpoint,
    hooks: RequestHooks | undefined,
    signal: AbortSignal | undefined,
    tag: BudgetTag | undefined,
  ) => {
    const run = async () => {
      await hooks?.beforeRequest(endpoint, signal, tag);
      if (answer.status === 429) hooks?.onRateLimited(2_000, { endpoint, retryAfter: '2', askedMs: 2_000 });
      hooks?.afterRequest(endpoint, String(answer.status), 'none', 1);
    };
    await (hooks?.trace ? hooks.trace(endpoint, run) : run());
  };
  const call = async (name: string, endpoint: CustodyEndpoint, options: CallOptions | undefined, tag: BudgetTag) => {
    seen.push({ call: name, options });
    // A token request: no tag, and not the call's signal (it is shared by concurrent calls).
    await request('token', options?.hooks, undefined, undefined);
    await request(endpoint, options?.hooks, options?.signal, options?.budget ?? tag);
  };
  const list = [] as ListedTransfers;
  const port: CustodyPort = {
    async sendTransaction(_walletId, request, options) {
      await call('send', 'send', options, { klass: BudgetClass.SEND, member: request.halfSigned.sequenceId });
      const sequenceId = request.halfSigned.sequenceId;
      return { id: 1, sequenceId, destinationAddress: '0x1', amount: '1', [EXACT_AMOUNT]: '1' } satisfies AcceptedSend;
    },
    async findTransfer(_wallet, known, options) {
      await call('findTransfer', 'lookup', options, { klass: BudgetClass.POLL, member: known.sequenceId });
      return { kind: 'absent', others: new Map(), compared: [], sendsListed: 0 };
    },
    async getTransfersBySequenceId(_wallet, sequenceId, options) {
      await call('getTransfersBySequenceId', 'lookup', options, { klass: BudgetClass.POLL, member: sequenceId });
      return list;
    },
    async getTransfersByTxId(_wallet, txId, options) {
      await call('getTransfersByTxId', 'lookup', options, { klass: BudgetClass.VERIFY, member: txId });
      return list;
    },
    async getWalletTransaction(_walletId, txid, options) {
      await call('detail', 'detail', options, { klass: BudgetClass.ENRICH, member: txid });
      return { txid };
    },
    async getTravelRuleSetting(options) {
      await call('getTravelRuleSetting', 'gate', options, { klass: BudgetClass.GATE, member: '' });
      return { outgoingTxn: 0, mandatory: false, blockTxn: false };
    },
    walletProblem: () => undefined,
    async close() {
      closed += 1;
    },
  };
  return { port, seen, closed: () => closed };
}

/** Hooks that write what they see to `log`, each line prefixed with `name`. */
function recording(name: string, log: string[]): RequestHooks {
  return {
    beforeRequest: async (endpoint, _signal, tag) => {
      log.push(`${name} before ${endpoint} ${tag ? `${tag.klass}/${tag.member}` : '-'}`);
    },
    afterRequest: (endpoint, status) => log.push(`${name} after ${endpoint} ${status}`),
    onRateLimited: (pauseMs, asked) => log.push(`${name} 429 ${asked.endpoint} ${pauseMs}`),
    trace: async (endpoint, call) => {
      log.push(`${name} span ${endpoint} {`);
      try {
        return await call();
      } finally {
        log.push(`${name} } ${endpoint}`);
      }
    },
  };
}

const WALLET = { walletId: 310, coin: 'eth' };
const SEND = { txHex: 'aa', halfSigned: { txBase64: 'qg==', txHex: 'aa', sequenceId: 'seq-1' } };

/** Every call of the port, once. */
async function callEverything(port: CustodyPort, options?: CallOptions): Promise<void> {
  await port.sendTransaction(WALLET, SEND, options);
  await port.findTransfer(WALLET, { sequenceId: 'seq-1' }, options);
  await port.getTransfersBySequenceId(WALLET, 'seq-1', options);
  await port.getTransfersByTxId(WALLET, '0xabc', options);
  await port.getWalletTransaction(WALLET, '0xabc', options);
  await port.getTravelRuleSetting!(options);
}

describe('withRequestHooks', () => {
  it('puts its hooks on every call, and they run for every request the call makes', async () => {
    const fake = fakePort();
    const log: string[] = [];
    const { trace: _trace, ...hooks } = recording('d', log);
    await callEverything(withRequestHooks(fake.port, hooks));
    expect(fake.seen.map((s) => s.call)).toEqual([
      'send',
      'findTransfer',
      'getTransfersBySequenceId',
      'getTransfersByTxId',
      'detail',
      'getTravelRuleSetting',
    ]);
    expect(fake.seen.every((s) => s.options?.hooks !== undefined)).toBe(true);
    expect(log).toEqual([
      'd before token -',
      'd after token 200',
      'd before send send/seq-1',
      'd after send 200',
      'd before token -',
      'd after token 200',
      'd before lookup poll/seq-1',
      'd after lookup 200',
      'd before token -',
      'd after token 200',
      'd before lookup poll/seq-1',
      'd after lookup 200',
      'd before token -',
      'd after token 200',
      'd before lookup verify/0xabc',
      'd after lookup 200',
      'd before token -',
      'd after token 200',
      'd before detail enrich/0xabc',
      'd after detail 200',
      'd before token -',
      'd after token 200',
      'd before gate gate/',
      'd after gate 200',
    ]);
  });

  it("keeps the call's other options as given, and closes the port it wraps", async () => {
    const fake = fakePort();
    const signal = new AbortController().signal;
    const beforeWrite = () => {};
    const onRequest = () => {};
    const budget: BudgetTag = { klass: BudgetClass.SETTLE, member: 'seq-1', counted: true, dispensed: false };
    const decorated = withRequestHooks(fake.port, { afterRequest: () => {} });
    await decorated.sendTransaction(WALLET, SEND, { signal, beforeWrite, onRequest, budget, keepRaw: false });
    expect(fake.seen[0]!.options).toMatchObject({ signal, beforeWrite, onRequest, budget, keepRaw: false });
    await decorated.close();
    expect(fake.closed()).toBe(1);
  });

  it("composes with the hooks the call carries: the caller's first, its trace outermost", async () => {
    const fake = fakePort({ status: 429 });
    const log: string[] = [];
    const decorated = withRequestHooks(fake.port, recording('inner', log));
    await decorated.getTravelRuleSetting!({ hooks: recording('caller', log) });
    expect(log).toEqual([
      'caller span token {',
      'inner span token {',
      'caller before token -',
      'inner before token -',
      'caller 429 token 2000',
      'inner 429 token 2000',
      'caller after token 429',
      'inner after token 429',
      'inner } token',
      'caller } token',
      'caller span gate {',
      'inner span gate {',
      'caller before gate gate/',
      'inner before gate gate/',
      'caller 429 gate 2000',
      'inner 429 gate 2000',
      'caller after gate 429',
      'inner after gate 429',
      'inner } gate',
      'caller } gate',
    ]);
  });

  it('nested decorators compose the same way: the outer one is the caller of the inner one', async () => {
    const fake = fakePort();
    const log: string[] = [];
    const decorated = withRequestHooks(withRequestHooks(fake.port, recording('inner', log)), recording('outer', log));
    await decorated.getWalletTransaction(WALLET, '0xabc');
    expect(log.slice(0, 6)).toEqual([
      'outer span token {',
      'inner span token {',
      'outer before token -',
      'inner before token -',
      'outer after token 200',
      'inner after token 200',
    ]);
  });

  it("a refusal by the caller's beforeRequest ends the request before the decorator's", async () => {
    const fake = fakePort();
    const log: string[] = [];
    const refusing: RequestHooks = {
      ...recording('caller', log),
      beforeRequest: async () => {
        throw new Error('refused');
      },
    };
    const decorated = withRequestHooks(fake.port, recording('inner', log));
    await expect(decorated.getTransfersByTxId(WALLET, '0xabc', { hooks: refusing })).rejects.toThrow('refused');
    expect(log).toEqual(['caller span token {', 'inner span token {', 'inner } token', 'caller } token']);
  });
});

describe('composeHooks', () => {
  it('without hooks of the call, the given ones alone (absent ones do nothing)', async () => {
    const log: string[] = [];
    const hooks = composeHooks(undefined, { afterRequest: (endpoint, status) => log.push(`${endpoint} ${status}`) });
    await hooks.beforeRequest('token', undefined, undefined);
    hooks.onRateLimited(1, { endpoint: 'token', retryAfter: undefined, askedMs: 1 });
    hooks.afterRequest('token', '200', 'none', 1);
    expect(hooks.trace).toBeUndefined();
    expect(log).toEqual(['token 200']);
  });
});

/** A fake RequestBudget: what take and pause were asked. */
function fakeBudget(pause: () => Promise<number> = async () => 1_234) {
  const takes: unknown[][] = [];
  const pauses: number[] = [];
  return {
    takes,
    pauses,
    budget: {
      take: async (...args: unknown[]) => {
        takes.push(args);
      },
      pause: async (ms: number) => {
        pauses.push(ms);
        return pause();
      },
    },
  };
}

describe('decorate: budget, metrics, tracing', () => {
  it('every request of every call takes a budget slot, is observed and traced, and counts on its transfer unless counted', async () => {
    const fake = fakePort();
    const { budget, takes } = fakeBudget();
    const observed: string[] = [];
    const spans: string[] = [];
    const decorated = decorate(fake.port, {
      budget: { budget, countFor: (member) => (member.startsWith('seq-') ? { key: `transfer:${member}`, field: 'calls' } : undefined) },
      metrics: (endpoint, status, code) => observed.push(`${endpoint} ${status} ${code}`),
      tracing: (endpoint, call) => {
        spans.push(endpoint);
        return call();
      },
    });
    await decorated.getTransfersBySequenceId(WALLET, 'seq-1', { budget: { klass: BudgetClass.POLL, member: 'seq-1', dispensed: true } });
    await decorated.getTransfersBySequenceId(WALLET, 'seq-2', { budget: { klass: BudgetClass.SETTLE, member: 'seq-2', counted: true } });
    await decorated.getTravelRuleSetting!();
    const signal = new AbortController().signal;
    await decorated.sendTransaction(WALLET, SEND, { signal });
    expect(takes).toEqual([
      // A token request has no tag: it goes with sends, on nobody's behalf.
      ['token', DEFAULT_CLASS.token, '', undefined, undefined, false],
      ['lookup', BudgetClass.POLL, 'seq-1', undefined, { key: 'transfer:seq-1', field: 'calls' }, true],
      ['token', BudgetClass.SEND, '', undefined, undefined, false],
      // Counted by the caller on the record itself: the budget does not count it again.
      ['lookup', BudgetClass.SETTLE, 'seq-2', undefined, undefined, false],
      ['token', BudgetClass.SEND, '', undefined, undefined, false],
      ['gate', BudgetClass.GATE, '', undefined, undefined, false],
      ['token', BudgetClass.SEND, '', undefined, undefined, false],
      ['send', BudgetClass.SEND, 'seq-1', signal, { key: 'transfer:seq-1', field: 'calls' }, false],
    ]);
    expect(observed).toEqual([
      'token 200 none',
      'lookup 200 none',
      'token 200 none',
      'lookup 200 none',
      'token 200 none',
      'gate 200 none',
      'token 200 none',
      'send 200 none',
    ]);
    expect(spans).toEqual(['token', 'lookup', 'token', 'lookup', 'token', 'gate', 'token', 'send']);
  });

  it('only what is given: metrics alone take no budget slot and open no span', async () => {
    const fake = fakePort();
    const observed: string[] = [];
    await decorate(fake.port, { metrics: (endpoint, status) => observed.push(`${endpoint} ${status}`) }).getWalletTransaction(
      WALLET,
      '0xabc',
    );
    expect(observed).toEqual(['token 200', 'detail 200']);
    expect(fake.seen[0]!.options?.hooks?.trace).toBeUndefined();
    expect(decorate(fake.port, {})).toBe(fake.port);
  });

  it("a provider's 429 pauses the budget and reports until when, or why it could not", async () => {
    const until = fakeBudget();
    const reports: unknown[] = [];
    const hooks = budgetHooks(until.budget, {
      onPause: (pauseMs, asked, outcome) => reports.push({ pauseMs, endpoint: asked.endpoint, ...outcome }),
    });
    hooks.onRateLimited!(2_000, { endpoint: 'lookup', retryAfter: '2', askedMs: 2_000 });
    const error = new Error('redis away');
    const failing = fakeBudget(() => Promise.reject(error));
    budgetHooks(failing.budget, { onPause: (pauseMs, asked, outcome) => reports.push({ pauseMs, endpoint: asked.endpoint, ...outcome }) })
      .onRateLimited!(500, { endpoint: 'send', retryAfter: undefined, askedMs: 1_000 });
    // Nothing unhandled either without a report.
    budgetHooks(failing.budget).onRateLimited!(500, { endpoint: 'token', retryAfter: undefined, askedMs: 500 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(until.pauses).toEqual([2_000]);
    expect(failing.pauses).toEqual([500, 500]);
    expect(reports).toEqual([
      { pauseMs: 2_000, endpoint: 'lookup', until: 1_234 },
      { pauseMs: 500, endpoint: 'send', error },
    ]);
  });
});
