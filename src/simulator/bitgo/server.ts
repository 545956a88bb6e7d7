/**
 * The BitGo simulator: the endpoints of docs/bitgo-api.md (send a half-signed transaction; get a
 * transfer by sequenceId; get a transfer by transfer id or txid) behind a bearer token, with the `/_sim/` control API of ../control-routes.ts
 * (loopback only, like the wallet-service simulator's). `npm run simulator -- --provider bitgo`
 * starts it (../main.ts).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { controlTarget, handleControl, ControlInputError, parseControlJson } from '../control-routes.ts';
import type { ControlTarget } from '../control-routes.ts';
import { FaultBoard } from '../faults.ts';
import { ServerPlumbing, TokenBucket } from '../plumbing.ts';
import { decodeSegment, failure, isObject, json, nonEmptyString, parseJson, readBody, write } from '../http.ts';
import type { Answer } from '../http.ts';
import { DEFAULT_HOST, SettingsError, parseFaultPlan } from '../settings.ts';
import type { FaultPlan } from '../settings.ts';
import { bitgoFaultAnswer, tooManyRequests, unauthorized } from './faults.ts';
import { bitgoError, newRequestId, pendingApprovalResponse, sendResponse, transferRecord } from './records.ts';
import { BITGO_ENDPOINTS, DEFAULT_BITGO_ACCESS_TOKEN, checkBitgoFaultPlan, defaultBitgoSettings, mergeBitgoSettings } from './settings.ts';
import type { BitgoEndpoint, BitgoSettings, BitgoSimulatorOptions } from './settings.ts';
import { BITGO_TRANSFER_STATES, BitgoState, isEvmCoin } from './state.ts';
import { BitgoWebhooks, DEFAULT_BITGO_WEBHOOK_SECRET, targetProblem } from './webhooks.ts';
import type { BitgoWebhook } from './webhooks.ts';
import type { BitgoStats, BitgoTransfer as BitgoTransferRecord, BitgoTransferState, BitgoTransferView, Recipient } from './state.ts';

export interface BitgoSimulator {
  /** e.g. http://127.0.0.1:4123 */
  url: string;
  /** `${url}/api/v2`: what BitGo's paths start with. */
  apiBase: string;
  port: number;
  accessToken: string;
  settings(): BitgoSettings;
  updateSettings(patch: Partial<BitgoSettings>): void;
  setFault(endpoint: BitgoEndpoint, plan: FaultPlan | null): void;
  stats(): BitgoStats;
  transfer(sequenceId: string): BitgoTransferView | undefined;
  /** Approves, signs and shows the txid now (the given one, or the one drawn at acceptance). */
  setTxid(sequenceId: string, txid?: string): void;
  /**
   * Forces a documented transfer state from now on (rejected, failed, confirmed…); `hideTxid`: the
   * txid is never shown in it (failed before its broadcast, removed before the txid was seen).
   */
  setState(sequenceId: string, state: BitgoTransferState, options?: { hideTxid?: boolean }): void;
  /** The access token stops working (401) until reset. */
  expireTokens(): void;
  /** The secret `transfer` webhook calls are signed with (x-signature-sha256). */
  webhookSecret: string;
  /** The registered webhooks, and how many calls were made. */
  webhooks(): { hooks: BitgoWebhook[]; sent: number };
  /** Transfers, counters, faults, settings and the token back to the start options. */
  reset(): void;
  close(): Promise<void>;
}

/** 32 lowercase hex (api.yaml WalletIdString). */
const WALLET_ID = /^[0-9a-f]{32}$/;
/** Coin tickers are lowercase (btc, tbtc, hteth, and tokens such as hteth:usdc). */
const COIN = /^[a-z0-9][a-z0-9:_.-]{0,63}$/;
const BASE_UNITS = /^\d{1,40}$/;
const MAX_REQUEST_ID = 128;

type Route =
  | { endpoint: 'sendTransaction'; coin: string; walletId: string }
  | { endpoint: 'transferBySequenceId'; coin: string; walletId: string; sequenceId: string }
  | { endpoint: 'getTransfer'; coin: string; walletId: string; id: string };

function matchRoute(method: string | undefined, path: string): Route | undefined {
  const parts = path.split('/').map((part) => decodeSegment(part));
  // ['', 'api', 'v2', coin, 'wallet', walletId, …]
  if (parts.some((part) => part === undefined) || parts[1] !== 'api' || parts[2] !== 'v2' || parts[4] !== 'wallet') return undefined;
  const coin = parts[3]!;
  const walletId = parts[5]!;
  if (method === 'POST' && parts.length === 8 && parts[6] === 'tx' && parts[7] === 'send') {
    return { endpoint: 'sendTransaction', coin, walletId };
  }
  if (method === 'GET' && parts.length === 9 && parts[6] === 'transfer' && parts[7] === 'sequenceId' && parts[8] !== '') {
    return { endpoint: 'transferBySequenceId', coin, walletId, sequenceId: parts[8]! };
  }
  if (method === 'GET' && parts.length === 8 && parts[6] === 'transfer' && parts[7] !== '' && parts[7] !== 'sequenceId') {
    return { endpoint: 'getTransfer', coin, walletId, id: parts[7]! };
  }
  return undefined;
}

/** `POST /api/v2/{coin}/wallet/{walletId}/webhooks`: not a fault endpoint (the worker never calls it). */
function matchWebhookRoute(method: string | undefined, path: string): { coin: string; walletId: string } | undefined {
  const parts = path.split('/').map((part) => decodeSegment(part));
  if (method !== 'POST' || parts.length !== 7 || parts.some((part) => part === undefined)) return undefined;
  if (parts[1] !== 'api' || parts[2] !== 'v2' || parts[4] !== 'wallet' || parts[6] !== 'webhooks') return undefined;
  return { coin: parts[3]!, walletId: parts[5]! };
}

/** A fixed network fee in base units: 21,000 gas at 20 gwei on EVM coins, 10,000 otherwise. */
function feeOf(coin: string): bigint {
  return isEvmCoin(coin) ? 420_000_000_000_000n : 10_000n;
}

function baseUnits(value: unknown): bigint | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === 'string' && BASE_UNITS.test(value)) return BigInt(value);
  return undefined;
}

/** recipients of halfSigned (or of the body): [{ address, amount }] with amounts in base units. */
function recipientsOf(value: unknown): Recipient[] | string {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return 'recipients must be an array';
  const recipients: Recipient[] = [];
  for (const [index, entry] of value.entries()) {
    if (!isObject(entry) || !nonEmptyString(entry.address)) return `recipients[${index}].address must be a non-empty string`;
    const amount = baseUnits(entry.amount);
    if (amount === undefined) return `recipients[${index}].amount must be a whole number of base units`;
    recipients.push({ address: entry.address, amount });
  }
  return recipients;
}

class BitgoServer {
  readonly state = new BitgoState();
  readonly faults = new FaultBoard<BitgoEndpoint>(BITGO_ENDPOINTS);
  readonly accessToken: string;
  readonly webhookSecret: string;
  readonly webhooks: BitgoWebhooks;
  private readonly initialSettings: BitgoSettings;
  current: BitgoSettings;
  private tokenRevoked = false;
  private readonly plumbing = new ServerPlumbing();
  /** settings.maxRps, the provider's own request limit. */
  private readonly bucket = new TokenBucket();
  readonly server = createServer({ keepAliveTimeout: 10_000, requestTimeout: 0 }, (req, res) => {
    this.onRequest(req, res);
  });

  readonly control: ControlTarget = controlTarget(this, {
    endpoints: BITGO_ENDPOINTS,
    mergeSettings: mergeBitgoSettings,
    checkFaultPlan: checkBitgoFaultPlan,
    transfer: (sequenceId, now) => this.state.view(sequenceId, now),
    setTxid: (sequenceId, txid, now) => this.setTxid(sequenceId, txid, now),
    expireTokens: () => {
      this.tokenRevoked = true;
    },
    extraRoute: (route, id, text, now) => {
      if (route !== 'POST transfers/:id/state') return undefined;
      const input = parseControlJson(text, false);
      const state = isObject(input) ? input.state : undefined;
      if (!BITGO_TRANSFER_STATES.includes(state as BitgoTransferState)) {
        throw new ControlInputError(`state must be one of ${BITGO_TRANSFER_STATES.join(', ')}`);
      }
      const hideTxid = isObject(input) ? input.hideTxid : undefined;
      if (hideTxid !== undefined && typeof hideTxid !== 'boolean') throw new ControlInputError('hideTxid must be true or false');
      if (!this.state.forceState(id, state as BitgoTransferState, now, hideTxid)) return failure(404, 'unknown sequenceId');
      return json(200, this.state.view(id, now));
    },
  });

  constructor(options: BitgoSimulatorOptions) {
    this.accessToken = options.accessToken ?? DEFAULT_BITGO_ACCESS_TOKEN;
    this.webhookSecret = options.webhookSecret ?? DEFAULT_BITGO_WEBHOOK_SECRET;
    this.webhooks = new BitgoWebhooks(this.webhookSecret);
    this.initialSettings = mergeBitgoSettings(defaultBitgoSettings(), options.settings ?? {});
    this.current = { ...this.initialSettings };
  }

  reset(): void {
    this.current = { ...this.initialSettings };
    this.bucket.reset();
    this.tokenRevoked = false;
    this.state.reset();
    this.faults.clear();
    this.webhooks.reset();
  }

  /** Shows the txid now (state.ts), and calls the transfer's webhooks when it was not shown before. */
  setTxid(sequenceId: string, txid: string | undefined, now: number): boolean {
    const transfer = this.state.first(sequenceId);
    const shownBefore = transfer ? this.state.shownTxid(transfer, now) : '';
    if (!this.state.setTxid(sequenceId, txid, now)) return false;
    if (transfer && shownBefore === '') this.notify(transfer);
    return true;
  }

  /** The transfer's `transfer` webhook call now, or at `at`: as the transfer is then (none while its txid is hidden, for `at`). */
  private notify(transfer: BitgoTransferRecord, at?: number): void {
    const make = () => {
      const now = Date.now();
      const hash = this.state.shownTxid(transfer, now);
      if (at !== undefined && hash === '') return undefined;
      return {
        type: 'transfer' as const,
        wallet: transfer.walletId,
        coin: transfer.coin,
        transfer: transfer.id,
        hash,
        state: this.state.stateOf(transfer, now),
      };
    };
    this.webhooks.notify(transfer.walletId, transfer.coin, make, at);
  }

  private addWebhook(coin: string, walletId: string, req: IncomingMessage, text: string, requestId: string): Answer {
    if (!this.authorized(req)) return unauthorized(requestId);
    if (!WALLET_ID.test(walletId)) return bitgoError(400, 'InvalidWalletId', 'invalid wallet id', requestId);
    if (!COIN.test(coin)) return bitgoError(400, 'InvalidCoin', `invalid coin: ${coin.slice(0, 64)}`, requestId);
    const parsed = parseJson(text);
    if (!parsed.ok || !isObject(parsed.value)) return bitgoError(400, 'InvalidRequest', 'body must be a JSON object', requestId);
    if (parsed.value.type !== 'transfer') return bitgoError(400, 'InvalidRequest', 'the simulator serves type transfer only', requestId);
    const problem = targetProblem(parsed.value.url);
    if (problem !== undefined) return bitgoError(400, 'InvalidRequest', problem, requestId);
    const hook = this.webhooks.add(walletId, coin, String(parsed.value.url));
    return json(200, { ...hook, state: 'active', numConfirmations: 0 });
  }

  async close(): Promise<void> {
    this.webhooks.reset();
    await this.plumbing.close(this.server);
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (path === '/_sim' || path.startsWith('/_sim/')) {
      void handleControl(this.control, req, res, path);
      return;
    }
    const hook = matchWebhookRoute(req.method, path);
    if (hook) {
      void readBody(req).then((body) => {
        const header = req.headers['request-id'];
        const requestId = typeof header === 'string' && header !== '' && header.length <= MAX_REQUEST_ID ? header : newRequestId();
        write(
          res,
          body.ok
            ? this.addWebhook(hook.coin, hook.walletId, req, body.text, requestId)
            : bitgoError(413, 'PayloadTooLarge', 'request body too large', requestId),
        );
      });
      return;
    }
    void this.serve(matchRoute(req.method, path), req, res);
  }

  private async serve(route: Route | undefined, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers['request-id'];
    const requestId = typeof header === 'string' && header !== '' && header.length <= MAX_REQUEST_ID ? header : newRequestId();
    const body = await readBody(req);
    if (!route) {
      if (body.ok || body.tooLarge) write(res, bitgoError(404, 'NotFound', 'not found', requestId));
      return;
    }
    const { endpoint } = route;
    if (!body.ok) {
      if (!body.tooLarge) return;
      this.state.countOutcome(endpoint, '413');
      const answer = bitgoError(413, 'PayloadTooLarge', 'request body too large', requestId);
      write(res, { ...answer, headers: { ...answer.headers, connection: 'close' } });
      return;
    }
    if (!this.bucket.take(this.current.maxRps, Date.now())) {
      this.state.countOutcome(endpoint, '429');
      write(res, tooManyRequests(requestId, this.current.retryAfterSec));
      return;
    }
    const fault = this.faults.pick(endpoint);
    let answer: Answer | undefined;
    if (fault === undefined || fault === 'timeout' || fault.startsWith('accept-')) {
      try {
        answer = this.process(route, req, body.text, requestId, Date.now());
      } catch {
        answer = bitgoError(500, 'InternalError', 'internal error', requestId);
      }
    }
    if (fault !== undefined && fault !== 'timeout' && fault !== 'reset' && fault !== 'accept-reset') {
      answer = bitgoFaultAnswer(endpoint, fault, this.current.retryAfterSec, requestId);
    }
    if (this.current.latencyMs > 0) await this.plumbing.sleep(this.current.latencyMs);
    if (fault === 'reset' || fault === 'accept-reset') {
      this.state.countOutcome(endpoint, 'reset');
      req.socket.destroy();
      return;
    }
    if (fault === 'timeout') {
      this.state.countOutcome(endpoint, 'timeout');
      this.plumbing.hold(res);
      return;
    }
    if (!answer) return;
    this.state.countOutcome(endpoint, String(answer.status));
    write(res, answer);
  }

  private authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (this.tokenRevoked || !header || header.length < 8 || header.slice(0, 7).toLowerCase() !== 'bearer ') return false;
    return header.slice(7).trim() === this.accessToken;
  }

  private process(route: Route, req: IncomingMessage, text: string, requestId: string, now: number): Answer {
    if (!this.authorized(req)) return unauthorized(requestId);
    if (!WALLET_ID.test(route.walletId)) {
      return bitgoError(400, 'InvalidWalletId', 'invalid wallet id', requestId, { context: { id: route.walletId.slice(0, 64) } });
    }
    if (!COIN.test(route.coin)) return bitgoError(400, 'InvalidCoin', `invalid coin: ${route.coin.slice(0, 64)}`, requestId);
    switch (route.endpoint) {
      case 'sendTransaction':
        return this.send(route.coin, route.walletId, text, requestId, now);
      case 'transferBySequenceId':
        return this.transferBySequenceId(route.coin, route.walletId, route.sequenceId, requestId, now);
      case 'getTransfer':
        return this.getTransfer(route.coin, route.walletId, route.id, requestId, now);
    }
  }

  private send(coin: string, walletId: string, text: string, requestId: string, now: number): Answer {
    const invalid = (message: string): Answer => bitgoError(400, 'InvalidRequest', message, requestId);
    const parsed = parseJson(text);
    if (!parsed.ok || !isObject(parsed.value)) return invalid('body must be a JSON object');
    const body = parsed.value;
    const halfSigned = body.halfSigned ?? undefined;
    const txHex = body.txHex ?? undefined;
    if ((halfSigned === undefined) === (txHex === undefined)) return invalid('must supply either txHex or halfSigned, but not both');
    if (halfSigned !== undefined && !isObject(halfSigned)) return invalid('halfSigned must be an object');
    if (txHex !== undefined && !nonEmptyString(txHex)) return invalid('txHex must be a non-empty string');
    const { sequenceId } = body;
    if (!(nonEmptyString(sequenceId) || (typeof sequenceId === 'number' && Number.isSafeInteger(sequenceId)))) {
      // BitGo takes a send without one; this simulator does not, since the worker always sends one.
      return invalid('sequenceId is required by the simulator (a non-empty string)');
    }
    const recipients = recipientsOf(isObject(halfSigned) && halfSigned.recipients != null ? halfSigned.recipients : body.recipients);
    if (typeof recipients === 'string') return invalid(recipients);
    const comment = nonEmptyString(body.comment) ? body.comment : null;
    const tx = isObject(halfSigned) ? (nonEmptyString(halfSigned.txHex) ? halfSigned.txHex : '') : String(txHex);
    const transfer = this.state.accept(
      { coin, walletId, sequenceId: String(sequenceId), recipients, fee: feeOf(coin), tx, comment },
      this.current,
      now,
    );
    if (!transfer) {
      // The status and name are api.yaml's (400, DuplicateSequenceId); the wording of `error` is the simulator's.
      return bitgoError(400, 'DuplicateSequenceIdError', `sequenceId ${String(sequenceId).slice(0, 64)} has already been used`, requestId);
    }
    // Called after this answer is written (the calls are made on a later turn): first seen, then at its txid.
    this.notify(transfer);
    this.notify(transfer, transfer.txidAt);
    if (transfer.pendingApprovalId !== undefined) return json(202, pendingApprovalResponse(transfer));
    return json(200, sendResponse(this.state, transfer, now));
  }

  private transferBySequenceId(coin: string, walletId: string, sequenceId: string, requestId: string, now: number): Answer {
    const transfer = this.state.find(walletId, sequenceId);
    if (!transfer || transfer.coin !== coin) return bitgoError(404, 'NotFound', 'transfer not found', requestId);
    return json(this.current.partialContent ? 206 : 200, transferRecord(this.state, transfer, now));
  }

  /**
   * BitGo's API reference v2.wallet.gettransfer (docs/bitgo-api.md section 6): `transferId` is "a transfer or transaction id"; the answer is the
   * transfer (200). 404 for an id or txid the wallet does not know (the API overview's "Requested
   * resource does not exist"), as for a sequenceId.
   */
  private getTransfer(coin: string, walletId: string, id: string, requestId: string, now: number): Answer {
    const transfer = this.state.findByIdOrTxid(walletId, id, now);
    if (!transfer || transfer.coin !== coin) return bitgoError(404, 'NotFound', 'transfer not found', requestId);
    return json(200, transferRecord(this.state, transfer, now));
  }
}

function originOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export async function startBitgoSimulator(options: BitgoSimulatorOptions = {}): Promise<BitgoSimulator> {
  const sim = new BitgoServer(options);
  const host = options.host ?? DEFAULT_HOST;
  await new Promise<void>((resolve, reject) => {
    sim.server.once('error', reject);
    sim.server.listen(options.port ?? 0, host, () => {
      sim.server.off('error', reject);
      resolve();
    });
  });
  const port = (sim.server.address() as AddressInfo).port;
  const url = originOf(host, port);
  let closing: Promise<void> | undefined;
  return {
    url,
    apiBase: `${url}/api/v2`,
    port,
    accessToken: sim.accessToken,
    settings: () => ({ ...sim.current }),
    updateSettings: (patch) => {
      sim.current = mergeBitgoSettings(sim.current, patch);
    },
    setFault: (endpoint, plan) => {
      if (!BITGO_ENDPOINTS.includes(endpoint)) throw new SettingsError(`unknown endpoint: ${String(endpoint)}`);
      sim.faults.set(endpoint, checkBitgoFaultPlan(parseFaultPlan(plan)));
    },
    stats: () => sim.state.stats(),
    transfer: (sequenceId) => sim.state.view(sequenceId, Date.now()),
    setTxid: (sequenceId, txid) => {
      if (txid !== undefined && !nonEmptyString(txid)) throw new Error('txid must be a non-empty string');
      if (!sim.setTxid(sequenceId, txid, Date.now())) throw new Error(`unknown sequenceId: ${sequenceId}`);
    },
    setState: (sequenceId, state, options) => {
      if (!BITGO_TRANSFER_STATES.includes(state)) throw new Error(`unknown state: ${String(state)}`);
      if (!sim.state.forceState(sequenceId, state, Date.now(), options?.hideTxid)) throw new Error(`unknown sequenceId: ${sequenceId}`);
    },
    expireTokens: () => sim.control.expireTokens(),
    webhookSecret: sim.webhookSecret,
    webhooks: () => ({ hooks: sim.webhooks.list(), sent: sim.webhooks.sent }),
    reset: () => sim.reset(),
    close: () => {
      closing ??= sim.close();
      return closing;
    },
  };
}
