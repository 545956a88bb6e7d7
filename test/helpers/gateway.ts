/**
 * A real HTTP gateway in front of the custody simulator (a reverse proxy on loopback), as a CDN or an
 * API gateway stands in front of a real provider. Every request is forwarded as it came; a rule may
 * replace the origin's answer, after the origin processed the request, with a status of the gateway's
 * own (500, 520, 522, 524 …): "the origin took the request but did not answer properly". It records
 * every request in order (endpoint, sequenceId, the status the client saw), so a test can check what
 * was asked before what.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type GatewayEndpoint = 'sendTransaction' | 'getTransfer' | 'getWalletTransaction' | 'isEnabled' | 'token' | 'other';

export interface GatewayRequest {
  endpoint: GatewayEndpoint;
  /** The sequenceId in the body (sendTransaction: halfSigned.sequenceId; get-transfer: sequenceId). */
  sequenceId: string | undefined;
}

export interface GatewayLogEntry extends GatewayRequest {
  /** What the origin answered, and what the client got. */
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

function endpointOf(path: string): GatewayEndpoint {
  if (path.endsWith('/sendTransaction')) return 'sendTransaction';
  if (path.endsWith('/api/wallet/get-transfer')) return 'getTransfer';
  if (/\/api\/wallet\/[^/]+\/txid\//.test(path)) return 'getWalletTransaction';
  if (path.endsWith('/api/travel-rule/is-enabled')) return 'isEnabled';
  if (path.endsWith('/oauth/token')) return 'token';
  return 'other';
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
      const seen: GatewayRequest = { endpoint: endpointOf(path), sequenceId: sequenceIdOf(body.toString('utf8')) };
      const upstream = httpRequest(
        { host: target.hostname, port: target.port, method: req.method, path, headers: { ...req.headers, host: target.host } },
        (answer) => {
          void readBody(answer).then((text) => {
            const originStatus = answer.statusCode ?? 502;
            const replace = rule?.(seen, originStatus, text.toString('utf8'));
            if (replace) {
              // The origin processed the request; the client gets the gateway's own error page.
              log.push({ ...seen, originStatus, status: replace.replaceStatus });
              res.writeHead(replace.replaceStatus, { 'content-type': 'text/html' });
              res.end(`<html><body>${replace.replaceStatus}: origin error</body></html>`);
              return;
            }
            log.push({ ...seen, originStatus, status: originStatus });
            const headers = { ...answer.headers };
            delete headers['transfer-encoding'];
            delete headers.connection;
            res.writeHead(originStatus, headers);
            res.end(text);
          });
        },
      );
      upstream.on('error', () => {
        log.push({ ...seen, originStatus: 0, status: 502 });
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
