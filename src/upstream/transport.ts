import { Pool } from 'undici';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from './errors.ts';

export interface TransportOptions {
  /** Whole-request deadline: connect, headers and body together. */
  timeoutMs: number;
  connectTimeoutMs: number;
  /** Keep-alive connections per origin. */
  connections: number;
  /** Called before every request; a shared rate limiter plugs in here. */
  beforeRequest?: (endpoint: CustodyEndpoint) => Promise<void>;
  /** Called after every request with its outcome: HTTP status, or the error code when there was none. */
  observe?: (endpoint: CustodyEndpoint, outcome: string, durationMs: number) => void;
  /** Wraps every request (a tracing span) when tracing is on. */
  trace?: <T>(endpoint: CustodyEndpoint, call: () => Promise<T>) => Promise<T>;
}

export interface TransportRequest {
  endpoint: CustodyEndpoint;
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

export interface TransportResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** Upstream bodies are small records; anything above this is garbage, not a transfer. */
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Failures before a connection existed: the request cannot have reached upstream. */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * HTTP to the custody API over undici: one keep-alive pool per origin, explicit connect, header and
 * body time-outs, and a deadline over the whole request. Transport failures become CustodyErrors;
 * HTTP statuses are left to the caller, which knows what each one means for its endpoint.
 */
export class Transport {
  readonly #pools = new Map<string, Pool>();
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.#options = options;
  }

  request(req: TransportRequest): Promise<TransportResponse> {
    const trace = this.#options.trace;
    return trace ? trace(req.endpoint, () => this.#request(req)) : this.#request(req);
  }

  async #request(req: TransportRequest): Promise<TransportResponse> {
    await this.#options.beforeRequest?.(req.endpoint);
    const started = performance.now();
    let outcome = 'error';
    try {
      const response = await this.#pool(req.url.origin).request({
        method: req.method,
        path: req.url.pathname + req.url.search,
        headers: req.headers,
        body: req.body ?? null,
        signal: AbortSignal.timeout(this.#options.timeoutMs),
      });
      const text = await response.body.text();
      outcome = String(response.statusCode);
      return { status: response.statusCode, headers: response.headers, text };
    } catch (error) {
      const mapped = mapTransportError(error, req.endpoint);
      outcome = mapped.code;
      throw mapped;
    } finally {
      this.#options.observe?.(req.endpoint, outcome, performance.now() - started);
    }
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.close().catch(() => pool.destroy())));
  }

  #pool(origin: string): Pool {
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.#options.connections,
        connectTimeout: this.#options.connectTimeoutMs,
        headersTimeout: this.#options.timeoutMs,
        bodyTimeout: this.#options.timeoutMs,
        keepAliveTimeout: 30_000,
        maxResponseSize: MAX_RESPONSE_BYTES,
      });
      this.#pools.set(origin, pool);
    }
    return pool;
  }
}

function mapTransportError(error: unknown, endpoint: CustodyEndpoint): CustodyError {
  if (error instanceof CustodyError) return error;
  const err = error as { name?: string; code?: string; cause?: { code?: string } };
  const code = err?.code ?? err?.cause?.code ?? 'unknown';
  if (err?.name === 'TimeoutError' || TIMEOUT_CODES.has(code)) {
    return new CustodyError(CustodyErrorCode.TIMEOUT, `${endpoint}: no answer within the time-out`, {
      endpoint,
      maybeProcessed: code !== 'UND_ERR_CONNECT_TIMEOUT',
      cause: error,
    });
  }
  if (err?.code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
    return new CustodyError(CustodyErrorCode.BAD_RESPONSE, `${endpoint}: response larger than ${MAX_RESPONSE_BYTES} bytes`, {
      endpoint,
      cause: error,
    });
  }
  return new CustodyError(CustodyErrorCode.UNAVAILABLE, `${endpoint}: connection failed (${code})`, {
    endpoint,
    maybeProcessed: !NEVER_CONNECTED.has(code),
    cause: error,
  });
}
