import type { Agent } from 'undici';
import { request } from 'undici';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { classifyFailure, classifyStatus, nextTryDelay, type TryResult } from './answer.ts';
import type { WebhookEndpoint } from './endpoints.ts';
import { webhookHeaders } from './message.ts';
import type { EndpointStore, QueuedDelivery, TryOutcome } from './store.ts';

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
 * Tries of one lane made in a row under one lease, a try that delivers its head going straight on to
 * the next event of the transfer; then the lane goes back among the due ones, so that one busy
 * transfer does not keep a slot from the others.
 */
export const WEBHOOK_TRIES_PER_LEASE = 16;

/**
 * Delivers one endpoint's queued events: every WEBHOOK_POLL_MS (or when woken) it leases the lanes
 * that are due, up to WEBHOOK_CONCURRENCY tried at once, and tries the head of each; a delivered head
 * is followed by the lane's next event under the same lease. The outcomes of tries that end together
 * are settled in one step (store.settle). Every step is safe to repeat after a crash: a lease that ends
 * without an outcome makes the lane due again, and the try is made again under the same webhook-id
 * (at least once).
 */
export class EndpointDispatcher {
  readonly #o: DispatcherOptions;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  /** Outcomes waiting for the next settling, each with its caller's promise. */
  #unsettled: Array<{ outcome: TryOutcome; resolve: (next: QueuedDelivery | undefined) => void; reject: (error: unknown) => void }> = [];
  /** A settling is under way: what ends meanwhile waits for the next one, after it. */
  #settling = false;
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

  get #leaseMs(): number {
    return this.#o.timeoutMs + LEASE_MARGIN_MS;
  }

  async #run(): Promise<void> {
    const { endpoint, store, logger, metrics } = this.#o;
    let redisWarnedAt = 0;
    let roundAt = 0;
    while (!this.#stop.signal.aborted) {
      try {
        const free = WEBHOOK_CONCURRENCY - this.#inFlight.size;
        const now = Date.now();
        // Every slot busy: nothing to lease until one frees (it wakes this), the gauges aside.
        if (free <= 0 && now - roundAt < WEBHOOK_POLL_MS) {
          await this.#pause(WEBHOOK_POLL_MS - (now - roundAt));
          continue;
        }
        roundAt = now;
        // One round: the endpoint's state for the gauges, and (unless disabled) the lanes due; a
        // transfer whose earlier event is not yet queued waits a round (store.claim).
        const { disabled, oldestAt, claimed } = await store.claim(now, now + this.#leaseMs, free, now + WEBHOOK_POLL_MS);
        metrics.webhookDisabled.set({ endpoint: endpoint.name }, disabled ? 1 : 0);
        metrics.webhookOldestAge.set({ endpoint: endpoint.name }, oldestAt === undefined ? 0 : Math.max(0, Date.now() - oldestAt) / 1000);
        if (claimed.length > 0) {
          for (const delivery of claimed) {
            const lane = this.#lane(delivery);
            this.#inFlight.add(lane);
            void lane.finally(() => {
              this.#inFlight.delete(lane);
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

  /** A leased lane: its head tried, then while delivered (and within the lease's tries) its next event. */
  async #lane(first: QueuedDelivery): Promise<void> {
    let delivery: QueuedDelivery | undefined = first;
    for (let tries = 1; delivery !== undefined; tries++) {
      const current: QueuedDelivery = delivery;
      delivery = await this.#attempt(current, tries < WEBHOOK_TRIES_PER_LEASE).catch((err: unknown) => {
        // The lease ends and the lane is due again: nothing is lost.
        this.#o.logger.warn(
          { endpoint: this.#o.endpoint.name, entryId: current.entryId, err },
          'webhook delivery bookkeeping failed, tried again later',
        );
        return undefined;
      });
    }
  }

  /**
   * One try of the lane's head and what follows from it: delivered, retried, disabled or
   * dead-lettered. Resolves with the lane's next delivery when it goes on under the same lease.
   */
  async #attempt(delivery: QueuedDelivery, mayGoOn: boolean): Promise<QueuedDelivery | undefined> {
    const { endpoint, store, logger, metrics } = this.#o;
    const { tries } = delivery;
    const { result, status, retryAfterMs } = await this.#send(delivery);
    // Shutting down: no outcome is recorded; the lease ends and the try is made again.
    if (this.#stop.signal.aborted && result !== 'delivered') return undefined;
    metrics.webhookAttempts.inc({ endpoint: endpoint.name, result });
    const log = { endpoint: endpoint.name, entryId: delivery.entryId, type: delivery.type, tries, result, status };
    const now = Date.now();
    if (result === 'delivered') {
      const next = await this.#settle({ delivery, kind: 'delivered', goOn: mayGoOn && !this.#stop.signal.aborted });
      metrics.webhookDeliveries.inc({ endpoint: endpoint.name, outcome: 'delivered' });
      logger.debug(log, 'webhook delivered');
      return next;
    }
    if (result === 'gone') {
      await store.disable(delivery, now);
      metrics.webhookDisabled.set({ endpoint: endpoint.name }, 1);
      logger.error(
        log,
        'webhook endpoint answered 410 gone: disabled until `npm run cli -- webhooks enable <endpoint>` (docs/operations.md, webhooks)',
      );
      return undefined;
    }
    const delay = nextTryDelay(tries, this.#o.retryScheduleMs, retryAfterMs);
    if (delay === undefined) {
      await this.#settle({
        delivery,
        kind: 'dead',
        deadLetter: {
          entryId: delivery.entryId,
          endpoint: endpoint.name,
          type: delivery.type,
          sequenceId: delivery.lane.startsWith('@') ? '' : delivery.lane,
          tries: String(tries),
          lastResult: result,
          lastStatus: status === undefined ? '' : String(status),
          at: new Date(now).toISOString(),
          body: delivery.body,
        },
      });
      metrics.webhookDeliveries.inc({ endpoint: endpoint.name, outcome: 'dead-lettered' });
      logger.error(log, 'webhook delivery dead-lettered: its tries ran out');
      return undefined;
    }
    await this.#settle({ delivery, kind: 'retry', dueAt: now + delay, result });
    logger.warn({ ...log, nextTryInMs: delay }, 'webhook delivery failed, tried again later');
    return undefined;
  }

  /**
   * Settles an outcome together with the others that end before the settling starts (one step for
   * them all, store.settle); resolves with the lane's next delivery when it goes on.
   */
  #settle(outcome: TryOutcome): Promise<QueuedDelivery | undefined> {
    return new Promise((resolve, reject) => {
      this.#unsettled.push({ outcome, resolve, reject });
      if (this.#settling) return;
      this.#settling = true;
      void (async () => {
        // Whatever else ends in this turn of the event loop comes along.
        await new Promise<void>((ready) => setImmediate(ready));
        while (this.#unsettled.length > 0) {
          const batch = this.#unsettled;
          this.#unsettled = [];
          const now = Date.now();
          try {
            const next = await this.#o.store.settle(
              batch.map((waiting) => waiting.outcome),
              now,
              now + this.#leaseMs,
              now + WEBHOOK_POLL_MS,
            );
            const byLane = new Map(next.map((delivery) => [delivery.lane, delivery]));
            for (const { outcome: settled, resolve: done } of batch) {
              done(settled.kind === 'delivered' && settled.goOn ? byLane.get(settled.delivery.lane) : undefined);
            }
          } catch (error) {
            for (const waiting of batch) waiting.reject(error);
          }
        }
        this.#settling = false;
      })();
    });
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
