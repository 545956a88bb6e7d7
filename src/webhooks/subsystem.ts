import { hostname } from 'node:os';
import { TransferEvents, type BatchedTransferEvent } from '../../packages/producer/src/consumer.ts';
import type { Config } from '../config/config.ts';
import type { Logger } from '../logger.ts';
import { zeroWebhookSeries, type Metrics } from '../metrics.ts';
import type { RedisClient } from '../redis.ts';
import { createWebhookAgent } from './connect.ts';
import { EndpointDispatcher, WEBHOOK_CONCURRENCY } from './delivery.ts';
import { queuedEvent } from './message.ts';
import { endpointGroup, EndpointStore } from './store.ts';

/**
 * An entry a consumer read and has not acknowledged this long is taken over by another (XAUTOCLAIM),
 * and each consumer looks that often. The handler only queues the event in Redis (milliseconds), so an
 * entry this old was read by a worker that died (SIGKILL, a lost node); its transfer's later events wait
 * for it (EndpointStore.claim), so it bounds how long a crash holds a transfer's webhooks up. Taken
 * over from a consumer that was only slow, the event is queued once all the same (the store's enqueue
 * is idempotent while it is queued).
 */
export const WEBHOOK_CLAIM_IDLE_MS = 10_000;

/**
 * Consumers of each endpoint's group in one process. A consumer queues each batch it reads in one step
 * and acknowledges it in one more; several read apart batches side by side, so that one waiting on its
 * round trips does not hold the reading up. The order of a transfer's events does not depend on who
 * reads them: the store queues each in stream order and holds a transfer back while an earlier event
 * of it is read and not yet queued (store.ts), as for several processes.
 */
export const WEBHOOK_READERS = 4;

export interface Webhooks {
  /** Stops reading events and aborts tries in flight (they are made again later); resolves when stopped. */
  close(): Promise<void>;
}

export interface WebhooksOptions {
  redis: RedisClient;
  prefix: string;
  eventsStream: string;
  settings: Config['webhooks'];
  /** DASHBOARD_METADATA_KEYS: the metadata values a webhook shows. */
  metadataKeys: readonly string[];
  logger: Logger;
  metrics: Metrics;
}

/**
 * Outbound webhooks: per endpoint, one consumer group on the events stream (the producer package's
 * consumer: acknowledgement after the handler, de-duplication by epoch, sequenceId and version) whose
 * handler only queues the event in Redis (src/webhooks/store.ts), and a dispatcher that delivers what
 * is queued. Reading and delivering are apart so that a slow or failing endpoint holds up neither the
 * stream nor the other transfers, and a delivery outlives a restart.
 */
export function startWebhooks(options: WebhooksOptions): Webhooks {
  const { redis, settings, logger, metrics } = options;
  zeroWebhookSeries(
    metrics,
    settings.endpoints.map((endpoint) => endpoint.name),
  );
  const events = new TransferEvents({ connection: redis, prefix: options.prefix, eventsStream: options.eventsStream });
  const agent = createWebhookAgent({
    allowPrivate: settings.allowPrivate,
    timeoutMs: settings.timeoutMs,
    connections: WEBHOOK_CONCURRENCY,
  });
  const firstDelayMs = settings.retryScheduleMs[0] ?? 0;
  const dispatchers = settings.endpoints.map((endpoint) => {
    const store = new EndpointStore(redis, options.prefix, endpoint.name, options.eventsStream);
    const dispatcher = new EndpointDispatcher({
      endpoint,
      store,
      agent,
      timeoutMs: settings.timeoutMs,
      retryScheduleMs: settings.retryScheduleMs,
      logger,
      metrics,
    });
    const wanted = new Set<string>(endpoint.events);
    const group = endpointGroup(endpoint.name);
    for (let reader = 1; reader <= WEBHOOK_READERS; reader++) {
      events.consumeBatches(
        {
          group,
          consumer: `${hostname()}-${process.pid}-${reader}`,
          // A new endpoint gets the events published from now on; `webhooks replay` sends older ones.
          from: '$',
          blockMs: 2_000,
          claimIdleMs: WEBHOOK_CLAIM_IDLE_MS,
          deadLetter: store.keys.dead,
          onError: (error, info) =>
            logger.warn(
              // Only names: a parse or handler error's message may quote an event's data.
              {
                endpoint: endpoint.name,
                stage: info.stage,
                reason: info.reason,
                entryId: info.entryId,
                type: info.type,
                sequenceId: info.sequenceId,
                code: (error as { code?: unknown }).code,
              },
              'webhook events consumer reported a problem',
            ),
          onNewEpoch: (info) =>
            logger.info(
              { endpoint: endpoint.name, sequenceId: info.sequenceId, epoch: info.epoch, previous: info.previous },
              'webhook: a transfer started a new life after the ledger was lost',
            ),
        },
        async (batch: BatchedTransferEvent[]) => {
          const now = Date.now();
          const events = batch
            .filter(({ event }) => wanted.has(event.event))
            .map(({ event, entryId }) => queuedEvent(event, entryId, options.metadataKeys, now + firstDelayMs));
          // A read's events in one step, in stream order; acknowledged once it is done.
          if ((await store.enqueueAll(events, now + firstDelayMs)) > 0) dispatcher.wake();
        },
      );
    }
    return dispatcher;
  });
  logger.info({ endpoints: settings.endpoints.map((endpoint) => endpoint.name) }, 'webhooks started');
  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        await Promise.all([events.close(), ...dispatchers.map((dispatcher) => dispatcher.close())]);
        await agent.destroy();
      })();
      return closing;
    },
  };
}
