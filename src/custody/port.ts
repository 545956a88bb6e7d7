/**
 * The custody port: what the worker needs from a custody provider, in the worker's own terms. Domain
 * code (src/jobs, src/transfers) depends on this file, on errors.ts (what a failed call proves) and on
 * deadline.ts, never on an implementation. The first implementation is src/custody/wallet-service/ (the
 * API of docs/upstream-api.md), over the generic HTTP pieces of src/custody/http/; another provider is
 * one new folder whose client implements CustodyPort, throws CustodyError with the right proof and calls
 * the request hooks (RequestHooks, below), and whose provider.ts exports its descriptor
 * (provider-kind.ts), plus its import and its entry in src/custody/providers.ts. The
 * request budget, the upstream metrics and the tracing are not the adapter's: decorators.ts adds them to
 * every call as hooks, whichever adapter serves it.
 *
 * The record types name what the worker decides by; everything else a provider returns rides along
 * (index signatures) and reaches events as given.
 */

import type { BudgetClass } from './budget.ts';
import type { CustodyEndpoint } from './errors.ts';

/**
 * Where an implementation keeps the exact decimal text of an accepted send's amount (a JSON number's
 * digits may not survive a double): on a symbol key, so it travels with the record but never into JSON.
 */
export const EXACT_AMOUNT: unique symbol = Symbol('exact decimal amount');

/**
 * How many records of a list answer were unreadable and skipped, on a symbol key of the list (never in
 * JSON): matching that relies on "the answer holds exactly one record" must know the answer held more.
 */
export const UNREADABLE: unique symbol = Symbol('unreadable records');

/** A record of a list answer that failed the adapter's schema and was skipped (never its values). */
export interface SkippedRecord {
  index: number;
  /** Where the record broke the schema (field paths, never values). */
  paths: string[];
  /** Whether the skipped record carried the sequenceId the caller looked for. */
  ours: boolean;
}

export interface WalletRef {
  walletId: number | string;
  coin: string;
}

/** A request's place in the shared request budget (budget.ts): its class, and on whose behalf (a sequenceId). */
export interface BudgetTag {
  klass: BudgetClass;
  member: string;
  /**
   * The caller's queue hands out its jobs at the budget's pace, and waits for the slot a refusal
   * names (budget.ts: dispensed requests): the budget keeps no line for it.
   */
  dispensed?: boolean;
  /** The caller counted this call on the transfer's record itself (Ledger.readCounting): the budget does not. */
  counted?: boolean;
}

/** RequestHooks.afterRequest's `status` when no answer came, and its `code` when one did. */
export const NO_ANSWER_STATUS = 'none';

/** What a provider's 429 asked for, as the adapter read it. */
export interface ProviderRateLimit {
  endpoint: CustodyEndpoint;
  /** The Retry-After header as sent (undefined when absent). */
  retryAfter: string | undefined;
  /** What it asks, ms, before the cap (1 s when absent or unusable). */
  askedMs: number;
}

/**
 * What runs around each HTTP request an adapter makes: the request budget, the upstream metrics and the
 * tracing plug in here (decorators.ts), so every adapter gets them without code of its own.
 *
 * The adapter's duty: for EVERY HTTP request it makes on behalf of a call (the call's own request, the
 * token requests it needs and a retry after a 401 included) it calls the call's hooks, through
 * src/custody/http/transport.ts (TransportRequest.hooks) or the same way:
 * - `trace` around all of it, when present;
 * - `beforeRequest` before anything is written (it may wait, or throw what then ends the call with
 *   nothing sent), with the call's BudgetTag; a token request goes with no tag (the budget counts it
 *   with sends: DEFAULT_CLASS in decorators.ts) and without the call's signal (it is shared by
 *   concurrent calls: a call's deadline ends its wait, not the request);
 * - `afterRequest` once the request ended, whatever the outcome (not when `beforeRequest` threw);
 * - `onRateLimited` on a provider's 429, before the call fails with it.
 * A request shared by concurrent calls (one token request) runs the hooks of the call that started it.
 */
export interface RequestHooks {
  /** Takes a slot in the request budget; gives up when `signal` aborts. `tag`: the request's class and member. */
  beforeRequest(endpoint: CustodyEndpoint, signal: AbortSignal | undefined, tag: BudgetTag | undefined): Promise<void>;
  /**
   * Called once per request that `beforeRequest` let through: `status` is the HTTP status as text, or
   * NO_ANSWER_STATUS (`none`) when no answer came; `code` is the error code (CUSTODY_TIMEOUT,
   * CUSTODY_UNAVAILABLE, ...) when no answer came, else `none`.
   */
  afterRequest(endpoint: CustodyEndpoint, status: string, code: string, durationMs: number): void;
  /** The provider answered 429: `pauseMs` is the pause it imposes (its Retry-After, capped at CUSTODY_MAX_PAUSE). */
  onRateLimited(pauseMs: number, asked: ProviderRateLimit): void;
  /** Wraps the whole request, its `beforeRequest` included (a tracing span). */
  trace?<T>(endpoint: CustodyEndpoint, call: () => Promise<T>): Promise<T>;
}

/** Per-call options of the calls the submit path makes under one deadline. */
export interface CallOptions {
  /** What runs around every request this call makes (RequestHooks: the adapter's duty); decorators.ts sets them. */
  hooks?: RequestHooks | undefined;
  /** The request's class in the budget; each call has a default (lookups by sequenceId: `poll`). */
  budget?: BudgetTag;
  /** The overall deadline of the whole call: rate-limit waits, token requests and 401 retries included. */
  signal?: AbortSignal;
  /** Called once per request to the endpoint itself, just before it is written (counts sends). */
  onRequest?: () => void;
  /**
   * Called synchronously immediately before each request to the endpoint itself is written (not token
   * requests); if it throws, that request is not written and the call rejects with what it threw.
   * The send uses it to refuse a write once its lease may have ended (steps/send.ts).
   */
  beforeWrite?: () => void;
}

/** Options of sendTransaction. */
export interface SendOptions extends CallOptions {
  /** Whether the answer's `raw` is read and returned (without its person). Default true. */
  keepRaw?: boolean;
}

/** A half-signed transaction to submit; `halfSigned.sequenceId` is the transfer's idempotency key. */
export interface SendRequest {
  txHex: string;
  halfSigned: { txBase64: string; txHex: string; sequenceId: string };
}

/**
 * The record a provider answers an accepted send with. Destination and amount are there when the
 * provider states them (the first provider always does; BitGo only when one recipient is readable):
 * tracking then may match by them, and by the sequenceId or record id always.
 */
export interface AcceptedSend {
  id: number | string;
  sequenceId: string;
  destinationAddress?: string;
  /** As the provider typed it, in the provider's unit; the exact decimal text is under EXACT_AMOUNT. */
  amount?: number | string;
  [EXACT_AMOUNT]?: string;
  /** The provider's echo of the request, without any person; absent when not asked for. */
  raw?: unknown;
  [key: string]: unknown;
}

/** One output of a listed transfer: tracking matches on address (any letter case) and decimal amount. */
export interface TransferOutput {
  address: string;
  amount: string;
  [key: string]: unknown;
}

/** A transfer as the provider lists it (lookups by sequenceId or txid). */
export interface ListedTransfer {
  id: string;
  /** `send` for outgoing transfers (any letter case). */
  type: string;
  /** '' while not on chain. */
  txid: string;
  /** Present when the provider carries the sequenceId on its records. */
  sequenceId?: string | undefined;
  /**
   * Set by the adapter when the provider says this transfer, without a txid, will not get one unless
   * someone acts: the provider's own name of the state, and whether that state is final. Final: the
   * transfer will never reach the chain (BitGo: `rejected` by an admin, `failed`, `deleted`), and
   * tracking ends it `transfer.halted`. Not final (BitGo: `removed`, dropped by a re-org, which may
   * come back): tracking reports it to operators and goes on.
   */
  halted?: { state: string; final: boolean } | undefined;
  /**
   * Set by the adapter when the provider says the transfer, without a txid, waits for an approval
   * (BitGo: `pendingApproval`): tracking records since when (approvalSince), for operators.
   */
  awaitingApproval?: boolean | undefined;
  outputs: TransferOutput[];
  [key: string]: unknown;
}

export type ListedTransfers = ListedTransfer[] & { [UNREADABLE]?: number };

/**
 * What the worker knows to recognise its transfer among listed ones: always its sequenceId, then what
 * an accepted send or an earlier answer told (the record id; the destination and the decimal amount).
 */
export interface KnownTransfer {
  sequenceId: string;
  /** The provider's record id, once seen. */
  transactionId?: string | undefined;
  destinationAddress?: string | undefined;
  /** Decimal text, in the provider's unit. */
  amount?: string | undefined;
  /**
   * When the first send of the transfer was recorded (the ledger's clock, ms), before its request was
   * written: a record dated earlier (beyond RECORD_DATE_SLACK_MS) is another transfer's, however
   * alike. Undefined: no date is compared (a record of the ledger from before the field existed).
   */
  firstSentAt?: number | undefined;
  /**
   * Which of these records the ledger holds for ANOTHER sequenceId (their record id or txid, stored
   * when that transfer was identified or broadcast): the ids of those records. Such a record is never
   * a candidate. Asked only about records that would be picked without proof (by address and amount,
   * or as the answer's lone record); undefined: nothing is held elsewhere (tests, tools).
   */
  heldByOthers?: ((records: readonly ListedTransfer[]) => Promise<ReadonlySet<string>>) | undefined;
}

/** Fields every finding carries. */
interface FindingBase {
  /**
   * Transfers of other sequenceIds the answer identified (an answer that is not narrowed lists the
   * wallet's other transfers): sequenceId → its one record. Empty for a narrowed answer.
   */
  others: ReadonlyMap<string, ListedTransfer>;
  /** What was compared to recognise the transfer, for logs (never values). */
  compared: readonly string[];
}

/**
 * Which listed transfer is this sequenceId's, if it can be known (CustodyPort.findTransfer):
 * - `found`: exactly this one; `bySequenceId` when the record itself carries the sequenceId;
 * - `absent`: none of the listed transfers can be it; `sendsListed` counts the wallet's other sends listed;
 * - `ambiguous`: several could be, or one could be without proof (no guess is made; nothing is resent
 *   or claimed on it); `bySequenceId` when the candidates carry the sequenceId;
 * - `unreadable`: a record of the sequenceId is there, but could not be read: one that carries it, or
 *   any record of an answer narrowed to the sequenceId (BitGo: a 2xx to the lookup by sequenceId whose
 *   body fails the schema). An answer that cannot be read at all, and does not by itself say that such
 *   a record is there, is a CustodyError (BAD_RESPONSE), like no answer.
 */
export type TransferFinding =
  | (FindingBase & { kind: 'found'; transfer: ListedTransfer; bySequenceId: boolean })
  | (FindingBase & { kind: 'absent'; sendsListed: number })
  | (FindingBase & { kind: 'ambiguous'; candidates: number; bySequenceId?: boolean })
  | (FindingBase & { kind: 'unreadable' });

/** The wallet's view of an on-chain transaction (enriches `transfer.broadcast`; reconciliation compares the txid). */
export interface WalletTransaction {
  txid: string;
  [key: string]: unknown;
}

/** The provider's travel-rule setting: the three fields the gate decides by, the rest passed through. */
export interface TravelRuleSetting {
  outgoingTxn: number;
  mandatory: boolean;
  blockTxn: boolean;
  [key: string]: unknown;
}

/** The travel rule applies to an outgoing transfer when the setting turns it on for outgoing transfers and makes it mandatory. */
export function travelRuleApplies(setting: Pick<TravelRuleSetting, 'outgoingTxn' | 'mandatory'>): boolean {
  return setting.outgoingTxn === 1 && setting.mandatory === true;
}

/**
 * What one call of a provider's webhook names, read by its adapter (CustodyPort.wakeups): the
 * provider's transfer id and the txid, as the caller wrote them, never a fact. The worker only polls
 * the transfer they point at; what the poll finds decides. `forged`: the signature was missing or
 * wrong, and nothing of the body was read.
 */
export type ProviderWakeup = { kind: 'forged' } | { kind: 'named'; providerTransferId?: string | undefined; txid?: string | undefined };

/**
 * How a call of a provider's webhook ended (`custody_provider_webhooks_total{outcome}`): `accepted` woke
 * the transfer's tracking; `duplicate` a call already taken (the same body), or a tracking already due
 * or polling; `unknown` names no transfer of ours (or names nothing); `ignored` names a transfer that
 * is not tracked (not submitted yet, or ended); `forged` a bad signature (401).
 */
export const WAKEUP_OUTCOMES = ['accepted', 'duplicate', 'unknown', 'ignored', 'forged'] as const;
export type WakeupOutcome = (typeof WAKEUP_OUTCOMES)[number];

/**
 * The wake-up capability: a provider that calls a webhook when a transfer changes (BitGo's `transfer`
 * webhook) says where (`path`, registered by src/http/provider-wakeups.ts only when the port has it)
 * and reads a call into what it names. A wake-up is a hint to poll now, never the truth: the domain
 * does not learn the provider's webhook shape, and takes nothing from the body as fact.
 */
export interface Wakeups {
  /** The provider's name, the metric's `provider` label. */
  readonly provider: string;
  /** The route the provider calls, e.g. `/providers/bitgo/webhook` (POST). */
  readonly path: string;
  /** One call: its signature checked over the raw body (in constant time), then what it names. */
  read(headers: Readonly<Record<string, string | string[] | undefined>>, rawBody: Buffer): ProviderWakeup;
  /**
   * Registers the provider's webhook for the wallet to call `url` (the CLI's one-off call; outside the
   * request budget, like the CLI's other lookups). Resolves with the provider's record of it.
   */
  register(wallet: WalletRef, url: string): Promise<Record<string, unknown>>;
}

/**
 * The calls. Every failure is a CustodyError (errors.ts) whose `proof` says what the answer proves
 * about a send; the submit path decides money from that alone.
 */
export interface CustodyPort {
  sendTransaction(wallet: WalletRef, request: SendRequest, options?: SendOptions): Promise<AcceptedSend>;
  /**
   * Looks the transfer up by its sequenceId and says which listed transfer is its own, if that can be
   * known: the provider's matching rules (what its records carry, the precision of its amounts, whether
   * its answers are narrowed) are the adapter's (matching.ts helps). With `txid`, looked up by that
   * txid instead, among the records that carry it (verification of a broadcast transfer).
   */
  findTransfer(wallet: WalletRef, known: KnownTransfer, options?: CallOptions & { txid?: string }): Promise<TransferFinding>;
  /** The raw list answers (the CLI's `get-transfer`): no matching. */
  getTransfersBySequenceId(wallet: WalletRef, sequenceId: string, options?: CallOptions): Promise<ListedTransfers>;
  getTransfersByTxId(wallet: WalletRef, txId: string, options?: CallOptions): Promise<ListedTransfers>;
  getWalletTransaction(wallet: WalletRef, txid: string, options?: CallOptions): Promise<WalletTransaction>;
  /**
   * The travel-rule gate, a capability: a provider that answers "does the travel rule apply, with what
   * setting" has it; one that does not gate leaves it out, and then no transfer is blocked and no gate
   * request is made (docs/providers.md says what its users do instead).
   */
  getTravelRuleSetting?(options?: CallOptions): Promise<TravelRuleSetting>;
  /**
   * What is wrong with this wallet for this provider (the form of its id, its coin), as a message for
   * `transfer.rejected`; undefined when the provider can serve it. Asked before anything else is done
   * with a job, so a wallet id of another provider's form is rejected, never sent.
   */
  walletProblem(wallet: WalletRef): string | undefined;
  /** The wake-up capability (Wakeups): present when the provider calls a webhook and its secret is set. */
  readonly wakeups?: Wakeups | undefined;
  close(): Promise<void>;
}
