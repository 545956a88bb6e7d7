/**
 * The custody simulator's HTTP server: what a custody provider serves (the four endpoints of spec
 * section 4 with their auth schemes, and the token endpoint), composed with the `/_sim/` control API
 * of control-routes.ts (which tests, the demo and the benchmark use to steer it, and which must never
 * be reachable beyond loopback).
 *
 * Built on node:http for speed and for control over sockets (a 'timeout' fault keeps a socket open
 * with no answer; a 'reset' fault destroys it). Nothing here logs or sets a timer per transfer: the
 * benchmark drives it at thousands of requests per second.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FaultBoard, faultAnswer } from './faults.ts';
import { decodeSegment, failure, isObject, json, nonEmptyString, parseJson, readBody, write } from './http.ts';
import type { Answer } from './http.ts';
import { RealisticProfile, SPEC_PROFILE } from './realistic.ts';
import type { AnswerProfile } from './realistic.ts';
import { buildSubmitRecord, buildTransaction, buildWalletTransaction, submitRecordJson } from './records.ts';
import {
  DEFAULT_CLIENT_ID,
  DEFAULT_CLIENT_SECRET,
  DEFAULT_HOST,
  SIM_ENDPOINTS,
  SettingsError,
  defaultSettings,
  isSimEndpoint,
  mergeSettings,
  parseFaultPlan,
} from './settings.ts';
import type { DeepPartial, FaultPlan, SimEndpoint, SimulatorOptions, SimulatorSettings } from './settings.ts';
import { controlTarget, handleControl, type ControlTarget } from './control-routes.ts';
import { SimState } from './state.ts';
import { ServerPlumbing, TokenBucket } from './plumbing.ts';
import type { HalfSigned, SimTransfer, SimulatorStats, TransferView } from './state.ts';

export interface Simulator {
  /** e.g. http://127.0.0.1:4123: one origin for the sdk, base and token endpoints. */
  url: string;
  port: number;
  clientId: string;
  clientSecret: string;
  settings(): SimulatorSettings;
  updateSettings(patch: DeepPartial<SimulatorSettings>): void;
  setFault(endpoint: SimEndpoint, plan: FaultPlan | null): void;
  stats(): SimulatorStats;
  /** All upstream (non-/_sim) requests, any endpoint. */
  requestCount(): number;
  /** The simulator's view of a transfer (record, visibility, txid). */
  transfer(sequenceId: string): TransferView | undefined;
  /** Forces the txid to show now (the given one, or the one drawn at acceptance). */
  setTxid(sequenceId: string, txid?: string): void;
  /** Every issued token becomes invalid: the next bearer call gets 401. */
  expireTokens(): void;
  /** Transfers, counters, faults and settings back to the start options. */
  reset(): void;
  /** Also destroys sockets held open by 'timeout' faults. */
  close(): Promise<void>;
}

const DIGITS = /^\d+$/;

type Route =
  | { endpoint: 'token' }
  | { endpoint: 'getTransfer' }
  | { endpoint: 'isEnabled' }
  | { endpoint: 'sendTransaction'; walletId: string }
  | { endpoint: 'getWalletTransaction'; walletId: string; txid: string };

const UNAUTHORIZED = failure(401, 'unauthorized');
const NOT_FOUND = failure(404, 'not found');

function matchRoute(method: string | undefined, path: string): Route | undefined {
  if (method === 'POST') {
    if (path === '/api/wallet/get-transfer') return { endpoint: 'getTransfer' };
    if (path === '/oauth/token') return { endpoint: 'token' };
    if (path === '/api/travel-rule/is-enabled') return { endpoint: 'isEnabled' };
    if (path.startsWith('/api/wallet/') && path.endsWith('/sendTransaction')) {
      const walletId = decodeSegment(path.slice('/api/wallet/'.length, -'/sendTransaction'.length));
      if (walletId !== undefined && walletId !== '' && !walletId.includes('/')) {
        return { endpoint: 'sendTransaction', walletId };
      }
    }
    return undefined;
  }
  if (method === 'GET' && path.startsWith('/api/wallet/')) {
    const parts = path.split('/'); // ['', 'api', 'wallet', walletid, 'txid', txid]
    if (parts.length === 6 && parts[4] === 'txid' && parts[3] && parts[5]) {
      const walletId = decodeSegment(parts[3]);
      const txid = decodeSegment(parts[5]);
      if (walletId !== undefined && txid !== undefined) return { endpoint: 'getWalletTransaction', walletId, txid };
    }
  }
  return undefined;
}

/** Spec 4.1 says integer; a string of digits is taken too, as lenient servers do. */
function walletIdOf(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string' && DIGITS.test(value)) {
    const id = Number(value);
    if (Number.isSafeInteger(id)) return id;
  }
  return undefined;
}

function newestFirst(a: SimTransfer, b: SimTransfer): number {
  return b.acceptedAt - a.acceptedAt || b.ordinal - a.ordinal;
}

class SimulatorServer {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly state = new SimState();
  readonly faults = new FaultBoard();
  private readonly realistic = new RealisticProfile();
  private readonly initialSettings: SimulatorSettings;
  private readonly basicCredentials: string;
  current: SimulatorSettings;
  private readonly plumbing = new ServerPlumbing();
  /** settings.maxRps, the provider's own request limit. */
  private readonly bucket = new TokenBucket();
  readonly server = createServer({ keepAliveTimeout: 10_000, requestTimeout: 0 }, (req, res) => {
    this.onRequest(req, res);
  });
  /** What `/_sim/` reads and changes (control-routes.ts). */
  readonly control: ControlTarget = controlTarget(this, {
    endpoints: SIM_ENDPOINTS,
    mergeSettings,
    transfer: (sequenceId, now) => this.state.view(sequenceId, this.clientId, now),
    setTxid: (sequenceId, txid, now) => this.state.setTxid(sequenceId, txid, now) !== undefined,
    expireTokens: () => this.state.expireTokens(),
  });

  constructor(options: SimulatorOptions) {
    this.clientId = options.clientId ?? DEFAULT_CLIENT_ID;
    this.clientSecret = options.clientSecret ?? DEFAULT_CLIENT_SECRET;
    this.basicCredentials = `${this.clientId}:${this.clientSecret}`;
    this.initialSettings = mergeSettings(defaultSettings(), options.settings ?? {});
    this.current = structuredClone(this.initialSettings);
  }

  reset(): void {
    this.current = structuredClone(this.initialSettings);
    this.bucket.reset();
    this.state.reset();
    this.faults.clear();
    this.realistic.reset();
  }

  private profile(): AnswerProfile {
    return this.current.profile === 'realistic' ? this.realistic : SPEC_PROFILE;
  }

  async close(): Promise<void> {
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
    this.state.countUpstreamRequest();
    const route = matchRoute(req.method, path);
    if (!route) {
      req.resume();
      write(res, NOT_FOUND);
      return;
    }
    void this.serve(route, req, res);
  }

  private async serve(route: Route, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { endpoint } = route;
    const body = await readBody(req);
    if (!body.ok) {
      if (!body.tooLarge) return;
      this.state.countOutcome(endpoint, '413');
      write(res, { ...failure(413, 'request body too large'), headers: { connection: 'close' } });
      return;
    }
    if (endpoint !== 'token' && !this.bucket.take(this.current.maxRps, Date.now())) {
      // The provider's own limit (settings.maxRps): refused before anything is processed.
      const wait = this.bucket.waitSeconds();
      this.state.countOutcome(endpoint, '429');
      write(res, faultAnswer(endpoint, '429', wait));
      return;
    }
    const fault = this.faults.pick(endpoint);
    let answer: Answer | undefined;
    const processes = fault === undefined || fault === 'timeout' || fault.startsWith('accept-');
    if (processes) {
      try {
        answer = this.process(route, req, body.text, Date.now());
      } catch {
        answer = failure(500, 'internal error');
      }
    }
    if (fault !== undefined && fault !== 'timeout' && fault !== 'reset' && fault !== 'accept-reset') {
      // An 'accept-…' fault replaces the real answer of a processed request.
      answer = faultAnswer(endpoint, fault, this.current.retryAfterSec);
    }
    const latency = this.current.latencyMs[endpoint];
    if (latency > 0) await this.plumbing.sleep(latency);
    if (fault === 'reset' || fault === 'accept-reset') {
      this.state.countOutcome(endpoint, 'reset');
      req.socket.destroy();
      return;
    }
    if (fault === 'timeout') {
      // processed, never answered: the socket stays open until the client gives up or we close
      this.state.countOutcome(endpoint, 'timeout');
      this.plumbing.hold(res);
      return;
    }
    if (!answer) return;
    this.state.countOutcome(endpoint, String(answer.status));
    write(res, answer);
  }

  private process(route: Route, req: IncomingMessage, text: string, now: number): Answer {
    switch (route.endpoint) {
      case 'token':
        return this.token(req, text, now);
      case 'getTransfer':
        return this.basicAuthorized(req) ? this.getTransfer(text, now) : UNAUTHORIZED;
      case 'isEnabled':
        return this.basicAuthorized(req) ? json(200, this.profile().isEnabled(this.current.travelRule)) : UNAUTHORIZED;
      case 'sendTransaction':
        return this.bearerAuthorized(req, now) ? this.sendTransaction(route.walletId, text, now) : UNAUTHORIZED;
      case 'getWalletTransaction':
        return this.bearerAuthorized(req, now) ? this.getWalletTransaction(route.walletId, route.txid, now) : UNAUTHORIZED;
    }
  }

  private basicAuthorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization;
    if (!header || header.length < 7 || header.slice(0, 6).toLowerCase() !== 'basic ') return false;
    return Buffer.from(header.slice(6).trim(), 'base64').toString('utf8') === this.basicCredentials;
  }

  private bearerAuthorized(req: IncomingMessage, now: number): boolean {
    const header = req.headers.authorization;
    if (!header || header.length < 8 || header.slice(0, 7).toLowerCase() !== 'bearer ') return false;
    return this.state.tokenValid(header.slice(7).trim(), now);
  }

  private token(req: IncomingMessage, text: string, now: number): Answer {
    let fields: Record<string, unknown>;
    if ((req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded')) {
      fields = Object.fromEntries(new URLSearchParams(text));
    } else {
      const parsed = parseJson(text);
      if (!parsed.ok || !isObject(parsed.value)) {
        return json(400, { error: 'invalid_request', error_description: 'body must be a JSON object' });
      }
      fields = parsed.value;
    }
    if (fields.grant_type !== 'client_credentials' || fields.client_id !== this.clientId || fields.client_secret !== this.clientSecret) {
      return json(401, { error: 'invalid_client' });
    }
    const lifetime = this.current.tokenLifetimeSec;
    return json(
      200,
      this.profile().token({
        access_token: this.state.issueToken(lifetime, now),
        expires_in: Math.floor(lifetime),
        token_type: 'Bearer',
      }),
    );
  }

  private getTransfer(text: string, now: number): Answer {
    const parsed = parseJson(text);
    if (!parsed.ok || !isObject(parsed.value)) return failure(400, 'body must be a JSON object');
    const { wallet, sequenceId, txId } = parsed.value;
    if (!isObject(wallet)) return failure(400, 'wallet is required');
    const walletId = walletIdOf(wallet.walletId);
    if (walletId === undefined) return failure(400, 'wallet.walletId must be an integer');
    if (!nonEmptyString(wallet.coin)) return failure(400, 'wallet.coin is required');
    const coin = wallet.coin.toLowerCase();
    let matches: SimTransfer[];
    if (sequenceId !== undefined) {
      if (!nonEmptyString(sequenceId)) return failure(400, 'sequenceId must be a non-empty string');
      matches = this.state.findBySequenceId(walletId, sequenceId, now);
    } else if (txId !== undefined) {
      if (!nonEmptyString(txId)) return failure(400, 'txId must be a non-empty string');
      const found = this.state.findByTxid(walletId, txId, now);
      matches = found ? [found] : [];
    } else {
      return failure(400, 'sequenceId or txId is required');
    }
    const profile = this.profile();
    const settings = this.current;
    // A provider whose lookups ignore the sequenceId lists the wallet's transfers even when none is it.
    const listsWallet = !settings.narrowResults && settings.unmatchedListsWallet && sequenceId !== undefined;
    if (matches.length === 0 && !listsWallet) {
      const notFound = profile.transferNotFound();
      return json(notFound.status, notFound.body);
    }
    for (const transfer of matches) transfer.coin ??= coin;
    let listed = matches;
    if (!settings.narrowResults) {
      const others = this.state.othersInWallet(walletId, coin, new Set(matches), settings.otherTransfersListed, now);
      listed = [...matches, ...others];
    }
    if (listed.length === 0) {
      const notFound = profile.transferNotFound();
      return json(notFound.status, notFound.body);
    }
    listed.sort(newestFirst);
    const records = listed.map((transfer) =>
      profile.transaction(
        buildTransaction(transfer, {
          coin,
          txid: this.state.shownTxid(transfer, now),
          mixedCase: settings.mixedCaseAddresses,
          includeSequenceId: settings.includeSequenceIdInTransactions,
        }),
        transfer,
      ),
    );
    if (!settings.narrowResults) records.push(...profile.otherRecords(walletId, coin, matches[0] ?? listed[0]!, listed));
    return json(200, records);
  }

  private sendTransaction(walletIdText: string, text: string, now: number): Answer {
    if (!DIGITS.test(walletIdText) || !Number.isSafeInteger(Number(walletIdText))) {
      return failure(400, 'wallet id must be digits');
    }
    const parsed = parseJson(text);
    if (!parsed.ok || !isObject(parsed.value)) return failure(400, 'body must be a JSON object');
    const { txHex, halfSigned } = parsed.value;
    if (!nonEmptyString(txHex)) return failure(400, 'txHex must be a non-empty string');
    if (!isObject(halfSigned)) return failure(400, 'halfSigned must be an object');
    for (const field of ['txBase64', 'txHex', 'sequenceId'] as const) {
      if (!nonEmptyString(halfSigned[field])) return failure(400, `halfSigned.${field} must be a non-empty string`);
    }
    const result = this.state.accept(Number(walletIdText), txHex, halfSigned as HalfSigned, this.current, now);
    if (!result.accepted) {
      return failure(409, `transaction with sequenceId ${String(halfSigned.sequenceId)} was already submitted`);
    }
    const { transfer } = result;
    const record = this.profile().submitRecord(buildSubmitRecord(transfer, this.clientId), transfer);
    return { status: 200, body: submitRecordJson(record, transfer.derived, { amountAsDouble: this.current.amountAsDouble }) };
  }

  private getWalletTransaction(walletIdText: string, txid: string, now: number): Answer {
    if (!DIGITS.test(walletIdText)) return failure(400, 'wallet id must be digits');
    const transfer = this.state.findByTxid(Number(walletIdText), txid, now);
    if (!transfer) return failure(404, 'transaction not found');
    const record = buildWalletTransaction(transfer, this.state.shownTxid(transfer, now));
    return json(200, this.profile().walletTransaction(record, transfer));
  }
}

function originOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const sim = new SimulatorServer(options);
  const host = options.host ?? DEFAULT_HOST;
  await new Promise<void>((resolve, reject) => {
    sim.server.once('error', reject);
    sim.server.listen(options.port ?? 0, host, () => {
      sim.server.off('error', reject);
      resolve();
    });
  });
  const port = (sim.server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    url: originOf(host, port),
    port,
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    settings: () => structuredClone(sim.current),
    updateSettings: (patch) => {
      sim.current = mergeSettings(sim.current, patch);
    },
    setFault: (endpoint, plan) => {
      if (!isSimEndpoint(endpoint)) throw new SettingsError(`unknown endpoint: ${String(endpoint)}`);
      sim.faults.set(endpoint, parseFaultPlan(plan));
    },
    stats: () => sim.state.stats(),
    requestCount: () => sim.state.upstreamRequestCount(),
    transfer: (sequenceId) => sim.state.view(sequenceId, sim.clientId, Date.now()),
    setTxid: (sequenceId, txid) => {
      if (txid !== undefined && !nonEmptyString(txid)) throw new Error('txid must be a non-empty string');
      if (!sim.state.setTxid(sequenceId, txid, Date.now())) throw new Error(`unknown sequenceId: ${sequenceId}`);
    },
    expireTokens: () => sim.state.expireTokens(),
    reset: () => sim.reset(),
    close: () => {
      closing ??= sim.close();
      return closing;
    },
  };
}
