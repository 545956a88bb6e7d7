/**
 * A TCP proxy in front of one Redis server that can hold a connection's replies: what a network
 * partition (or a peer frozen right after its command left) looks like to the client. Commands always
 * reach Redis at once and are executed there; only their answers wait.
 *
 *   const proxy = await startRedisProxy(6379);          // clients connect to proxy.url
 *   const held = proxy.holdRepliesAfter((bytes) => bytes.includes('"mode":"take"'));
 *   await held;                                          // that command went out, its reply is held
 *   proxy.release();                                     // everything held is delivered, in order
 *
 * Every connection is proxied on its own; only the one on which `match` held is held. `retarget(port)`
 * sends new connections to another server: one address in front of a failover.
 */
import { createServer, createConnection, type Socket } from 'node:net';

export interface RedisProxy {
  /** `redis://127.0.0.1:<port>`: the proxy's address (add credentials or a db number if the target needs them). */
  readonly url: string;
  readonly port: number;
  /**
   * Watches the client bytes of every connection from now on. The first connection on which `match`
   * returns true is held: from that chunk on (its own reply included), nothing Redis sends on it reaches
   * the client until release(). Resolves once that chunk has been forwarded to Redis. `match` sees the
   * bytes the connection sent since this call, up to the last 4 KiB before the chunk plus the chunk, so
   * a pattern cut across two TCP segments still matches. One hold at a time.
   */
  holdRepliesAfter(match: (clientBytes: Buffer) => boolean): Promise<void>;
  /**
   * Delivers everything held, in order, and lets the held connection's replies through again. A hold
   * armed but not yet matched stays armed.
   */
  release(): void;
  /**
   * New connections go to this Redis from now on (the address of a managed Redis moved to the node it
   * promoted); open connections stay where they are.
   */
  retarget(port: number, host?: string): void;
  /** Drops every connection (held bytes are discarded) and stops listening; an unmatched hold never resolves. */
  close(): Promise<void>;
}

/** How much of a connection's earlier client bytes `match` sees along with a new chunk. */
const MATCH_TAIL_BYTES = 4096;

interface Link {
  client: Socket;
  server: Socket;
  /** Client bytes since the matcher was armed (bounded), for matches cut across chunks. */
  tail: Buffer;
  /** Server bytes held back, in order; undefined while replies flow. */
  held: Buffer[] | undefined;
  /** Redis closed the connection while held: end the client once the held bytes are out. */
  serverEnded: boolean;
}

/** Writes `chunk` to `to`, pausing `from` until `to` drains when its buffer is full. */
function pipeChunk(from: Socket, to: Socket, chunk: Buffer): void {
  if (to.destroyed) return;
  if (!to.write(chunk) && !from.isPaused()) {
    from.pause();
    to.once('drain', () => from.resume());
  }
}

export async function startRedisProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<RedisProxy> {
  const links = new Set<Link>();
  let matcher: { match: (clientBytes: Buffer) => boolean; matched: () => void } | undefined;
  let heldLink: Link | undefined;
  let target = { host: targetHost, port: targetPort };

  const server = createServer((client) => {
    const upstream = createConnection(target);
    const link: Link = { client, server: upstream, tail: Buffer.alloc(0), held: undefined, serverEnded: false };
    links.add(link);
    client.setNoDelay(true);
    upstream.setNoDelay(true);

    client.on('data', (chunk: Buffer) => {
      if (matcher && !heldLink) {
        const window = Buffer.concat([link.tail, chunk]);
        link.tail = window.subarray(Math.max(0, window.length - MATCH_TAIL_BYTES));
        if (matcher.match(window)) {
          // Held before the command is forwarded: its reply cannot slip through.
          link.held = [];
          heldLink = link;
          const { matched } = matcher;
          matcher = undefined;
          pipeChunk(client, upstream, chunk);
          matched();
          return;
        }
      }
      pipeChunk(client, upstream, chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (link.held) link.held.push(chunk);
      else pipeChunk(upstream, client, chunk);
    });

    // The client gone: so is its Redis connection. Redis gone: the client gets what was sent first
    // (at release() when held), then the end of the connection.
    client.on('error', () => {});
    upstream.on('error', () => {});
    client.on('close', () => {
      links.delete(link);
      if (heldLink === link) heldLink = undefined;
      upstream.destroy();
    });
    upstream.on('close', (hadError) => {
      if (link.held) link.serverEnded = true;
      else if (hadError) client.destroy();
      else client.end();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('redis proxy: no TCP address');
  const port = address.port;

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    holdRepliesAfter(match) {
      if (matcher || heldLink) return Promise.reject(new Error('redis proxy: a hold is already armed or in place; release() it first'));
      for (const link of links) link.tail = Buffer.alloc(0);
      return new Promise<void>((resolve) => {
        matcher = { match, matched: resolve };
      });
    },
    release() {
      const link = heldLink;
      heldLink = undefined;
      if (!link?.held) return;
      const held = link.held;
      link.held = undefined;
      for (const chunk of held) pipeChunk(link.server, link.client, chunk);
      if (link.serverEnded) link.client.end();
    },
    retarget(port, host = '127.0.0.1') {
      target = { host, port };
    },
    async close() {
      matcher = undefined;
      heldLink = undefined;
      for (const link of links) {
        link.client.destroy();
        link.server.destroy();
      }
      links.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
