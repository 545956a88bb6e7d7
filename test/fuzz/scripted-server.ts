/**
 * A tiny local HTTP server for fuzzing the custody client: it records every request line exactly as it
 * arrived and answers whatever the test scripted, including answers no real server should give
 * (truncated bodies, a dropped connection, no answer at all).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /**
   * normal: status, headers, body. hang: read the request, never answer. reset: drop the connection
   * before any answer. cut: send headers and half the body with a longer Content-Length, then drop.
   */
  mode?: 'normal' | 'hang' | 'reset' | 'cut';
}

export interface RecordedRequest {
  method: string;
  /** The request target as sent on the wire (path and query), undecoded. */
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface ScriptedServer {
  url: string;
  requests: RecordedRequest[];
  /** Decides each answer; replace it between runs. */
  respond: (request: RecordedRequest) => Reply;
  close(): Promise<void>;
}

export async function startScriptedServer(respond: (request: RecordedRequest) => Reply): Promise<ScriptedServer> {
  const sockets = new Set<Socket>();
  const hanging = new Set<ServerResponse>();
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      server.requests.push(request);
      let reply: Reply;
      try {
        reply = server.respond(request);
      } catch (error) {
        reply = { status: 599, body: `scripted server: respond threw ${(error as Error).message}` };
      }
      const body = reply.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(reply.body) ? reply.body : Buffer.from(reply.body, 'utf8');
      switch (reply.mode ?? 'normal') {
        case 'hang':
          hanging.add(res);
          res.on('close', () => hanging.delete(res));
          return;
        case 'reset':
          req.socket.destroy();
          return;
        case 'cut':
          res.writeHead(reply.status, { ...reply.headers, 'content-length': String(body.length + 100) });
          res.write(body.subarray(0, Math.floor(body.length / 2)), () => req.socket.destroy());
          return;
        default:
          res.writeHead(reply.status, { ...reply.headers, 'content-length': String(body.length) });
          res.end(body);
      }
    });
  };
  const http = createServer(handle);
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // Header validation of node:http would refuse some scripted statuses; keep them on the wire anyway.
  http.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;

  const server: ScriptedServer = {
    url: `http://127.0.0.1:${port}`,
    requests: [],
    respond,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
  return server;
}
