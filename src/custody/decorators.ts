/**
 * The request budget, the upstream metrics and the tracing, around any CustodyPort: each decorator
 * adds its hooks (port.ts, RequestHooks) to every call's CallOptions, and the adapter runs them on
 * every HTTP request it makes for that call. A provider gets CUSTODY_MAX_RPS, the
 * `custody_upstream_*` metrics and the spans by being decorated (provider.ts), with no code of its own.
 */
import { BudgetClass, type RequestBudget } from './budget.ts';
import type { CustodyEndpoint } from './errors.ts';
import type { CallOptions, CustodyPort, ProviderRateLimit, RequestHooks } from './port.ts';

/** The budget class of a request whose caller did not say: a token request goes with sends (budget.ts). */
export const DEFAULT_CLASS: Readonly<Record<CustodyEndpoint, BudgetClass>> = {
  token: BudgetClass.SEND,
  send: BudgetClass.SEND,
  gate: BudgetClass.GATE,
  detail: BudgetClass.ENRICH,
  lookup: BudgetClass.POLL,
};

/** Observes one request's outcome (RequestHooks.afterRequest): the upstream metrics. */
export type RequestObserver = RequestHooks['afterRequest'];
/** Wraps one request in a span (RequestHooks.trace). */
export type RequestTracer = NonNullable<RequestHooks['trace']>;

const NO_HOOKS: RequestHooks = {
  beforeRequest: async () => {},
  afterRequest: () => {},
  onRateLimited: () => {},
};

/**
 * `outer`'s hooks, then `inner`'s: `beforeRequest` one after the other (outer first), `afterRequest`
 * and `onRateLimited` both, outer's `trace` around inner's.
 */
export function composeHooks(outer: RequestHooks | undefined, inner: Partial<RequestHooks>): RequestHooks {
  const first = outer ?? NO_HOOKS;
  const composed: RequestHooks = {
    beforeRequest: inner.beforeRequest
      ? async (endpoint, signal, tag) => {
          await first.beforeRequest(endpoint, signal, tag);
          await inner.beforeRequest!(endpoint, signal, tag);
        }
      : (endpoint, signal, tag) => first.beforeRequest(endpoint, signal, tag),
    afterRequest: (endpoint, status, code, durationMs) => {
      first.afterRequest(endpoint, status, code, durationMs);
      inner.afterRequest?.(endpoint, status, code, durationMs);
    },
    onRateLimited: (pauseMs, asked) => {
      first.onRateLimited(pauseMs, asked);
      inner.onRateLimited?.(pauseMs, asked);
    },
  };
  if (first.trace && inner.trace) composed.trace = (endpoint, call) => first.trace!(endpoint, () => inner.trace!(endpoint, call));
  else if (first.trace) composed.trace = (endpoint, call) => first.trace!(endpoint, call);
  else if (inner.trace) composed.trace = (endpoint, call) => inner.trace!(endpoint, call);
  return composed;
}

/**
 * `port` with `hooks` added to every call: composed after the hooks the call already carries (those of
 * its caller, or of a decorator further out), so the outermost decorator's `trace` is the outermost span.
 */
export function withRequestHooks(port: CustodyPort, hooks: Partial<RequestHooks>): CustodyPort {
  const alone = composeHooks(undefined, hooks);
  const add = <O extends CallOptions>(options: O | undefined): O =>
    ({ ...options, hooks: options?.hooks ? composeHooks(options.hooks, hooks) : alone }) as O;
  return {
    sendTransaction: (walletId, request, options) => port.sendTransaction(walletId, request, add(options)),
    findTransfer: (wallet, known, options) => port.findTransfer(wallet, known, add(options)),
    getTransfersBySequenceId: (wallet, sequenceId, options) => port.getTransfersBySequenceId(wallet, sequenceId, add(options)),
    getTransfersByTxId: (wallet, txId, options) => port.getTransfersByTxId(wallet, txId, add(options)),
    getWalletTransaction: (walletId, txid, options) => port.getWalletTransaction(walletId, txid, add(options)),
    ...(port.getTravelRuleSetting ? { getTravelRuleSetting: (options?: CallOptions) => port.getTravelRuleSetting!(add(options)) } : {}),
    walletProblem: (wallet) => port.walletProblem(wallet),
    // Reading a call makes no request; registering is the CLI's one-off call, outside the budget.
    ...(port.wakeups ? { wakeups: port.wakeups } : {}),
    close: () => port.close(),
  };
}

/** What withBudget uses of the shared request budget (budget.ts). */
export type Budget = Pick<RequestBudget, 'take' | 'pause'>;

export interface BudgetHookOptions {
  /**
   * Where a call made on behalf of `member` is counted when the budget admits it (the transfer's ledger
   * record and field), or undefined: not counted. Not asked when the call's tag says `counted`.
   */
  countFor?: (member: string) => { key: string; field: string } | undefined;
  /** A provider's 429 paused every class: until when (ms, Redis clock), or why it could not. */
  onPause?: (pauseMs: number, asked: ProviderRateLimit, outcome: { until: number } | { error: unknown }) => void;
}

/** The budget's hooks: every request takes its slot by class (DEFAULT_CLASS when its tag names none); a 429 pauses every class. */
export function budgetHooks(budget: Budget, options: BudgetHookOptions = {}): Partial<RequestHooks> {
  const { countFor, onPause } = options;
  return {
    beforeRequest: (endpoint, signal, tag) => {
      const member = tag?.member ?? '';
      const count = tag?.counted !== true ? countFor?.(member) : undefined;
      return budget.take(endpoint, tag?.klass ?? DEFAULT_CLASS[endpoint], member, signal, count, tag?.dispensed === true);
    },
    onRateLimited: (pauseMs, asked) => {
      budget.pause(pauseMs).then(
        (until) => onPause?.(pauseMs, asked, { until }),
        (error: unknown) => onPause?.(pauseMs, asked, { error }),
      );
    },
  };
}

/** `port` whose every request takes its slot in `budget` (CUSTODY_MAX_RPS) and whose 429s pause it. */
export function withBudget(port: CustodyPort, budget: Budget, options?: BudgetHookOptions): CustodyPort {
  return withRequestHooks(port, budgetHooks(budget, options));
}

/** `port` whose every request is observed (the `custody_upstream_*` metrics). */
export function withMetrics(port: CustodyPort, observer: RequestObserver): CustodyPort {
  return withRequestHooks(port, { afterRequest: observer });
}

/** `port` whose every request is wrapped by `tracer` (a client span). */
export function withTracing(port: CustodyPort, tracer: RequestTracer): CustodyPort {
  return withRequestHooks(port, { trace: tracer });
}

export interface Decorations {
  budget?: ({ budget: Budget } & BudgetHookOptions) | undefined;
  metrics?: RequestObserver | undefined;
  tracing?: RequestTracer | undefined;
}

/** `port` with those of the budget, the metrics and the tracing that are given; the span is outermost. */
export function decorate(port: CustodyPort, { budget, metrics, tracing }: Decorations): CustodyPort {
  let decorated = port;
  if (budget) decorated = withBudget(decorated, budget.budget, budget);
  if (metrics) decorated = withMetrics(decorated, metrics);
  if (tracing) decorated = withTracing(decorated, tracing);
  return decorated;
}
