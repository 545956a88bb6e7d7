/**
 * The BitGo v2 adapter of the custody port (docs/bitgo-api.md). Every method checks its inputs before
 * any request is made, reads the answer with zod (schemas.ts) and throws CustodyError with the proof of
 * this adapter's own table (responses.ts, BITGO_SEND_PROOF). Every request carries the call's
 * `options.hooks` (custody/port.ts, RequestHooks) through the generic transport, which runs them.
 *
 * Auth is a fixed access token, `Authorization: Bearer <token>` on every request: there is no token
 * endpoint, so a 401 is final for the call (nothing to renew). The token appears in no error.
 *
 * No travel-rule gate: BitGo does not gate on the travel rule in this API, so getTravelRuleSetting is
 * left out (the port's gate is optional: no transfer is blocked, no gate request is made).
 */
import { BudgetClass } from '../budget.ts';
import { CustodyError, CustodyErrorCode, isCustodyError, type CustodyEndpoint } from '../errors.ts';
import { Transport, type TransportOptions, type TransportResponse } from '../http/transport.ts';
import {
  EXACT_AMOUNT,
  UNREADABLE,
  type AcceptedSend,
  type BudgetTag,
  type CallOptions,
  type CustodyPort,
  type KnownTransfer,
  type ListedTransfer,
  type ListedTransfers,
  type SendOptions,
  type SendRequest,
  type SkippedRecord,
  type TransferFinding,
  type WalletRef,
  type WalletTransaction,
  type Wakeups,
} from '../port.ts';
import { findInAnswer, txidEquals } from '../matching.ts';
import { badResponse, errorForStatus, readBody, tryBody } from './responses.ts';
import {
  pendingApprovalSchema,
  recipientEntries,
  sendAnswerSchema,
  transferSchema,
  webhookRecordSchema,
  type BitgoTransfer,
} from './schemas.ts';
import { BITGO_WEBHOOK_PATH, readBitgoWakeup } from './webhook.ts';

export interface BitgoClientOptions extends TransportOptions {
  /** BitGo's origin (e.g. https://app.bitgo.com); paths start with `/api/v2`. */
  baseUrl: string;
  /** A long-lived access token, sent as a bearer token as given. */
  accessToken: string;
  /** A lookup's transfer failed the schema and findTransfer answered `unreadable` (reporting.ts counts and logs it). */
  onSkippedRecords?: ((endpoint: CustodyEndpoint, skipped: readonly SkippedRecord[]) => void) | undefined;
  /** BITGO_WEBHOOK_SECRET: with it, the port has the wake-up capability (webhook.ts). */
  webhookSecret?: string | undefined;
}

/** A lowercase coin or token ticker (btc, tbtc, hteth, hteth:usdc); api.yaml `CoinString` gives no pattern. */
const COIN = /^[a-z0-9][a-z0-9:_.-]{0,63}$/;
/** A txid is one plain token: starts alphanumeric (so never `.` or `..`), no slash, no percent. */
const TXID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;
/**
 * A BitGo id, 32 lowercase hex (api.yaml `WalletIdString`, `Id`): wallet, transfer, pending approval.
 * The get-transfer route takes "a transfer or transaction id" in one path segment, so a txid of this
 * shape would be read as a transfer id: refused.
 */
const BITGO_ID = /^[0-9a-f]{32}$/;

/** `${coin}/wallet/${walletId}` with both checked, before any request. */
function walletPath(endpoint: CustodyEndpoint, wallet: WalletRef): { path: string; walletId: string } {
  const walletId = String(wallet.walletId);
  if (typeof wallet.walletId !== 'string' || !BITGO_ID.test(walletId))
    throw invalid(endpoint, 'walletId must be 32 lowercase hex characters');
  if (typeof wallet.coin !== 'string' || !COIN.test(wallet.coin)) throw invalid(endpoint, 'coin must be a lowercase coin or token code');
  return { path: `/api/v2/${segment(wallet.coin)}/wallet/${walletId}`, walletId };
}

/** One path segment, percent-encoded. */
function segment(value: string): string {
  return encodeURIComponent(value);
}

/**
 * A sequenceId fits one path segment: non-empty, at most 256 characters, and not `.` or `..`, which URL
 * parsing resolves as dot-segments even percent-encoded (`/transfer/sequenceId/..` would become
 * `/transfer/`, another route).
 */
function checkSequenceId(endpoint: CustodyEndpoint, sequenceId: unknown): string {
  if (typeof sequenceId !== 'string' || sequenceId.length === 0 || sequenceId.length > 256 || sequenceId === '.' || sequenceId === '..') {
    throw invalid(endpoint, 'sequenceId must be a non-empty string of at most 256 characters, not . or ..');
  }
  return sequenceId;
}

export class BitgoClient implements CustodyPort {
  readonly #transport: Transport;
  readonly #baseUrl: string;
  readonly #authorization: string;
  readonly #onSkippedRecords: BitgoClientOptions['onSkippedRecords'];
  readonly wakeups: Wakeups | undefined;

  constructor(options: BitgoClientOptions) {
    if (!options.accessToken) throw new Error('BitgoClient needs an access token');
    this.#onSkippedRecords = options.onSkippedRecords;
    this.#transport = new Transport(options);
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#authorization = `Bearer ${options.accessToken}`;
    const secret = options.webhookSecret;
    this.wakeups = secret
      ? {
          provider: 'bitgo',
          path: BITGO_WEBHOOK_PATH,
          read: (headers, body) => readBitgoWakeup(secret, headers, body),
          register: (wallet, url) => this.#registerWebhook(wallet, url),
        }
      : undefined;
  }

  /**
   * docs/bitgo-api.md section 7: `POST /api/v2/{coin}/wallet/{walletId}/webhooks` with
   * `{ type: 'transfer', url }`. An operator's one-off call (the CLI): no request hooks, so outside the
   * request budget; labelled `detail` in its errors.
   */
  async #registerWebhook(wallet: WalletRef, url: string): Promise<Record<string, unknown>> {
    const { path } = walletPath('detail', wallet);
    const response = await this.#request(
      'detail',
      'POST',
      `${path}/webhooks`,
      {},
      { klass: BudgetClass.ENRICH, member: '' },
      {
        type: 'transfer',
        url,
      },
    );
    const error = errorForStatus('detail', response);
    if (error) throw error;
    return readBody('detail', response, webhookRecordSchema);
  }

  /**
   * docs/bitgo-api.md section 2: `POST /api/v2/{coin}/wallet/{walletId}/tx/send`.
   *
   * The body is `{ sequenceId, txHex }`, with `txHex` the half-signed transaction as hex
   * (`request.halfSigned.txHex`). BitGo takes exactly one of `txHex` and `halfSigned`; its `halfSigned`
   * is a per-chain object (`recipients`, `expireTime`, `operationHash`, `signature`… api.yaml
   * `HalfSigned`) the port does not carry (the port's `halfSigned` is the first provider's
   * `{ txBase64, txHex, sequenceId }`), so sending it would invent fields. `txHex` is exactly what we
   * have, and the simulator takes it.
   *
   * 200 → the transfer (must carry our sequenceId); 202 → accepted, waiting for approval; 400
   * `DuplicateSequenceIdError` → DUPLICATE with proof `conflict`; everything else by BITGO_SEND_PROOF.
   */
  async sendTransaction(wallet: WalletRef, request: SendRequest, options: SendOptions = {}): Promise<AcceptedSend> {
    const { path, walletId } = walletPath('send', wallet);
    const sequenceId = checkSequenceId('send', request.halfSigned?.sequenceId);
    const txHex = request.halfSigned.txHex;
    // docs/contract.md: non-empty hex with an optional 0x; sent as given (BitGo's txHex is "the half-signed transaction as hex").
    if (typeof txHex !== 'string' || !/^(0x)?[0-9a-fA-F]+$/.test(txHex)) throw invalid('send', 'halfSigned.txHex must be hex');
    const response = await this.#request(
      'send',
      'POST',
      `${path}/tx/send`,
      options,
      { klass: BudgetClass.SEND, member: sequenceId },
      {
        sequenceId,
        txHex,
      },
    );
    const error = errorForStatus('send', response);
    if (error) throw error;
    return response.status === 202
      ? acceptedPendingApproval(response, sequenceId)
      : acceptedTransfer(response, sequenceId, walletId, options);
  }

  /**
   * Matched (matching.ts) on the one transfer BitGo answers: it carries the sequenceId (a lookup by
   * sequenceId is narrowed by design), and amounts are base units, compared exactly. A 2xx whose body
   * fails the schema is the transfer of that sequenceId (or txid), unreadable: one skipped record of
   * a narrowed answer, so the finding is `unreadable` (as the first adapter's for a record of ours it
   * cannot read), reported through `onSkippedRecords`. No answer, or an error status, stays an error.
   */
  async findTransfer(wallet: WalletRef, known: KnownTransfer, options: CallOptions & { txid?: string } = {}): Promise<TransferFinding> {
    const { txid, ...call } = options;
    const answer = txid === undefined ? await this.#bySequenceId(wallet, known.sequenceId, call) : await this.#byTxId(wallet, txid, call);
    if ('unreadable' in answer) this.#onSkippedRecords?.('lookup', [{ index: 0, paths: answer.paths, ours: true }]);
    return findInAnswer(answer.listed, known, { narrows: async () => true, walletId: wallet.walletId });
  }

  /**
   * docs/bitgo-api.md section 3: `GET /api/v2/{coin}/wallet/{walletId}/transfer/sequenceId/{sequenceId}`.
   * 200 or 206 (the transfer without inputs/outputs) → one transfer; 404 → none (an assumption of the
   * doc: BitGo documents no answer for an unknown sequenceId). A transfer that does not carry our
   * sequenceId identifies nothing: BAD_RESPONSE; so is a body this adapter cannot read.
   */
  async getTransfersBySequenceId(wallet: WalletRef, sequenceId: string, options: CallOptions = {}): Promise<ListedTransfers> {
    return readable(await this.#bySequenceId(wallet, sequenceId, options));
  }

  /**
   * Reconciliation's verification: `GET /api/v2/{coin}/wallet/{walletId}/transfer/{txid}`
   * (docs/bitgo-api.md section 6: BitGo's API reference `v2.wallet.gettransfer`, "transferId: a
   * transfer or transaction id"; sdk-core `wallet.getTransfer`).
   * 200 → the wallet's transfer of that transaction; 404 → none.
   */
  async getTransfersByTxId(wallet: WalletRef, txId: string, options: CallOptions = {}): Promise<ListedTransfers> {
    return readable(await this.#byTxId(wallet, txId, options));
  }

  async #bySequenceId(wallet: WalletRef, sequenceId: string, options: CallOptions): Promise<Lookup> {
    const { path, walletId } = walletPath('lookup', wallet);
    checkSequenceId('lookup', sequenceId);
    const url = `${path}/transfer/sequenceId/${segment(sequenceId)}`;
    const answer = await this.#getTransfer('lookup', url, options, { klass: BudgetClass.POLL, member: sequenceId });
    if (!('transfer' in answer)) return answer;
    if (answer.transfer === undefined) return { listed: [] };
    if (answer.transfer.sequenceId !== sequenceId) {
      throw badResponse(
        'lookup',
        200,
        answer.transfer.sequenceId === undefined ? 'the transfer carries no sequenceId' : 'the transfer names another sequenceId',
      );
    }
    return { listed: [listed(answer.transfer, walletId)] };
  }

  async #byTxId(wallet: WalletRef, txId: string, options: CallOptions): Promise<Lookup> {
    const { path, walletId } = walletPath('lookup', wallet);
    checkTxid('lookup', txId);
    const answer = await this.#getTransfer('lookup', `${path}/transfer/${segment(txId)}`, options, {
      klass: BudgetClass.VERIFY,
      member: txId,
    });
    if (!('transfer' in answer)) return answer;
    if (answer.transfer === undefined) return { listed: [] };
    if (!txidEquals(answer.transfer.txid, txId)) throw badResponse('lookup', 200, 'the transfer names another txid');
    return { listed: [listed(answer.transfer, walletId)] };
  }

  /**
   * Enrichment: the wallet's view of a transaction, read from the same documented route as
   * getTransfersByTxId (`GET …/transfer/{txid}`, labelled `detail`): the transfer with its `txid`, the
   * rest riding along. sdk-core's `wallet.getTransaction({ txHash })` (`GET …/tx/{txHash}`) exists, but
   * its answer's shape is documented nowhere this project has (the SDK returns it as is). 404 is
   * NOT_FOUND: the caller decides whether that means "not yet".
   */
  async getWalletTransaction(wallet: WalletRef, txid: string, options: CallOptions = {}): Promise<WalletTransaction> {
    const { path } = walletPath('detail', wallet);
    checkTxid('detail', txid);
    const url = `${path}/transfer/${segment(txid)}`;
    const response = await this.#request('detail', 'GET', url, options, { klass: BudgetClass.ENRICH, member: txid });
    const error = errorForStatus('detail', response);
    if (error) throw error;
    const transfer = readBody('detail', response, transferSchema);
    if (!txidEquals(transfer.txid, txid)) throw badResponse('detail', response.status, 'the transfer names another txid');
    return transfer;
  }

  walletProblem(wallet: WalletRef): string | undefined {
    if (typeof wallet.walletId === 'string' && BITGO_ID.test(wallet.walletId)) return undefined;
    return "must be BitGo's wallet id, 32 lowercase hex characters: CUSTODY_PROVIDER=bitgo takes no integer wallet id";
  }

  async close(): Promise<void> {
    await this.#transport.close();
  }

  /** One get-transfer request: the transfer, undefined on 404, or (a 2xx it cannot read) one unreadable record. */
  async #getTransfer(
    endpoint: CustodyEndpoint,
    path: string,
    options: CallOptions,
    budget: BudgetTag,
  ): Promise<{ transfer: BitgoTransfer | undefined } | Unreadable> {
    const response = await this.#request(endpoint, 'GET', path, options, budget);
    const error = errorForStatus(endpoint, response);
    if (isCustodyError(error, CustodyErrorCode.NOT_FOUND)) return { transfer: undefined };
    if (error) throw error;
    const read = tryBody(endpoint, response, transferSchema);
    if ('body' in read) return { transfer: read.body };
    const list: ListedTransfers = [];
    list[UNREADABLE] = 1;
    return { listed: list, unreadable: read.unreadable, paths: read.paths };
  }

  #request(
    endpoint: CustodyEndpoint,
    method: 'GET' | 'POST',
    path: string,
    options: CallOptions,
    budget: BudgetTag,
    body?: object,
  ): Promise<TransportResponse> {
    const headers: Record<string, string> = { authorization: this.#authorization, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return this.#transport.request({
      endpoint,
      url: new URL(this.#baseUrl + path),
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: options.signal,
      onDispatch: options.onRequest,
      beforeWrite: options.beforeWrite,
      budget: options.budget ?? budget,
      hooks: options.hooks,
    });
  }
}

/**
 * The send's 200: the transfer, which must carry our sequenceId (else the answer is about another
 * transfer: garbage for this one, and the send may have gone out).
 *
 * `destinationAddress` and `amount`: BitGo's answer has no such fields; the transfer's `entries` are
 * balance changes per address. When exactly one entry is a recipient (recipientEntries: a positive
 * change on an address not of this wallet, not change, not PayGo), its address and `valueString` are
 * them: base units as integer text, exact, never through a double. Otherwise (no readable recipient,
 * as for a send of `txHex` alone before BitGo has decoded it, or several recipients) both are left
 * out: "not stated", never a guess; the tracking matcher then decides by the sequenceId every BitGo
 * transfer carries.
 */
function acceptedTransfer(response: TransportResponse, sequenceId: string, walletId: string, options: SendOptions): AcceptedSend {
  const answer = readBody('send', response, sendAnswerSchema);
  const { transfer } = answer;
  if (transfer.sequenceId !== sequenceId) {
    throw badResponse(
      'send',
      response.status,
      transfer.sequenceId === undefined ? 'the transfer carries no sequenceId' : 'the answer names another sequenceId',
    );
  }
  const recipients = recipientEntries(transfer.entries, walletId);
  const only = recipients.length === 1 ? recipients[0]! : undefined;
  const txid = transfer.txid !== '' ? transfer.txid : typeof answer.txid === 'string' ? answer.txid : '';
  const { entries: _entries, ...rest } = transfer;
  return {
    ...rest,
    id: transfer.id,
    sequenceId,
    txid,
    ...(only ? { destinationAddress: only.address, amount: only.valueString, [EXACT_AMOUNT]: only.valueString } : {}),
    ...(options.keepRaw === false || answer.tx === undefined ? {} : { raw: answer.tx }),
  };
}

/**
 * The send's 202: accepted, waiting for an approval (BITGO_SEND_PROOF; never "not taken"). The answer
 * names the pending approval, not the transfer: `id` is the pending approval's (also under
 * `pendingApproval`), `state` is `pendingApproval` and there is no txid. Destination and amount come
 * from the request's recipients when exactly one is readable, else they are left out as for a 200.
 */
function acceptedPendingApproval(response: TransportResponse, sequenceId: string): AcceptedSend {
  const approval = readBody('send', response, pendingApprovalSchema);
  const { recipients, unreadableRecipients } = approval.info;
  const only = recipients.length === 1 && unreadableRecipients === 0 ? recipients[0]! : undefined;
  const { info: _info, state: approvalState, ...rest } = approval;
  return {
    ...rest,
    id: approval.id,
    sequenceId,
    state: 'pendingApproval',
    pendingApproval: approval.id,
    approvalState,
    txid: '',
    ...(only ? { destinationAddress: only.address, amount: only.amount, [EXACT_AMOUNT]: only.amount } : {}),
  };
}

/**
 * BitGo's states (docs/bitgo-api.md section 4) of a transfer that gets no txid unless someone acts, and
 * whether each is final: `rejected`, `failed` and `deleted` never reach the chain; `removed` (a re-org
 * dropped it) may be mined again, so it is not.
 */
const HALTED_STATES: ReadonlyMap<string, boolean> = new Map([
  ['rejected', true],
  ['failed', true],
  ['deleted', true],
  ['removed', false],
]);

/**
 * A transfer as the port lists it: `outputs` are its recipient entries (address, and base units as
 * integer text); everything else (state, entries, values) rides along.
 */
/** BitGo's states of a transfer halted without a txid, final or not (the metric's label values). */
export const BITGO_HALTED_STATES: readonly string[] = [...HALTED_STATES.keys()];

function listed(transfer: BitgoTransfer, walletId: string): ListedTransfer {
  const outputs = recipientEntries(transfer.entries, walletId).map((entry) => ({ address: entry.address, amount: entry.valueString }));
  const state = typeof transfer.state === 'string' ? transfer.state : '';
  const final = HALTED_STATES.get(state);
  return {
    ...transfer,
    outputs,
    ...(transfer.txid === '' && final !== undefined ? { halted: { state, final } } : {}),
    ...(transfer.txid === '' && state === 'pendingApproval' ? { awaitingApproval: true } : {}),
  };
}

/** A 2xx get-transfer answer whose body this adapter cannot read: no transfer, one unreadable record. */
interface Unreadable {
  listed: ListedTransfers;
  /** The BAD_RESPONSE the raw lookups throw for it. */
  unreadable: CustodyError;
  /** Where the body broke the schema (SkippedRecord.paths). */
  paths: string[];
}

/** A lookup's answer, as findTransfer matches it. */
type Lookup = { listed: ListedTransfers } | Unreadable;

/** The raw lookups (the CLI's `get-transfer`) match nothing: a body they cannot read is their error. */
function readable(lookup: Lookup): ListedTransfers {
  if ('unreadable' in lookup) throw lookup.unreadable;
  return lookup.listed;
}

function checkTxid(endpoint: CustodyEndpoint, txid: string): void {
  if (typeof txid !== 'string' || !TXID.test(txid)) throw invalid(endpoint, 'txid must be one plain token of letters, digits and ._:-');
  if (BITGO_ID.test(txid))
    throw invalid(endpoint, 'txid has the shape of a BitGo id, which the transfer route would read as a transfer id');
}

function invalid(endpoint: CustodyEndpoint, message: string): CustodyError {
  return new CustodyError(CustodyErrorCode.INVALID_REQUEST, `${endpoint}: ${message}`, { endpoint, maybeProcessed: false });
}
