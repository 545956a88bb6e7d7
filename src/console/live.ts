import { Cluster } from 'ioredis';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../logger.ts';
import type { RedisClient } from '../redis.ts';
import { summary, type PageDeps } from './pages.ts';

/**
 * How long one XREAD waits for a new event before the summary is read again anyway: an attention
 * reason with a time bound (send-unknown) starts without any event, so the page learns of it at most
 * this late.
 */
export const LIVE_BLOCK_MS = 2_000;
/** At most one summary per client this often, however many events arrive (a burst is one update). */
const LIVE_MIN_INTERVAL_MS = 250;
/** Live pages at once; more are answered 503 (each holds a Redis connection while open). */
export const MAX_LIVE_CLIENTS = 32;

/**
 * The console's live updates (`GET /console/events`, Server-Sent Events): one `summary` message with
 * the counts and the needs-attention list at once, then again whenever the events stream moved or
 * LIVE_BLOCK_MS passed and the summary differs from the last one sent. Each client reads the stream on
 * a connection of its own (XREAD BLOCK holds it), closed when the client goes or the server closes.
 */
export class LiveUpdates {
  readonly #deps: PageDeps;
  readonly #redis: RedisClient;
  readonly #stream: string;
  readonly #log: Logger;
  readonly #clients = new Set<() => void>();

  constructor(deps: PageDeps, stream: string, log: Logger) {
    this.#deps = deps;
    this.#redis = deps.app.redis;
    this.#stream = stream;
    this.#log = log;
  }

  async serve(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (this.#clients.size >= MAX_LIVE_CLIENTS) {
      return void reply.code(503).header('retry-after', '10').send({ error: 'TOO_MANY_LIVE_PAGES' });
    }
    const redis = this.#redis;
    const connection: RedisClient = redis instanceof Cluster ? redis.duplicate() : redis.duplicate();
    connection.on('error', () => undefined); // reported by the read loop below, once
    let open = true;
    const stop = () => {
      if (!open) return;
      open = false;
      this.#clients.delete(stop);
      connection.disconnect();
      reply.raw.end();
    };
    this.#clients.add(stop);
    request.raw.on('close', stop);

    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-content-type-options': 'nosniff',
    });
    void this.#loop(connection, reply, () => open).finally(stop);
  }

  /** Ends every live page (the server is closing). */
  closeAll(): void {
    for (const stop of [...this.#clients]) stop();
  }

  async #loop(connection: RedisClient, reply: FastifyReply, open: () => boolean): Promise<void> {
    let last = '';
    let cursor = '$';
    try {
      while (open()) {
        const text = JSON.stringify(await summary(this.#deps));
        if (text !== last && open()) {
          reply.raw.write(`event: summary\ndata: ${text}\n\n`);
          last = text;
        }
        const started = Date.now();
        const read = await connection.xread('COUNT', 100, 'BLOCK', LIVE_BLOCK_MS, 'STREAMS', this.#stream, cursor);
        const entries = read?.[0]?.[1];
        if (entries && entries.length > 0) cursor = entries[entries.length - 1]![0];
        else if (open()) reply.raw.write(': idle\n\n');
        const rest = LIVE_MIN_INTERVAL_MS - (Date.now() - started);
        if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
      }
    } catch (error) {
      if (open()) this.#log.warn({ err: error }, 'console live updates stopped');
    }
  }
}
