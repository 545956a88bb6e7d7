import { Queue, type JobsOptions } from 'bullmq';
import { Redis, type Cluster } from 'ioredis';
import { parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from './events.ts';
import { parseSubmitPayload, SUBMIT_TRANSACTION, type PayloadIssue, type SubmitPayloadInput } from './payload.ts';
import { defaultEventsStream, transferKey } from './keys.ts';
import { readTransferEvents, type EventKeys } from './read.ts';

export type { SubmitPayloadInput, PayloadIssue } from './payload.ts';
export type { TransferEvent } from './events.ts';

export class InvalidPayloadError extends Error {
  readonly code = 'INVALID_PAYLOAD';
  readonly issues: PayloadIssue[];
  constructor(issues: PayloadIssue[]) {
    super(`invalid submit-transaction payload: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    this.name = 'InvalidPayloadError';
    this.issues = issues;
  }
}

export class WaitTimeoutError extends Error {
  readonly code = 'WAIT_TIMEOUT';
  constructor(sequenceId: string, timeoutMs: number) {
    super(`no terminal event for ${sequenceId} within ${timeoutMs} ms`);
    this.name = 'WaitTimeoutError';
  }
}

export interface ProducerOptions {
  /** An ioredis connection (shared, not closed by the producer) or a Redis URL. */
  connection: Redis | Cluster | string;
  /** QUEUE_PREFIX of the worker. */
  prefix?: string;
  /** EVENTS_STREAM of the worker. */
  eventsStream?: string;
}

/** Longest single blocking read; the wait loop re-checks its deadline in between. */
const BLOCK_SLICE_MS = 1_000;

/**
 * The typed way for other services to hand transfers to the worker: validates with the worker's own
 * schema, enqueues with `jobId = sequenceId`, and can wait for a transfer's terminal event.
 */
export class TransferProducer {
  readonly #redis: Redis | Cluster;
  readonly #ownsRedis: boolean;
  readonly #queue: Queue;
  readonly #keys: EventKeys;

  constructor(options: ProducerOptions) {
    this.#ownsRedis = typeof options.connection === 'string';
    this.#redis = typeof options.connection === 'string' ? new Redis(options.connection, { maxRetriesPerRequest: null }) : options.connection;
    const prefix = options.prefix ?? 'bull';
    this.#keys = { transfer: (sequenceId) => transferKey(prefix, sequenceId), events: options.eventsStream ?? defaultEventsStream(prefix) };
    this.#queue = new Queue(SUBMIT_TRANSACTION, { connection: this.#redis, prefix });
  }

  /** Validates and enqueues; throws InvalidPayloadError with every issue. Returns the job id (the sequenceId). */
  async submit(input: SubmitPayloadInput | unknown, jobOptions: Omit<JobsOptions, 'jobId'> = {}): Promise<string> {
    const parsed = parseSubmitPayload(input);
    if (!parsed.ok) throw new InvalidPayloadError(parsed.issues);
    const jobId = parsed.payload.halfSigned.sequenceId;
    await this.#queue.add(SUBMIT_TRANSACTION, parsed.payload, { ...jobOptions, jobId });
    return jobId;
  }

  /** The transfer's events so far, oldest first (empty when unknown). */
  async events(sequenceId: string): Promise<TransferEvent[]> {
    return readTransferEvents(this.#redis, this.#keys, sequenceId);
  }

  /**
   * Resolves with the transfer's terminal event (broadcast, rejected, blocked, failed, expired), or
   * rejects with WaitTimeoutError. Reads the stream; safe against the event landing while it starts.
   */
  async waitForTerminal(sequenceId: string, timeoutMs: number, terminal: ReadonlySet<string> = TERMINAL_EVENTS): Promise<TransferEvent> {
    const deadline = Date.now() + timeoutMs;
    // Remember where the stream ends before looking at the past, so nothing falls between the two.
    const last = await this.#redis.xrevrange(this.#keys.events, '+', '-', 'COUNT', 1);
    let cursor = last[0]?.[0] ?? '0-0';
    const past = (await this.events(sequenceId)).find((event) => terminal.has(event.event));
    if (past) return past;

    const reader = (this.#redis as Redis).duplicate();
    try {
      while (Date.now() < deadline) {
        const block = Math.max(1, Math.min(BLOCK_SLICE_MS, deadline - Date.now()));
        const reply = (await reader.xread('COUNT', 1000, 'BLOCK', block, 'STREAMS', this.#keys.events, cursor)) as
          | Array<[string, Array<[string, string[]]>]>
          | null;
        for (const [, entries] of reply ?? []) {
          for (const entry of entries) {
            cursor = entry[0];
            const event = parseStreamEntry(entry);
            if (event.sequenceId === sequenceId && terminal.has(event.event)) return event;
          }
        }
      }
    } finally {
      reader.disconnect();
    }
    throw new WaitTimeoutError(sequenceId, timeoutMs);
  }

  async close(): Promise<void> {
    await this.#queue.close();
    if (this.#ownsRedis) await this.#redis.quit();
  }
}
