import { Pool, type Dispatcher } from 'undici';
import { Deadline } from '../deadline.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from '../errors.ts';
import { NO_ANSWER_STATUS, type BudgetTag, type RequestHooks } from '../port.ts';
import { DEFAULT_MAX_PAUSE_MS } from '../../timing.ts';

/** What a provider's 429 asked for: the port's type (what `hooks.onRateLimited` is told). */
export type { ProviderRateLimit } from '../port.ts';

export interface TransportOptions {
  /** Whole-request deadline: connect, headers and body together. */
  timeoutMs: number;
  connectTimeoutMs: number;
  /** Keep-alive connections per origin. */
  connections: number;
  /** CUSTODY_MAX_PAUSE: a Retry-After above this is read as this (default DEFAULT_MAX_PAUSE_MS). */
  maxPauseMs?: number | undefined;
}

export interface TransportRequest {
  endpoint: CustodyEndpoint;
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  /** An overall deadline over a larger call (a whole send); the request is cut at it or at `timeoutMs`. */
  signal?: AbortSignal;
  /** Called once per request that was (or may have been) written, when it ends (counts HTTP sends). */
  onDispatch?: () => void;
  /** The request's class in the budget, and on whose behalf (a sequenceId); passed to `hooks.beforeRequest`. */
  budget?: BudgetTag | undefined;
  /**
   * The hooks of the call this request is made for (custody/port.ts, RequestHooks): the budget's
   * `beforeRequest`, the metrics' `afterRequest`, `onRateLimited` on a 429, `trace` around it all.
   */
  hooks?: RequestHooks | undefined;
  /**
   * Called synchronously immediately before the request's first byte is handed to the socket (undici's
   * onRequestStart, in the same tick as the write). If it throws, nothing is written, and the request
   * rejects with what it threw.
   */
  beforeWrite?: (() => void) | undefined;
}

type GuardedDispatchOptions = Dispatcher.DispatchOptions & { beforeWrite?: () => void };

/**
 * Runs a request's `beforeWrite` where undici starts writing it: on a free connection, right before
 * the headers and body are written; on a busy one, once it is that request's turn. What it throws
 * aborts the request there, before any byte leaves (undici checks `aborted` before it writes).
 */
const writeGuard: Dispatcher.DispatchInterceptor = (dispatch) => (opts, handler) => {
  const guard = (opts as GuardedDispatchOptions).beforeWrite;
  if (!guard) return dispatch(opts, handler);
  return dispatch(opts, {
    ...bindHandler(handler),
    onRequestStart(controller, context) {
      try {
        guard();
      } catch (error) {
        controller.abort(error as Error);
        return;
      }
      handler.onRequestStart?.(controller, context);
    },
  });
};

/** The handler's callbacks, bound to it (a handler's methods use `this`). */
function bindHandler(handler: Dispatcher.DispatchHandler): Dispatcher.DispatchHandler {
  return {
    onRequestUpgrade: handler.onRequestUpgrade?.bind(handler),
    onResponseStart: handler.onResponseStart?.bind(handler),
    onResponseData: handler.onResponseData?.bind(handler),
    onResponseEnd: handler.onResponseEnd?.bind(handler),
    onResponseError: handler.onResponseError?.bind(handler),
    onResponseStarted: handler.onResponseStarted?.bind(handler),
    onBodySent: handler.onBodySent?.bind(handler),
    onRequestSent: handler.onRequestSent?.bind(handler),
  };
}

export interface TransportResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** On a 429: the pause it imposes, ms (its Retry-After capped at `maxPauseMs`). */
  retryAfterMs?: number;
}

/** Used when a 429 carries no usable Retry-After. */
const DEFAULT_RETRY_AFTER_MS = 1_000;
/**
 * Retry-After in seconds or as an HTTP date (RFC 9110 10.2.3), in ms, as the provider asked it (1 s
 * when absent or unusable); retryAfterPause caps it.
 */
export function parseRetryAfter(header: string | string[] | undefined, now = Date.now()): number {
  const value = retryAfterHeader(header);
  if (!value) return DEFAULT_RETRY_AFTER_MS;
  const ms = /^\d+$/.test(value.trim()) ? Number(value.trim()) * 1000 : Date.parse(value) - now;
  if (!Number.isFinite(ms) || ms < 0) return DEFAULT_RETRY_AFTER_MS;
  return ms;
}

/** The header's one value (the first, when it came several times). */
export function retryAfterHeader(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}

/** The pause a Retry-After of `askedMs` imposes: at most `maxPauseMs` (CUSTODY_MAX_PAUSE), so a broken header cannot park work for days. */
export function retryAfterPause(askedMs: number, maxPauseMs: number): number {
  return Math.min(askedMs, maxPauseMs);
}

/** Upstream bodies are small records; anything above this is garbage, not a transfer. */
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Failures before a connection existed: the request cannot have reached upstream. */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
/**
 * The request was refused by undici or Node before any byte was written (a header value with CR/LF,
 * an invalid method or path): it never reached upstream, and it will fail the same way every time.
 */
const NEVER_WRITTEN = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_ARG_VALUE',
  'ERR_INVALID_CHAR',
  'ERR_INVALID_HTTP_TOKEN',
  'ERR_HTTP_INVALID_HEADER_VALUE',
  'ERR_INVALID_URL',
]);

/** The overall deadline passed before the request was written: nothing reached upstream. */
function notPastDeadline(req: TransportRequest): void {
  if (req.signal?.aborted) {
    throw new CustodyError(CustodyErrorCode.TIMEOUT, `${req.endpoint}: deadline reached before the request was sent`, {
      endpoint: req.endpoint,
      maybeProcessed: false,
    });
  }
}

/**
 * HTTP to a custody provider's API over undici: one keep-alive pool per origin, explicit connect, header and
 * body time-outs, and a deadline over the whole request. Transport failures become CustodyErrors;
 * HTTP statuses are left to the caller, which knows what each one means for its endpoint. Each
 * request runs the hooks it carries (`hooks`: its call's budget, metrics and tracing), so an adapter
 * that passes its call's hooks on every request it makes has done its duty (custody/port.ts).
 */
export class Transport {
  readonly #pools = new Map<string, Dispatcher>();
  readonly #options: TransportOptions;

  constructor(options: TransportOptions) {
    this.#options = options;
  }

  request(req: TransportRequest): Promise<TransportResponse> {
    const hooks = req.hooks;
    return hooks?.trace ? hooks.trace(req.endpoint, () => this.#request(req)) : this.#request(req);
  }

  async #request(req: TransportRequest): Promise<TransportResponse> {
    notPastDeadline(req);
    await req.hooks?.beforeRequest(req.endpoint, req.signal, req.budget);
    notPastDeadline(req);
    const started = performance.now();
    let status: string = NO_ANSWER_STATUS;
    let code: string = NO_ANSWER_STATUS;
    // The request's own time-out, or the caller's overall deadline when that comes first.
    const deadline = new Deadline(this.#options.timeoutMs, req.signal);
    // What `beforeWrite` threw: the request was never written, and the caller gets exactly that.
    let refusal: { error: unknown } | undefined;
    const beforeWrite = req.beforeWrite;
    const guard = beforeWrite
      ? () => {
          try {
            beforeWrite();
          } catch (error) {
            refusal = { error };
            throw error;
          }
        }
      : undefined;
    try {
      const options: Dispatcher.RequestOptions & GuardedDispatchOptions = {
        method: req.method,
        path: req.url.pathname + req.url.search,
        headers: req.headers,
        body: req.body ?? null,
        signal: deadline.signal,
        ...(guard ? { beforeWrite: guard } : {}),
      };
      const response = await this.#pool(req.url.origin).request(options);
      req.onDispatch?.();
      const text = await response.body.text();
      status = String(response.statusCode);
      if (response.statusCode === 429) {
        const header = response.headers['retry-after'];
        const askedMs = parseRetryAfter(header);
        const retryAfterMs = retryAfterPause(askedMs, this.#options.maxPauseMs ?? DEFAULT_MAX_PAUSE_MS);
        req.hooks?.onRateLimited(retryAfterMs, { endpoint: req.endpoint, retryAfter: retryAfterHeader(header), askedMs });
        return { status: response.statusCode, headers: response.headers, text, retryAfterMs };
      }
      return { status: response.statusCode, headers: response.headers, text };
    } catch (error) {
      if (refusal) {
        code = 'NOT_WRITTEN';
        throw refusal.error;
      }
      const mapped = mapTransportError(error, req.endpoint);
      // Counted as a send only when it may have reached upstream (not: never connected, never written).
      if (mapped.maybeProcessed) req.onDispatch?.();
      code = mapped.code;
      throw mapped;
    } finally {
      deadline.clear();
      req.hooks?.afterRequest(req.endpoint, status, code, performance.now() - started);
    }
  }

  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((pool) => pool.close().catch(() => pool.destroy())));
  }

  #pool(origin: string): Dispatcher {
    let pool = this.#pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.#options.connections,
        connectTimeout: this.#options.connectTimeoutMs,
        headersTimeout: this.#options.timeoutMs,
        bodyTimeout: this.#options.timeoutMs,
        keepAliveTimeout: 30_000,
        maxResponseSize: MAX_RESPONSE_BYTES,
      }).compose(writeGuard);
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
  if (NEVER_WRITTEN.has(code)) {
    return new CustodyError(CustodyErrorCode.INVALID_REQUEST, `${endpoint}: request refused before it was sent (${code})`, {
      endpoint,
      maybeProcessed: false,
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
