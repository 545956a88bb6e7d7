import type { z } from 'zod';
import { basicAuthorization, OAuthTokenProvider, StaticTokenProvider, type TokenProvider } from '../http/auth.ts';
import { CustodyError, CustodyErrorCode, isCustodyError, type CustodyEndpoint } from '../errors.ts';
import { parseJsonBody, readResponse, throwForStatus } from './responses.ts';
import { BudgetClass } from '../budget.ts';
import { randomUUID } from 'node:crypto';
import { LIST_AMOUNT_PLACES } from '../../lib/decimal.ts';
import type { NarrowingMemo } from '../lookup-narrowing.ts';
import { findInAnswer, txidEquals } from '../matching.ts';
import {
  UNREADABLE,
  type BudgetTag,
  type CallOptions,
  type CustodyPort,
  type KnownTransfer,
  type ListedTransfers,
  type RequestHooks,
  type SendOptions,
  type SendRequest,
  type TransferFinding,
  type WalletRef,
} from '../port.ts';
// Re-exported for callers of this client (tests): the port owns them.
export { travelRuleApplies, type CallOptions, type SendOptions, type WalletRef } from '../port.ts';
import {
  isEnabledResponseSchema,
  parseTransactionList,
  sendTransactionResponseSchema,
  sendTransactionResponseWithoutRawSchema,
  transactionListSchema,
  type SkippedRecord,
  type TransactionList,
  walletTransactionResponseSchema,
  type SubmittedTransfer,
  type Transaction,
  type TravelRuleSetting,
  type WalletTransaction,
} from './schemas.ts';
import { Transport, type TransportOptions, type TransportRequest } from '../http/transport.ts';

export interface CustodyClientOptions extends TransportOptions {
  sdkUrl: string;
  baseUrl: string;
  clientId: string;
  clientSecret: string;
  tokenUrl?: string | undefined;
  tokenAudience?: string | undefined;
  accessToken?: string | undefined;
  /**
   * Called when a get-transfer answer held records that fail the schema: they were skipped, and
   * matching ran among the others. `ours` marks a skipped record that carried the sequenceId looked
   * for (the one record that mattered is unreadable).
   */
  onSkippedRecords?: (endpoint: CustodyEndpoint, skipped: readonly SkippedRecord[]) => void;
  /** Where whether this provider narrows its lookups is kept (lookup-narrowing.ts); absent: never narrowed. */
  narrowing?: NarrowingMemo | undefined;
}

/** The body of a send, as the port defines it. */
export type SendTransactionBody = SendRequest;

const WALLET_ID = /^\d{1,20}$/;

/** This provider's send and wallet-transaction paths name the wallet alone (its coin is not in them): a bare id is enough. */
function walletIdOf(wallet: WalletRef | number | string): number | string {
  return typeof wallet === 'object' ? wallet.walletId : wallet;
}
/** 2.4 keys whose JSON numbers are read with their own text: the amount decides a match. */
const EXACT_KEYS: ReadonlySet<string> = new Set(['amount']);
/** An upstream message that says "nothing found" (a `success: false` answer to a lookup). */
const NOT_FOUND_MESSAGE = /not\s*found|no\s+(transfers?|transactions?|records?|results?|data)\b|does\s+not\s+exist/i;
/** A txid is one plain token: starts alphanumeric (so never `.` or `..`), no slash, no percent. */
const TXID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;

/**
 * The custody API (docs/upstream-api.md section 4). Each method validates its inputs before any request is made,
 * validates the answer with zod, and throws CustodyError with a fixed code for everything else. Every
 * request a call makes (token requests and a 401's retry included) carries the call's `options.hooks`
 * (custody/port.ts, RequestHooks): the budget, the metrics and the tracing come from there.
 */
export class CustodyClient implements CustodyPort {
  readonly #transport: Transport;
  readonly #tokens: TokenProvider;
  readonly #basic: string;
  readonly #sdkUrl: string;
  /** Parsed once: the tracker's poll is the most frequent request there is. */
  readonly #getTransferUrl: URL;
  readonly #baseUrl: string;
  readonly #onSkippedRecords: CustodyClientOptions['onSkippedRecords'];
  readonly #narrowing: NarrowingMemo | undefined;

  constructor(options: CustodyClientOptions) {
    this.#onSkippedRecords = options.onSkippedRecords;
    this.#narrowing = options.narrowing;
    this.#transport = new Transport(options);
    this.#basic = basicAuthorization(options.clientId, options.clientSecret);
    this.#sdkUrl = options.sdkUrl.replace(/\/+$/, '');
    this.#getTransferUrl = new URL(`${this.#sdkUrl}/api/wallet/get-transfer`);
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    if (options.tokenUrl) {
      this.#tokens = new OAuthTokenProvider(this.#transport, {
        tokenUrl: options.tokenUrl,
        clientId: options.clientId,
        clientSecret: options.clientSecret,
        audience: options.tokenAudience,
        readAnswer: (response) => {
          throwForStatus('token', response);
          return parseJsonBody('token', response);
        },
      });
    } else if (options.accessToken) {
      this.#tokens = new StaticTokenProvider(options.accessToken);
    } else {
      throw new Error('CustodyClient needs tokenUrl or accessToken');
    }
  }

  /**
   * 4.1, matched (matching.ts): this provider's records may carry no sequenceId, its lists write
   * amounts at LIST_AMOUNT_PLACES, and whether an answer is narrowed to the sequenceId is found out
   * by a probe (lookup-narrowing.ts).
   */
  async findTransfer(wallet: WalletRef, known: KnownTransfer, options: CallOptions & { txid?: string } = {}): Promise<TransferFinding> {
    const { txid, ...call } = options;
    const answer =
      txid === undefined
        ? await this.#bySequenceId(wallet, known.sequenceId, call)
        : await this.#byTxId(wallet, txid, call, known.sequenceId);
    const transactions: ListedTransfers =
      txid === undefined ? answer.transactions : answer.transactions.filter((tx) => txidEquals(tx.txid, txid));
    if (txid !== undefined && answer.transactions[UNREADABLE] !== undefined) transactions[UNREADABLE] = answer.transactions[UNREADABLE];
    const narrowing = this.#narrowing;
    return findInAnswer(transactions, known, {
      amountPlaces: LIST_AMOUNT_PLACES,
      walletId: wallet.walletId,
      unreadableOurs: answer.skipped.filter((record) => record.ours).length,
      // By txid, the records kept are those carrying it: the txid itself narrows the answer.
      narrows:
        txid !== undefined
          ? async () => true
          : narrowing
            ? () =>
                narrowing.narrows(wallet, async () => {
                  const probe = `probe-${randomUUID()}`;
                  const list = await this.getTransfersBySequenceId(wallet, probe, {
                    signal: call.signal,
                    hooks: call.hooks,
                    budget: { klass: BudgetClass.SETTLE, member: probe },
                  });
                  return list.length === 0;
                })
            : undefined,
    });
  }

  /** 4.1 by sequenceId. The list may hold other transfers of the wallet too (upstream API 4.1 leaves it open). */
  async getTransfersBySequenceId(wallet: WalletRef, sequenceId: string, options: CallOptions = {}): Promise<Transaction[]> {
    return (await this.#bySequenceId(wallet, sequenceId, options)).transactions;
  }

  /** 4.1 by txId, for `send` and `receive`. */
  async getTransfersByTxId(wallet: WalletRef, txId: string, options: CallOptions = {}): Promise<Transaction[]> {
    return (await this.#byTxId(wallet, txId, options)).transactions;
  }

  #bySequenceId(wallet: WalletRef, sequenceId: string, options: CallOptions) {
    const body = { wallet: walletBody(wallet), sequenceId: nonEmpty('sequenceId', sequenceId) };
    return this.#getTransfer(body, options, options.budget ?? { klass: BudgetClass.POLL, member: sequenceId }, sequenceId);
  }

  /** `ours`: the sequenceId whose records, when unreadable, are reported as ours (SkippedRecord.ours). */
  #byTxId(wallet: WalletRef, txId: string, options: CallOptions, ours?: string) {
    const body = { wallet: walletBody(wallet), txId: nonEmpty('txId', txId) };
    return this.#getTransfer(body, options, options.budget ?? { klass: BudgetClass.VERIFY, member: txId }, ours);
  }

  /**
   * 4.2. A 409 becomes CUSTODY_DUPLICATE: that sequenceId was accepted before. With `options.signal` the
   * whole call (rate-limit wait, token requests, the send, a 401 and its retry) ends at one deadline.
   */
  async sendTransaction(
    wallet: WalletRef | number | string,
    body: SendTransactionBody,
    options: SendOptions = {},
  ): Promise<SubmittedTransfer> {
    const path = `/api/wallet/${encodeURIComponent(walletPathId('send', walletIdOf(wallet)))}/sendTransaction`;
    const payload = JSON.stringify({
      txHex: body.txHex,
      halfSigned: { txBase64: body.halfSigned.txBase64, txHex: body.halfSigned.txHex, sequenceId: body.halfSigned.sequenceId },
    });
    const record = await this.#withBearer(
      'send',
      (authorization) => ({
        endpoint: 'send',
        url: new URL(this.#baseUrl + path),
        method: 'POST',
        headers: { authorization, accept: 'application/json', 'content-type': 'application/json' },
        body: payload,
        signal: options.signal,
        onDispatch: options.onRequest,
        beforeWrite: options.beforeWrite,
        budget: options.budget ?? { klass: BudgetClass.SEND, member: body.halfSigned.sequenceId },
        hooks: options.hooks,
      }),
      options.keepRaw === false ? sendTransactionResponseWithoutRawSchema : sendTransactionResponseSchema,
      options,
      EXACT_KEYS,
    );
    if (record.sequenceId !== body.halfSigned.sequenceId) {
      // An accepted answer about another transfer: garbage for this one, and the send may have gone out.
      throw new CustodyError(CustodyErrorCode.BAD_RESPONSE, 'send: the answer names another sequenceId', {
        endpoint: 'send',
        httpStatus: 200,
        maybeProcessed: true,
      });
    }
    return record;
  }

  /** 4.3. A 404 is CUSTODY_NOT_FOUND; the caller decides whether that means "not yet". */
  async getWalletTransaction(wallet: WalletRef | number | string, txid: string, options: CallOptions = {}): Promise<WalletTransaction> {
    if (!TXID.test(txid)) throw invalid('detail', 'txid must be one plain token of letters, digits and ._:-');
    const path = `/api/wallet/${encodeURIComponent(walletPathId('detail', walletIdOf(wallet)))}/txid/${encodeURIComponent(txid)}`;
    const answer = await this.#withBearer(
      'detail',
      (authorization) => ({
        endpoint: 'detail',
        url: new URL(this.#baseUrl + path),
        method: 'GET',
        headers: { authorization, accept: 'application/json' },
        signal: options.signal,
        budget: options.budget ?? { klass: BudgetClass.ENRICH, member: txid },
        hooks: options.hooks,
      }),
      walletTransactionResponseSchema,
      options,
    );
    return answer.result;
  }

  /** 4.4. The rule applies when `outgoingTxn === 1 && mandatory` (see travelRuleApplies). */
  async getTravelRuleSetting(options: CallOptions = {}): Promise<TravelRuleSetting> {
    const response = await this.#transport.request({
      endpoint: 'gate',
      url: new URL(`${this.#sdkUrl}/api/travel-rule/is-enabled`),
      method: 'POST',
      headers: { authorization: this.#basic, accept: 'application/json' },
      signal: options.signal,
      budget: options.budget ?? { klass: BudgetClass.GATE, member: '' },
      hooks: options.hooks,
    });
    return readResponse('gate', response, isEnabledResponseSchema).data;
  }

  walletProblem(wallet: WalletRef): string | undefined {
    // This provider's wallet ids are positive integers (docs/upstream-api.md 2.3); the payload keeps a
    // BitGo-form id (32 hex) as text, which is another provider's.
    if (typeof wallet.walletId === 'number') return undefined;
    return "must be a positive integer: CUSTODY_PROVIDER=wallet-service takes this provider's wallet ids, not a 32-hex BitGo id";
  }

  async close(): Promise<void> {
    await this.#transport.close();
  }

  /**
   * 4.1. "Nothing found" may come as `[]`, as a 404, or as `success: false` with a not-found message
   * (upstream API section 7 shows no errors; docs/upstream-api.md, assumptions): all three are an empty list. The list is parsed record
   * by record: an odd record is skipped and reported, never fails the rest.
   */
  async #getTransfer(
    body: object,
    options: CallOptions,
    budget: BudgetTag,
    sequenceId?: string,
  ): Promise<{ transactions: TransactionList; skipped: SkippedRecord[] }> {
    let list: unknown[];
    try {
      list = readResponse('lookup', await this.#request(body, options, budget), transactionListSchema);
    } catch (error) {
      if (isNotFound(error)) return { transactions: [], skipped: [] };
      throw error;
    }
    const parsed = parseTransactionList(list, sequenceId);
    if (parsed.skipped.length > 0) this.#onSkippedRecords?.('lookup', parsed.skipped);
    return parsed;
  }

  #request(body: object, { signal, hooks }: CallOptions, budget: BudgetTag) {
    return this.#transport.request({
      signal,
      budget,
      hooks,
      endpoint: 'lookup',
      url: this.#getTransferUrl,
      method: 'POST',
      headers: { authorization: this.#basic, accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /**
   * Bearer calls: on a 401 the token is dropped and the call made once more with a fresh one. Safe for
   * sendTransaction too: a 401 means upstream refused the request, so nothing was sent.
   */
  async #withBearer<S extends z.ZodType>(
    endpoint: CustodyEndpoint,
    build: (authorization: string) => TransportRequest,
    schema: S,
    { signal, hooks }: CallOptions,
    exact?: ReadonlySet<string>,
  ): Promise<z.output<S>> {
    const token = await this.#bearerToken(endpoint, signal, hooks);
    try {
      return readResponse(endpoint, await this.#transport.request(build(`Bearer ${token}`)), schema, exact);
    } catch (error) {
      if (!isCustodyError(error, CustodyErrorCode.UNAUTHORIZED) || !this.#tokens.invalidate(token)) throw error;
      const fresh = await this.#bearerToken(endpoint, signal, hooks);
      return readResponse(endpoint, await this.#transport.request(build(`Bearer ${fresh}`)), schema, exact);
    }
  }

  /**
   * A token for a bearer call. When the token request fails, the call itself was never made: a token
   * answer that timed out or was unreadable says "maybe processed" about the token request, and passing
   * that on would make a send that never left look as if it may have gone out (and such a send is
   * never failed for good, only resolved again and again).
   */
  async #bearerToken(endpoint: CustodyEndpoint, signal: AbortSignal | undefined, hooks: RequestHooks | undefined): Promise<string> {
    try {
      // The token request is shared by concurrent callers: a caller's deadline ends its wait, not the request.
      return await untilAborted(this.#tokens.token(hooks), signal, endpoint);
    } catch (error) {
      if (!isCustodyError(error) || !error.maybeProcessed) throw error;
      throw new CustodyError(error.code, error.message, {
        endpoint: error.endpoint,
        httpStatus: error.httpStatus,
        retryAfterMs: error.retryAfterMs,
        upstreamMessage: error.upstreamMessage,
        maybeProcessed: false,
        cause: error.cause,
      });
    }
  }
}

/** A lookup answered "nothing found": 404, or `success: false` whose message says so. */
function isNotFound(error: unknown): boolean {
  if (isCustodyError(error, CustodyErrorCode.NOT_FOUND)) return true;
  return isCustodyError(error, CustodyErrorCode.REJECTED) && NOT_FOUND_MESSAGE.test(error.upstreamMessage ?? '');
}

/** `promise`, or a "deadline reached before the request was sent" error once `signal` aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, endpoint: CustodyEndpoint): Promise<T> {
  if (!signal) return promise;
  const deadline = () =>
    new CustodyError(CustodyErrorCode.TIMEOUT, `${endpoint}: deadline reached while waiting for a token`, {
      endpoint,
      maybeProcessed: false,
    });
  if (signal.aborted) return Promise.reject(deadline());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(deadline());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function walletPathId(endpoint: CustodyEndpoint, walletId: number | string): string {
  const text = String(walletId);
  if (!WALLET_ID.test(text)) throw invalid(endpoint, 'walletId must be digits only');
  return text;
}

function walletBody(wallet: WalletRef): { coin: string; walletId: number } {
  const id = String(wallet.walletId);
  if (!WALLET_ID.test(id) || !Number.isSafeInteger(Number(id))) throw invalid('lookup', 'walletId must be digits only');
  if (!/^[a-z0-9._-]{1,32}$/.test(wallet.coin)) throw invalid('lookup', 'coin must be a lowercase asset code');
  return { coin: wallet.coin, walletId: Number(id) };
}

function nonEmpty(name: string, value: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) {
    throw invalid('lookup', `${name} must be a non-empty string of at most 256 characters`);
  }
  return value;
}

function invalid(endpoint: CustodyEndpoint, message: string): CustodyError {
  return new CustodyError(CustodyErrorCode.INVALID_REQUEST, `${endpoint}: ${message}`, { endpoint });
}
