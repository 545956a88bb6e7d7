/**
 * A pass-through in front of the simulator's token endpoint that remembers every access token it hands
 * out. The simulator keeps its issued tokens private (SimState.tokens), and the leak checks of the chaos
 * suite need the very tokens the workers held, not one the test requested for itself: so the workers'
 * CUSTODY_TOKEN_URL points here, and this forwards each request unchanged and each answer (status,
 * content-type, retry-after, body) byte for byte, faults included.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TokenRecorder {
  /** `http://127.0.0.1:<port>/oauth/token` */
  readonly url: string;
  /** Every distinct access token of a 200 answer, in issue order. */
  tokens(): string[];
  /** Token requests forwarded (any answer). */
  requests(): number;
  close(): Promise<void>;
}

const FORWARDED_HEADERS = ['content-type', 'retry-after'];

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** `target`: the simulator's token endpoint, e.g. `${sim.url}/oauth/token`. */
export async function startTokenRecorder(target: string): Promise<TokenRecorder> {
  const issued: string[] = [];
  const seen = new Set<string>();
  let forwarded = 0;

  const server = createServer((req, res) => {
    // The simulator's 'timeout' fault never answers: when the worker gives up and drops its socket,
    // drop ours upstream too, so the held request does not outlive the worker's.
    const upstream = new AbortController();
    res.on('close', () => upstream.abort());
    void (async () => {
      try {
        const body = await readAll(req);
        forwarded += 1;
        const answer = await fetch(target, {
          method: req.method ?? 'POST',
          headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
          body: body.length > 0 ? body : undefined,
          signal: upstream.signal,
        });
        const text = await answer.text();
        if (answer.status === 200) {
          try {
            const token = (JSON.parse(text) as { access_token?: unknown }).access_token;
            if (typeof token === 'string' && token !== '' && !seen.has(token)) {
              seen.add(token);
              issued.push(token);
            }
          } catch {
            // a 'malformed' fault: no token was issued
          }
        }
        const headers: Record<string, string> = {};
        for (const name of FORWARDED_HEADERS) {
          const value = answer.headers.get(name);
          if (value !== null) headers[name] = value;
        }
        res.writeHead(answer.status, headers);
        res.end(text);
      } catch {
        // Upstream dropped (a 'reset' fault) or we aborted: drop the client's socket the same way.
        res.destroy();
      }
    })();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/oauth/token`,
    tokens: () => [...issued],
    requests: () => forwarded,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
