import type { Agent } from 'undici';
import { request } from 'undici';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { classifyFailure, classifyStatus, nextTryDelay, type TryResult } from './answer.ts';
import type { WebhookEndpoint } from './endpoints.ts';
import { webhookHeaders } from './message.ts';
import type { EndpointStore, QueuedDelivery } from './store.ts';

/** Transfers whose events one process delivers to one endpoint at once (each transfer one at a time). */
export const WEBHOOK_CONCURRENCY = 8;
/** How often an idle endpoint looks for due deliveries (a new event wakes it at once in this process). */
export const WEBHOOK_POLL_MS = 500;
/** Most of an answer's body read (then dropped, never logged): enough to keep a small answer's connection. */
export const WEBHOOK_MAX_ANSWER_BYTES = 64 * 1024;
/** A lease outlives the try's time-out by this much: the bookkeeping after the answer. */
const LEASE_MARGIN_MS = 5_000;

export interface DispatcherOptions {
  endpoint: WebhookEndpoint;
  store: EndpointStore;
  agent: Agent;
  timeoutMs: number;
  retryScheduleMs: readonly number[];
  logger: Logger;
  metrics: Metrics;
}

/**
 * Delivers one endpoint's queued events: every WEBHOOK_POLL_MS (or when woken) it leases the lanes
 * that are due, up to WEBHOOK_CONCURRENCY tried at once, and tries the head of each. Every step is
 * safe to repeat after a crash: a lease that ends without an outcome makes the lane due again, and the
 * try is made again under the same webhook-id (at least once).
 */
export class EndpointDispatcher {
  readonly #o: DispatcherOptions;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  readonly done: Promise<void>;

  constructor(options: DispatcherOptions) {
    this.#o = options;
    this.done = this.#run();
  }

  /** Looks for due deliveries now (a new event was queued). */
  wake(): void {
    this.#wake?.();
  }

  /**
   * Stops at once: tries in flight are aborted (their leases end and they are made again later, by
   * this process after a restart or by another), so a slow endpoint never holds up a shutdown.
   */
  async close(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.done;
    await Promise.allSettled([...this.#inFlight]);
  }

  async #run(): Promise<void> {
    const { endpoint, store, logger, metrics } = this.#o;
    let redisWarnedAt = 0;
    while (!this.#stop.signal.aborted) {
      try {
        const free = WEBHOOK_CONCURRENCY - this.#inFlight.size;
        const now = Date.now();
        // One round: the endpoint's state for the gauges, and (unless disabled) the lanes due; a
        // transfer whose earlier event is not yet queued waits a round (store.claim).
        const { disabled, oldestAt, claimed } = await store.claim(
          now,
          now + this.#o.timeoutMs + LEASE_MARGIN_MS,
          free,
          now + WEBHOOK_POLL_MS,
        );
        metrics.webhookDisabled.set({ endpoint: endpoint.name }, disabled ? 1 : 0);
        metrics.webhookOldestAge.set({ endpoint: endpoint.name }, oldestAt === undefined ? 0 : Math.max(0, Date.now() - oldestAt) / 1000);
        if (claimed.length > 0) {
          for (const delivery of claimed) {
            const attempt = this.#attempt(delivery).catch((err: unknown) =>
              // The lease ends and the lane is due again: nothing is lost.
              logger.warn(
                { endpoint: endpoint.name, entryId: delivery.entryId, err },
                'webhook delivery bookkeeping failed, tried again later',
              ),
            );
            this.#inFlight.add(attempt);
            void attempt.finally(() => {
              this.#inFlight.delete(attempt);
              this.wake();
            });
          }
          continue;
        }
      } catch (err) {
        if (Date.now() - redisWarnedAt > 60_000) {
          redisWarnedAt = Date.now();
          logger.warn({ endpoint: endpoint.name, err }, 'could not read the webhook deliveries, next try later');
        }
      }
      await this.#pause(WEBHOOK_POLL_MS);
    }
  }

  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  /** One try of the lane's head and what follows from it: delivered, retried, disabled or dead-lettered. */
  async #attempt(delivery: QueuedDelivery): Promise<void> {
    const { endpoint, store, logger, metrics } = this.#o;
    const tries = await store.countTry(delivery.entryId);
    const { result, status, retryAfterMs } = await this.#send(delivery);
    // Shutting down: no outcome is recorded; the lease ends and the try is made again.
    if (this.#stop.signal.aborted && result !== 'delivered') return;
    metrics.webhookAttempts.inc({ endpoint: endpoint.name, result });
    const log = { endpoint: endpoint.name, entryId: delivery.entryId, type: delivery.type, tries, result, status };
    const now = Date.now();
    if (result === 'delivered') {
      await store.finish(delivery, now);
      metrics.webhookDeliveries.inc({ endpoint: endpoint.name, outcome: 'delivered' });
      logger.debug(log, 'webhook delivered');
      return;
    }
    if (result === 'gone') {
      await store.disable(delivery, now);
      metrics.webhookDisabled.set({ endpoint: endpoint.name }, 1);
      logger.error(
        log,
        'webhook endpoint answered 410 gone: disabled until `npm run cli -- webhooks enable <endpoint>` (docs/operations.md, webhooks)',
      );
      return;
    }
    const delay = nextTryDelay(tries, this.#o.retryScheduleMs, retryAfterMs);
    if (delay === undefined) {
      await store.finish(delivery, now, {
        entryId: delivery.entryId,
        endpoint: endpoint.name,
        type: delivery.type,
        sequenceId: delivery.lane.startsWith('@') ? '' : delivery.lane,
        tries: String(tries),
        lastResult: result,
        lastStatus: status === undefined ? '' : String(status),
        at: new Date(now).toISOString(),
        body: delivery.body,
      });
      metrics.webhookDeliveries.inc({ endpoint: endpoint.name, outcome: 'dead-lettered' });
      logger.error(log, 'webhook delivery dead-lettered: its tries ran out');
      return;
    }
    await store.retryAt(delivery, now + delay, result);
    logger.warn({ ...log, nextTryInMs: delay }, 'webhook delivery failed, tried again later');
  }

  /** The POST; its answer read up to WEBHOOK_MAX_ANSWER_BYTES and dropped. Never throws. */
  async #send(delivery: QueuedDelivery): Promise<{ result: TryResult; status?: number; retryAfterMs?: number }> {
    const { endpoint, agent, timeoutMs } = this.#o;
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), this.#stop.signal]);
    try {
      const answer = await request(endpoint.url, {
        method: 'POST',
        dispatcher: agent,
        headers: webhookHeaders(delivery.entryId, delivery.body, endpoint.secrets, new Date()),
        body: delivery.body,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      await drain(answer.body);
      return { ...classifyStatus(answer.statusCode, answer.headers['retry-after']), status: answer.statusCode };
    } catch (error) {
      return { result: classifyFailure(error) };
    }
  }
}

/** Reads at most WEBHOOK_MAX_ANSWER_BYTES of an answer's body, then drops the rest with the connection. */
async function drain(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<void> {
  let read = 0;
  try {
    for await (const chunk of body) {
      read += chunk.length;
      if (read > WEBHOOK_MAX_ANSWER_BYTES) break;
    }
  } catch {
    // The status decided; a body cut short changes nothing.
  } finally {
    body.destroy();
  }
}
