/**
 * The load generator's side of the benchmark: what it enqueues into (ours through the typed producer,
 * the bare worker through a plain Queue.add), and how it watches the stream each one publishes to.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { jobIdFor, TransferProducer } from '../packages/producer/src/producer.ts';
import { samplePayload, type ValidSamplePayload } from '../tools/sample-payloads.ts';

export const SUBMIT_QUEUE = 'submit-transaction';
export const TRACK_QUEUE = 'track-transfer';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether `promise` settled within `ms` (its timer is cleared either way). */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** One side of the comparison: a queue to fill and the stream its `transfer.submitted` events land on. */
export interface SubmitTarget {
  readonly label: 'ours' | 'bare' | 'bare-same-work';
  readonly prefix: string;
  readonly stream: string;
  /** The submit queue, for pause/resume and counts. */
  readonly queue: Queue;
  enqueue(payload: ValidSamplePayload): Promise<void>;
  close(): Promise<void>;
}

/** Ours: `TransferProducer.submit`, which validates with the worker's schema and adds under jobIdFor(sequenceId) (`transfer-<sequenceId>`). */
export function oursTarget(redis: Redis, prefix: string): SubmitTarget {
  const stream = `${prefix}:transfer-events`;
  const producer = new TransferProducer({ connection: redis, prefix, eventsStream: stream });
  const queue = new Queue(SUBMIT_QUEUE, { connection: redis, prefix });
  return {
    label: 'ours',
    prefix,
    stream,
    queue,
    enqueue: async (payload) => {
      await producer.submit(payload);
    },
    close: async () => {
      await producer.close();
      await queue.close();
    },
  };
}

/** Bare (either mode of bench/bare-worker.ts): the same payload through a plain `Queue.add` with the same job id. */
export function bareTarget(redis: Redis, prefix: string, label: 'bare' | 'bare-same-work' = 'bare'): SubmitTarget {
  const queue = new Queue(SUBMIT_QUEUE, { connection: redis, prefix });
  return {
    label,
    prefix,
    stream: `${prefix}:bare-events`,
    queue,
    enqueue: async (payload) => {
      await queue.add(SUBMIT_QUEUE, payload, { jobId: jobIdFor(payload.halfSigned.sequenceId) });
    },
    close: () => queue.close(),
  };
}

export function payloads(count: number): ValidSamplePayload[] {
  return Array.from({ length: count }, () => samplePayload());
}

/** Runs `task` over `items` with at most `parallel` in flight. */
export async function forEachLimited<T>(items: Iterable<T>, parallel: number, task: (item: T) => Promise<void>): Promise<void> {
  const iterator = items[Symbol.iterator]();
  const lane = async () => {
    for (let next = iterator.next(); !next.done; next = iterator.next()) await task(next.value);
  };
  await Promise.all(Array.from({ length: parallel }, lane));
}

/** Polls XLEN (cheap, reads no entries) until the stream holds `length` entries. */
export async function waitForStreamLength(redis: Redis, stream: string, length: number, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const current = await redis.xlen(stream);
    if (current >= length) return;
    if (Date.now() > deadline) throw new Error(`${what}: ${current} of ${length} events on ${stream} after ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** The Redis time (ms) of a stream entry id `<ms>-<seq>`. */
export function entryMs(id: string): number {
  return Number(id.slice(0, id.indexOf('-')));
}

/** Id of the newest entry, or `0-0`. */
export async function lastEntryId(redis: Redis, stream: string): Promise<string> {
  const last = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
  return last[0]?.[0] ?? '0-0';
}

/**
 * Reads a stream from `cursor` on its own connection (XREAD BLOCK) and hands each entry's event type
 * and sequenceId to `onEntry` as it arrives. Only those two fields are looked at: a consumer that
 * parses everything would measure itself.
 */
export function readStream(
  redis: Redis,
  stream: string,
  cursor: string,
  onEntry: (event: string, sequenceId: string, id: string) => void,
): { stop(): Promise<void> } {
  const reader = redis.duplicate();
  let running = true;
  let position = cursor;
  const loop = (async () => {
    while (running) {
      const reply = (await reader.xread('COUNT', 1000, 'BLOCK', 200, 'STREAMS', stream, position)) as Array<
        [string, Array<[string, string[]]>]
      > | null;
      for (const [, entries] of reply ?? []) {
        for (const [id, fields] of entries) {
          position = id;
          let event = '';
          let sequenceId = '';
          for (let i = 0; i + 1 < fields.length; i += 2) {
            if (fields[i] === 'event') event = fields[i + 1]!;
            else if (fields[i] === 'sequenceId') sequenceId = fields[i + 1]!;
          }
          onEntry(event, sequenceId, id);
        }
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      reader.disconnect();
    },
  };
}
