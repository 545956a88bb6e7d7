/**
 * A real HTTP gateway in front of the custody simulator (a reverse proxy on loopback), as a CDN or an
 * API gateway stands in front of a real provider. Every request is forwarded as it came; a rule may
 * replace the origin's answer, after the origin processed the request, with a status of the gateway's
 * own (500, 520, 522, 524 …): "the origin took the request but did not answer properly". It records
 * every request in the order they arrive (endpoint, sequenceId, the status the client saw once there
 * is one), so a test can check what was asked before what, a request the origin holds unanswered
 * (the simulators' `timeout` fault, which processes it first) included.
 *
 * It knows the paths of both providers' simulators: the first provider's (endpoint names as its
 * simulator's: sendTransaction, getTransfer…) and BitGo's (docs/bitgo-api.md; `bitgo:` and the BitGo
 * simulator's endpoint name). `role` says what a request is for either: a send, a lookup by sequenceId,
 * or the detail of one transaction.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type GatewayEndpoint =
  | 'sendTransaction'
  | 'getTransfer'
  | 'getWalletTransaction'
  | 'isEnabled'
  | 'token'
  | 'bitgo:sendTransaction'
  | 'bitgo:transferBySequenceId'
  | 'bitgo:getTransfer'
  | 'other';

/** What a request is for, whichever the provider: a send, a lookup by sequenceId, one transaction's detail. */
export type GatewayRole = 'send' | 'lookup' | 'detail' | 'other';

export interface GatewayRequest {
  endpoint: GatewayEndpoint;
  role: GatewayRole;
  /**
   * The sequenceId the request names. First provider: in the body (sendTransaction: halfSigned.sequenceId;
   * get-transfer: sequenceId). BitGo: `sequenceId` at the top of the send's body; the last path segment
   * of a lookup.
   */
  sequenceId: string | undefined;
}

export interface GatewayLogEntry extends GatewayRequest {
  /** What the origin answered, and what the client got: 0 while there is no answer (the origin holds it). */
  originStatus: number;
  status: number;
}

/** What the gateway does with one answer of the origin (its status and body): undefined forwards it as is. */
export type GatewayRule = (request: GatewayRequest, originStatus: number, originBody: string) => { replaceStatus: number } | undefined;

export interface Gateway {
  url: string;
  log: GatewayLogEntry[];
  setRule(rule: GatewayRule | undefined): void;
  close(): Promise<void>;
}

const ROLES: Record<GatewayEndpoint, GatewayRole> = {
  sendTransaction: 'send',
  getTransfer: 'lookup',
  getWalletTransaction: 'detail',
  isEnabled: 'other',
  token: 'other',
  'bitgo:sendTransaction': 'send',
  'bitgo:transferBySequenceId': 'lookup',
  'bitgo:getTransfer': 'detail',
  other: 'other',
};

/** BitGo's wallet routes (docs/bitgo-api.md): `/api/v2/{coin}/wallet/{walletId}/…`, the rest captured. */
const BITGO_WALLET_ROUTE = /^\/api\/v2\/[^/]+\/wallet\/[^/]+\/(.+)$/;

/** A BitGo route, with the sequenceId of a lookup (from its path); undefined for any other path. */
function bitgoRouteOf(method: string | undefined, path: string): { endpoint: GatewayEndpoint; sequenceId?: string } | undefined {
  const rest = BITGO_WALLET_ROUTE.exec(path.split('?')[0]!)?.[1];
  if (rest === undefined) return undefined;
  if (method === 'POST' && rest === 'tx/send') return { endpoint: 'bitgo:sendTransaction' };
  const lookup = /^transfer\/sequenceId\/([^/]+)$/.exec(rest);
  if (method === 'GET' && lookup) return { endpoint: 'bitgo:transferBySequenceId', sequenceId: decodeSegment(lookup[1]!) };
  if (method === 'GET' && /^transfer\/[^/]+$/.test(rest)) return { endpoint: 'bitgo:getTransfer' };
  return { endpoint: 'other' };
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The first provider's paths. */
function endpointOf(path: string): GatewayEndpoint {
  if (path.endsWith('/sendTransaction')) return 'sendTransaction';
  if (path.endsWith('/api/wallet/get-transfer')) return 'getTransfer';
  if (/\/api\/wallet\/[^/]+\/txid\//.test(path)) return 'getWalletTransaction';
  if (path.endsWith('/api/travel-rule/is-enabled')) return 'isEnabled';
  if (path.endsWith('/oauth/token')) return 'token';
  return 'other';
}

/** BitGo's send body: `{ sequenceId, txHex }`, the sequenceId a string (or, as BitGo also takes, a number). */
function bitgoSendSequenceIdOf(body: string): string | undefined {
  try {
    const value = (JSON.parse(body) as { sequenceId?: unknown }).sequenceId;
    return typeof value === 'string' || typeof value === 'number' ? String(value) : undefined;
  } catch {
    return undefined;
  }
}

function classify(method: string | undefined, path: string, body: string): GatewayRequest {
  const bitgo = bitgoRouteOf(method, path);
  if (bitgo) {
    const sequenceId = bitgo.endpoint === 'bitgo:sendTransaction' ? bitgoSendSequenceIdOf(body) : bitgo.sequenceId;
    return { endpoint: bitgo.endpoint, role: ROLES[bitgo.endpoint], sequenceId };
  }
  const endpoint = endpointOf(path);
  return { endpoint, role: ROLES[endpoint], sequenceId: sequenceIdOf(body) };
}

function sequenceIdOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { sequenceId?: unknown; halfSigned?: { sequenceId?: unknown } };
    const value = parsed.halfSigned?.sequenceId ?? parsed.sequenceId;
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

async function readBody(message: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of message) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startGateway(origin: string): Promise<Gateway> {
  const target = new URL(origin);
  let rule: GatewayRule | undefined;
  const log: GatewayLogEntry[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const body = await readBody(req);
      const path = req.url ?? '/';
      const seen = classify(req.method, path, body.toString('utf8'));
      // Logged before it is forwarded: the origin may process it and never answer.
      const entry: GatewayLogEntry = { ...seen, originStatus: 0, status: 0 };
      log.push(entry);
      const upstream = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path, headers: { ...req.headers, host: target.host } },
        (answer) => {
          void readBody(answer).then((text) => {
            const originStatus = answer.statusCode ?? 502;
            const replace = rule?.(seen, originStatus, text.toString('utf8'));
            if (replace) {
              // The origin processed the request; the client gets the gateway's own error page.
              Object.assign(entry, { originStatus, status: replace.replaceStatus });
              res.writeHead(replace.replaceStatus, { 'content-type': 'text/html' });
              res.end(`<html><body>${replace.replaceStatus}: origin error</body></html>`);
              return;
            }
            Object.assign(entry, { originStatus, status: originStatus });
            const headers = { ...answer.headers };
            delete headers['transfer-encoding'];
            delete headers.connection;
            res.writeHead(originStatus, headers);
            res.end(text);
          });
        },
      );
      upstream.on('error', () => {
        entry.status = 502;
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body>502: bad gateway</body></html>');
      });
      upstream.end(body);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    setRule(next) {
      rule = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
