/**
 * TransferEvents (packages/producer/src/consumer.ts), the events-stream consumer, against the real test
 * Redis. Entries are written with XADD in the worker's field layout (src/ledger/transition.lua:
 * event, sequenceId, walletId, coin, version, at, data, metadata), including duplicates of one
 * (sequenceId, version), as a worker replaying a publication would.
 *
 * The guarantee under test: every entry is handed to a handler of each group at least once (a handler
 * that throws, or a consumer that dies, leaves the entry pending and another consumer claims it); and
 * once a handler resolved and the consumer recorded it (seen marker + XACK in one MULTI), that
 * (sequenceId, version) is never handed to a handler of the group again. The one case of a second call:
 * a consumer that died after its handler ran but before it recorded the event.
 */
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  NewEpochError,
  parseStreamEntry,
  TransferEvents,
  TransferProducer,
  type ConsumeErrorInfo,
  type ConsumeHandle,
  type NewEpochInfo,
  type TransferEvent,
} from '../../packages/producer/src/index.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { streamEntryFields } from '../helpers/stream-entry.ts';

const consumers: TransferEvents[] = [];
const handles: ConsumeHandle[] = [];

afterEach(async () => {
  await Promise.all(handles.splice(0).map((handle) => handle.stop()));
  await Promise.all(consumers.splice(0).map((events) => events.close()));
  await closeAllRedis();
});

function eventsOn(redis: Redis, prefix: string): TransferEvents {
  const events = new TransferEvents({ connection: redis, prefix });
  consumers.push(events);
  return events;
}

/** One test's consumer: a connection, a fresh prefix, its TransferEvents (closed after the test) and their stream. */
function consumerSetUp(name: string): { redis: Redis; prefix: string; events: TransferEvents; stream: string } {
  const redis = newRedis();
  const prefix = uniquePrefix(name);
  const events = eventsOn(redis, prefix);
  return { redis, prefix, events, stream: events.stream };
}

function track(handle: ConsumeHandle): ConsumeHandle {
  handles.push(handle);
  return handle;
}

/**
 * One entry as the worker's transition.lua writes it (a transfer.submitted recovered as duplicate); with
 * `epoch`, also the ledger's epoch field (`''` writes the field empty, as a worker without an epoch may).
 */
async function publish(redis: Redis, stream: string, sequenceId: string, version: number, epoch?: string): Promise<string> {
  const fields = streamEntryFields({
    event: 'transfer.submitted',
    sequenceId,
    version: String(version),
    data: JSON.stringify({ transfer: null, recoveredBy: 'duplicate' }),
    metadata: JSON.stringify({ orderId: `A-${sequenceId}` }),
    epoch,
  });
  return (await redis.xadd(stream, '*', ...fields))!;
}

/** A system event as the ledger writes it: no transfer (sequenceId empty, version 0). */
async function publishReconcile(redis: Redis, stream: string): Promise<string> {
  const data = {
    checked: 1,
    resubmitted: 0,
    trackersRestored: 0,
    unrecoverable: 0,
    verified: 1,
    mismatches: 0,
    verifyErrors: 0,
    retentionRemoved: 0,
    staleIndexRemoved: 0,
    interrupted: false,
    durationMs: 3,
  };
  const fields = streamEntryFields({
    event: 'reconcile.completed',
    sequenceId: '',
    walletId: '',
    coin: '',
    version: '0',
    data: JSON.stringify(data),
  });
  return (await redis.xadd(stream, '*', ...fields))!;
}

const keyOf = (event: TransferEvent): string => (event.sequenceId === '' ? `@${event.id}` : `${event.sequenceId}:${event.version}`);
/** An event's full identity: `<epoch or ->/<sequenceId>:<version>`. */
const lifeKeyOf = (event: TransferEvent): string => `${event.epoch ?? '-'}/${keyOf(event)}`;

async function pendingCount(redis: Redis, stream: string, group: string): Promise<number> {
  const summary = (await redis.xpending(stream, group)) as [number, ...unknown[]];
  return summary[0];
}

/** Entries of the group not yet delivered to any consumer (Redis 7 `lag`). */
async function lag(redis: Redis, stream: string, group: string): Promise<number | null> {
  const groups = (await redis.xinfo('GROUPS', stream)) as unknown[][];
  const info = groups.map((fields) =>
    Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]])),
  );
  return (info.find((g) => g.name === group)?.lag as number | null | undefined) ?? null;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('TransferEvents', () => {
  it('hands 200 entries to one consumer: each (sequenceId, version) once, duplicates skipped, every entry acknowledged', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-once');
    const published: string[] = [];
    // 188 distinct transfer events (94 transfers x versions 1, 2), 10 republished copies (one right
    // after its original, in the same batch; the others in later batches) and 2 system events.
    for (let t = 0; t < 94; t++) {
      for (const version of [1, 2]) {
        published.push(await publish(redis, stream, `seq-${t}`, version));
        if (t === 3 && version === 2) published.push(await publish(redis, stream, `seq-${t}`, version));
      }
      if (t === 40) published.push(await publishReconcile(redis, stream));
    }
    for (let t = 0; t < 9; t++) published.push(await publish(redis, stream, `seq-${t * 10}`, 1 + (t % 2)));
    published.push(await publishReconcile(redis, stream));
    expect(published).toHaveLength(200);

    const calls = new Map<string, number>();
    const errors: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    track(
      events.consume(
        { group: 'g1', consumer: 'c1', from: '0', batch: 50, onError: (error, info) => errors.push({ error, info }) },
        async (event, entryId) => {
          expect(entryId).toBe(event.id);
          calls.set(keyOf(event), (calls.get(keyOf(event)) ?? 0) + 1);
        },
      ),
    );

    await expect
      .poll(async () => (await lag(redis, stream, 'g1')) === 0 && (await pendingCount(redis, stream, 'g1')) === 0, { timeout: 10_000 })
      .toBe(true);
    expect(errors).toEqual([]);
    expect(calls.size).toBe(190);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect([...calls.keys()].filter((key) => key.startsWith('@'))).toHaveLength(2);

    // A second group gets every event too, each once.
    const other = new Map<string, number>();
    track(
      events.consume(
        { group: 'g2', consumer: 'c1', from: '0' },
        async (event) => void other.set(keyOf(event), (other.get(keyOf(event)) ?? 0) + 1),
      ),
    );
    await expect.poll(() => other.size, { timeout: 10_000 }).toBe(190);
    expect([...other.values()].every((n) => n === 1)).toBe(true);
  });

  it('a consumer that dies mid-batch: another of the group claims its entries (XAUTOCLAIM); recorded ones are never handled again', async () => {
    const prefix = uniquePrefix('consumer-crash');
    const setup = newRedis();
    const stream = `${prefix}:transfer-events`;
    const N = 100;
    for (let i = 1; i <= N; i++) await publish(setup, stream, `seq-${i}`, 1);

    const handledBy = { A: [] as string[], B: [] as string[] };
    // Consumer A handles k entries, then "dies" inside the handler of entry k+1: its side effect done
    // (logged), never resolving, so the entry is neither recorded nor acknowledged. Its connection is
    // then dropped, as a killed process's would be.
    const k = 25;
    const connA = newRedis();
    let crashed = false;
    let hung: ((error: Error) => void) | undefined;
    const a = eventsOn(connA, prefix);
    const handleA = track(
      a.consume({ group: 'g', consumer: 'A', from: '0', batch: 20, claimIdleMs: 60_000 }, async (event) => {
        // Once dead, the process runs no handler at all (this only matters after the test releases it).
        if (crashed) throw new Error('consumer A is dead');
        handledBy.A.push(keyOf(event));
        if (handledBy.A.length <= k) return;
        crashed = true;
        await new Promise<void>((_, reject) => {
          hung = reject;
        });
      }),
    );
    await expect.poll(() => crashed, { timeout: 10_000 }).toBe(true);
    connA.disconnect();

    // B, same group, claims entries idle for 300 ms: A's unacknowledged batch.
    const b = eventsOn(newRedis(), prefix);
    track(
      b.consume({ group: 'g', consumer: 'B', batch: 20, claimIdleMs: 300, blockMs: 200 }, async (event) => {
        handledBy.B.push(keyOf(event));
      }),
    );
    await expect
      .poll(async () => (await lag(setup, stream, 'g')) === 0 && (await pendingCount(setup, stream, 'g')) === 0, { timeout: 15_000 })
      .toBe(true);

    const all = new Set([...handledBy.A, ...handledBy.B]);
    // At least once: every entry was handled by someone.
    expect(all.size).toBe(N);
    // A recorded its first k: B never got them.
    const recordedByA = handledBy.A.slice(0, k);
    expect(handledBy.B.filter((key) => recordedByA.includes(key))).toEqual([]);
    // The entry A was handling when it died was handled but not recorded: B handles it again. That is the
    // only entry handed to handlers twice; every other one exactly once.
    const diedOn = handledBy.A[k]!;
    expect(handledBy.B).toContain(diedOn);
    expect(new Set(handledBy.B).size).toBe(handledBy.B.length);
    expect(handledBy.A.length + handledBy.B.length).toBe(N + 1);
    // A's batch (entries 21-40, minus the k-20 it recorded) came to B through XAUTOCLAIM.
    expect(handledBy.B).toEqual(expect.arrayContaining(Array.from({ length: 40 - k }, (_, i) => `seq-${k + 1 + i}:1`)));

    // Releasing the dead consumer's handler changes nothing: its calls fail, nothing is acknowledged twice.
    hung?.(new Error('consumer A is dead'));
    await handleA.stop();
    expect(new Set([...handledBy.A, ...handledBy.B]).size).toBe(N);
  });

  it('stop() finishes the batch being handled, acknowledges it and resolves; a restart goes on from there', async () => {
    const { redis, events } = consumerSetUp('consumer-stop');
    for (let i = 1; i <= 30; i++) await publish(redis, events.stream, `seq-${i}`, 1);

    const handled: string[] = [];
    let stopping: Promise<void> | undefined;
    const handle = events.consume({ group: 'g', consumer: 'c', from: '0', batch: 10 }, async (event) => {
      await sleep(20);
      handled.push(keyOf(event));
      if (handled.length === 5) stopping = handle.stop();
    });
    await expect.poll(() => stopping !== undefined, { timeout: 10_000 }).toBe(true);
    await stopping;
    await handle.done;
    // The whole batch of 10, not one more, and all of it acknowledged.
    expect(handled).toHaveLength(10);
    expect(await pendingCount(redis, events.stream, 'g')).toBe(0);

    // Restarted under the same name: the other 20, none again.
    const restarted = track(events.consume({ group: 'g', consumer: 'c', batch: 10 }, async (event) => void handled.push(keyOf(event))));
    await expect.poll(() => handled.length, { timeout: 10_000 }).toBe(30);
    expect(new Set(handled).size).toBe(30);

    // stop() while the loop waits on its blocking read resolves at once, not after blockMs.
    const idle = events.consume({ group: 'idle', consumer: 'c', blockMs: 20_000 }, async () => undefined);
    await sleep(300);
    const started = Date.now();
    await idle.stop();
    expect(Date.now() - started).toBeLessThan(5_000);
    await restarted.stop();
    await restarted.stop();
  });

  it('an unparsable entry is dead-lettered, acknowledged and reported, a throwing handler is reported and retried; the loop goes on', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-errors');
    await publish(redis, stream, 'seq-1', 1);
    const notOurs = (await redis.xadd(stream, '*', 'foo', 'bar'))!;
    const badJson = (await redis.xadd(
      stream,
      '*',
      ...streamEntryFields({ event: 'transfer.submitted', sequenceId: 'seq-x', version: '1', data: '{not json' }),
    ))!;
    const flaky = await publish(redis, stream, 'seq-2', 1);
    await publish(redis, stream, 'seq-3', 1);

    const handled: string[] = [];
    const errors: Array<{ message: string; info: ConsumeErrorInfo }> = [];
    let failures = 0;
    track(
      events.consume(
        {
          group: 'g',
          consumer: 'c',
          from: '0',
          claimIdleMs: 200,
          blockMs: 100,
          onError: (error, info) => errors.push({ message: error.message, info }),
        },
        async (event) => {
          if (event.sequenceId === 'seq-2' && failures++ === 0) throw new Error('downstream unavailable');
          handled.push(keyOf(event));
        },
      ),
    );
    await expect.poll(() => handled.length, { timeout: 10_000 }).toBe(3);
    expect(handled).toEqual(['seq-1:1', 'seq-3:1', 'seq-2:1']);
    const deadLetter = `${stream}:dead`;
    expect(errors.map((e) => e.info)).toEqual([
      { stage: 'parse', reason: 'malformed', entryId: notOurs, deliveries: 1, deadLetter },
      { stage: 'parse', reason: 'malformed', entryId: badJson, type: 'transfer.submitted', sequenceId: 'seq-x', deliveries: 1, deadLetter },
      { stage: 'handler', reason: 'handler', entryId: flaky, type: 'transfer.submitted', sequenceId: 'seq-2', deliveries: 1 },
    ]);
    expect(errors[2]!.message).toBe('downstream unavailable');
    await expect.poll(() => pendingCount(redis, stream, 'g'), { timeout: 5_000 }).toBe(0);
  });
});

describe('TransferEvents.consumeBatches', () => {
  it("hands each read's events at once, in stream order, each (sequenceId, version) once; acknowledges them together", async () => {
    const { redis, events, stream } = consumerSetUp('consumer-batches');
    const published: string[] = [];
    // 60 distinct transfer events, a copy right after one of them (same read) and one a read later.
    for (let t = 0; t < 30; t++) {
      for (const version of [1, 2]) published.push(await publish(redis, stream, `seq-${t}`, version));
      if (t === 5) published.push(await publish(redis, stream, 'seq-5', 2));
    }
    published.push(await publish(redis, stream, 'seq-1', 1));
    const batches: string[][] = [];
    const errors: ConsumeErrorInfo[] = [];
    track(
      events.consumeBatches(
        { group: 'g', consumer: 'c', from: '0', batch: 25, onError: (_e, info) => errors.push(info) },
        async (batch) => {
          expect(batch.every(({ event, entryId }) => event.id === entryId)).toBe(true);
          batches.push(batch.map(({ entryId }) => entryId));
        },
      ),
    );
    await expect
      .poll(async () => (await lag(redis, stream, 'g')) === 0 && (await pendingCount(redis, stream, 'g')) === 0, { timeout: 10_000 })
      .toBe(true);
    expect(errors).toEqual([]);
    expect(batches.every((batch) => batch.length > 1 && batch.length <= 25)).toBe(true);
    // Every event but the two copies, in stream order.
    expect(batches.flat()).toEqual(published.filter((_, i) => i !== 12 && i !== published.length - 1));
  });

  it('a batch whose handler throws: each of its events reported and tried again, then recorded', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-batch-fails');
    const ids = [
      await publish(redis, stream, 'seq-a', 1),
      await publish(redis, stream, 'seq-b', 1),
      await publish(redis, stream, 'seq-a', 2),
    ];
    const errors: ConsumeErrorInfo[] = [];
    const calls: string[][] = [];
    track(
      events.consumeBatches(
        { group: 'g', consumer: 'c', from: '0', blockMs: 50, claimIdleMs: 200, onError: (_e, info) => errors.push(info) },
        async (batch) => {
          calls.push(batch.map(({ event }) => keyOf(event)));
          if (calls.length === 1) throw new Error('downstream unavailable');
        },
      ),
    );
    await expect.poll(() => calls.length, { timeout: 10_000 }).toBe(2);
    await expect.poll(() => pendingCount(redis, stream, 'g'), { timeout: 5_000 }).toBe(0);
    expect(calls).toEqual([
      ['seq-a:1', 'seq-b:1', 'seq-a:2'],
      ['seq-a:1', 'seq-b:1', 'seq-a:2'],
    ]);
    expect(errors.map(({ stage, entryId, deliveries }) => [stage, entryId, deliveries])).toEqual(ids.map((id) => ['handler', id, 1]));
    // Recorded: copies published now are acknowledged without the handler.
    await publish(redis, stream, 'seq-b', 1);
    await publish(redis, stream, 'seq-a', 2);
    await expect
      .poll(async () => (await lag(redis, stream, 'g')) === 0 && (await pendingCount(redis, stream, 'g')) === 0, { timeout: 10_000 })
      .toBe(true);
    expect(calls).toHaveLength(2);
    expect(errors).toHaveLength(3);
  });
});

describe('TransferEvents and the ledger epoch', () => {
  /** Waits until every entry of the stream was delivered to the group and acknowledged. */
  async function drained(redis: Redis, stream: string, group: string): Promise<void> {
    await expect
      .poll(async () => (await lag(redis, stream, group)) === 0 && (await pendingCount(redis, stream, group)) === 0, { timeout: 10_000 })
      .toBe(true);
  }

  it('hands the same (sequenceId, version) under two epochs to the handler twice: a second life is not a duplicate', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-epoch-lives');
    // First life: versions 1, 2 under epoch E1. After the ledger is lost the transfer starts again at 1
    // under E2: once within the batch that holds E1's events, and once in a later batch.
    await publish(redis, stream, 'seq-1', 1, 'E1');
    await publish(redis, stream, 'seq-1', 2, 'E1');
    await publish(redis, stream, 'seq-2', 1, 'E1');
    await publish(redis, stream, 'seq-2', 1, 'E2');

    const handled: string[] = [];
    const errors: Array<{ message: string; info: ConsumeErrorInfo }> = [];
    track(
      events.consume(
        {
          group: 'g',
          consumer: 'c',
          from: '0',
          blockMs: 100,
          onError: (error, info) => errors.push({ message: error.message, info }),
          onNewEpoch: () => undefined,
        },
        async (event) => void handled.push(lifeKeyOf(event)),
      ),
    );
    await drained(redis, stream, 'g');
    expect(handled).toEqual(['E1/seq-1:1', 'E1/seq-1:2', 'E1/seq-2:1', 'E2/seq-2:1']);

    // The second life of seq-1, published after the first was handled and recorded.
    await publish(redis, stream, 'seq-1', 1, 'E2');
    await publish(redis, stream, 'seq-1', 2, 'E2');
    await expect.poll(() => handled.length, { timeout: 10_000 }).toBe(6);
    await drained(redis, stream, 'g');
    expect(handled.slice(4)).toEqual(['E2/seq-1:1', 'E2/seq-1:2']);
    expect(errors).toEqual([]);
  });

  it('goes on after Redis lost the stream and its group: the group is made again and the new life handled', async () => {
    const { redis, prefix, events, stream } = consumerSetUp('consumer-epoch-wipe');
    await publish(redis, stream, 'seq-1', 1, 'E1');
    const handled: string[] = [];
    const stages: string[] = [];
    track(
      events.consume(
        {
          group: 'g',
          consumer: 'c',
          from: '0',
          blockMs: 100,
          onError: (_error, info) => void stages.push(info.stage),
          onNewEpoch: () => undefined,
        },
        async (event) => void handled.push(lifeKeyOf(event)),
      ),
    );
    await drained(redis, stream, 'g');
    // Everything the worker wrote is gone (this test's keys only: the test Redis is shared); the
    // worker's next events make the stream anew, under a new epoch.
    const lost = await redis.keys(`${prefix}:*`);
    await redis.del(...lost);
    await publish(redis, stream, 'seq-1', 1, 'E2');
    await publish(redis, stream, 'seq-1', 2, 'E2');
    await expect.poll(() => handled, { timeout: 15_000 }).toEqual(['E1/seq-1:1', 'E2/seq-1:1', 'E2/seq-1:2']);
    expect(stages).toContain('redis');
  });

  it('hands a true duplicate (same epoch, sequenceId and version) to the handler once, and keys its marker by the epoch', async () => {
    const { redis, prefix, events, stream } = consumerSetUp('consumer-epoch-dup');
    const first = await publish(redis, stream, 'seq-1', 1, 'E1');
    // A copy in the same batch, then the handled event's entry id is recorded under the epoch.
    await publish(redis, stream, 'seq-1', 1, 'E1');

    const handled: Array<{ key: string; entryId: string }> = [];
    track(
      events.consume({ group: 'g', consumer: 'c', from: '0', blockMs: 100 }, async (event, entryId) => {
        handled.push({ key: lifeKeyOf(event), entryId });
      }),
    );
    await drained(redis, stream, 'g');
    // A copy in a later batch: the marker written by the first handling skips it.
    await publish(redis, stream, 'seq-1', 1, 'E1');
    await drained(redis, stream, 'g');
    await sleep(200);

    expect(handled).toEqual([{ key: 'E1/seq-1:1', entryId: first }]);
    expect(await redis.get(`${prefix}:events:seen:g:seq-1:1:E1`)).toBe(first);
    expect(await redis.exists(`${prefix}:events:seen:g:seq-1:1`)).toBe(0);
    expect(await redis.hkeys(`${prefix}:consumer:g:epoch:seq-1`)).toEqual(['E1']);
  });

  it('reports a transfer that starts a new life once: through onNewEpoch when given, else through onError (stage epoch)', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-epoch-report');
    await publish(redis, stream, 'seq-1', 1, 'E1');
    await publish(redis, stream, 'seq-1', 2, 'E1');
    // A transfer seen under no epoch first: its first epoch is no new life.
    await publish(redis, stream, 'seq-3', 1);
    await publish(redis, stream, 'seq-3', 2, 'E2');
    // The ledger was lost: seq-1 lives again under E2, in this batch and the next ones (batch 2).
    const newLife = await publish(redis, stream, 'seq-1', 1, 'E2');
    await publish(redis, stream, 'seq-1', 2, 'E2');
    await publish(redis, stream, 'seq-1', 1, 'E2');
    await publish(redis, stream, 'seq-1', 3, 'E2');
    // A transfer whose first life is E2: nothing to report.
    await publish(redis, stream, 'seq-2', 1, 'E2');
    // A late copy of the first life (a republication): a duplicate, no new life. And a late event of the
    // first life not handled before: handled, but no new life either (E1 is not new to the group).
    await publish(redis, stream, 'seq-1', 2, 'E1');
    await publish(redis, stream, 'seq-1', 3, 'E1');

    const calls: string[] = [];
    const told: NewEpochInfo[] = [];
    const errorsWith: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    const consumeWith = (consumer: string): ConsumeHandle =>
      track(
        events.consume(
          {
            group: 'with',
            consumer,
            from: '0',
            batch: 2,
            blockMs: 100,
            onError: (error, info) => errorsWith.push({ error, info }),
            onNewEpoch: (info) => {
              told.push(info);
              calls.push(`new epoch ${info.epoch}`);
            },
          },
          async (event) => void calls.push(lifeKeyOf(event)),
        ),
      );
    const first = consumeWith('c');
    const errorsWithout: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    let handledWithout = 0;
    track(
      events.consume(
        { group: 'without', consumer: 'c', from: '0', blockMs: 100, onError: (error, info) => errorsWithout.push({ error, info }) },
        async () => void handledWithout++,
      ),
    );
    await drained(redis, stream, 'with');
    await drained(redis, stream, 'without');

    // onNewEpoch, once, right before the handler gets the first event of the new life; onError not at all.
    expect(told).toEqual([{ sequenceId: 'seq-1', previous: 'E1', epoch: 'E2', entryId: newLife }]);
    expect(calls).toEqual([
      'E1/seq-1:1',
      'E1/seq-1:2',
      '-/seq-3:1',
      'E2/seq-3:2',
      'new epoch E2',
      'E2/seq-1:1',
      'E2/seq-1:2',
      'E2/seq-1:3',
      'E2/seq-2:1',
      'E1/seq-1:3',
    ]);
    expect(errorsWith).toEqual([]);

    // Without onNewEpoch: onError, once, stage 'epoch'; the events are handled all the same.
    expect(handledWithout).toBe(9);
    expect(errorsWithout.map((e) => e.info)).toEqual([{ stage: 'epoch', reason: 'new-epoch', entryId: newLife, sequenceId: 'seq-1' }]);
    const error = errorsWithout[0]!.error;
    expect(error).toBeInstanceOf(NewEpochError);
    expect(error.message).toMatch(/seq-1 started a new life after the ledger was lost/);
    expect(error).toMatchObject({ code: 'NEW_EPOCH', sequenceId: 'seq-1', previous: 'E1', epoch: 'E2', entryId: newLife });

    // Another consumer of the group, later (the recorded epochs live in Redis): more of the new life, no
    // new report.
    await first.stop();
    consumeWith('c2');
    await publish(redis, stream, 'seq-1', 4, 'E2');
    await expect.poll(() => calls.at(-1), { timeout: 10_000 }).toBe('E2/seq-1:4');
    await expect.poll(() => handledWithout, { timeout: 10_000 }).toBe(10);
    expect(told).toHaveLength(1);
    expect(errorsWithout).toHaveLength(1);
  });

  it('entries without an epoch (or with it empty) de-duplicate by (sequenceId, version) under the markers they always had', async () => {
    const { redis, prefix, events, stream } = consumerSetUp('consumer-epoch-none');
    // A marker left by a consumer of the previous package version, for seq-1 version 1.
    await redis.set(`${prefix}:events:seen:g:seq-1:1`, '1-1', 'PX', 60_000);
    await publish(redis, stream, 'seq-1', 1);
    const second = await publish(redis, stream, 'seq-1', 2);
    await publish(redis, stream, 'seq-1', 2, '');
    await publish(redis, stream, 'seq-1', 2);
    // The same (sequenceId, version) under an epoch is another event: handled.
    await publish(redis, stream, 'seq-1', 1, 'E1');

    const handled: TransferEvent[] = [];
    const errors: ConsumeErrorInfo[] = [];
    track(
      events.consume(
        { group: 'g', consumer: 'c', from: '0', blockMs: 100, onError: (_, info) => errors.push(info) },
        async (event) => void handled.push(event),
      ),
    );
    await drained(redis, stream, 'g');
    expect(handled.map(lifeKeyOf)).toEqual(['-/seq-1:2', 'E1/seq-1:1']);
    expect('epoch' in handled[0]!).toBe(false);
    expect(await redis.get(`${prefix}:events:seen:g:seq-1:2`)).toBe(second);
    expect(await redis.exists(`${prefix}:consumer:g:epoch:seq-1`)).toBe(1);
    expect(errors).toEqual([]);
  });

  it('parseStreamEntry reads epoch: a string when present, absent when missing or empty', () => {
    const fields = ['event', 'transfer.submitted', 'sequenceId', 's', 'walletId', 'w', 'coin', 'eth', 'version', '1', 'at', 'now'];
    const rest = ['data', JSON.stringify({ transfer: null, recoveredBy: 'duplicate' }), 'metadata', ''];
    expect(parseStreamEntry(['1-0', [...fields, ...rest, 'epoch', 'E7']]).epoch).toBe('E7');
    expect('epoch' in parseStreamEntry(['1-0', [...fields, ...rest, 'epoch', '']])).toBe(false);
    expect('epoch' in parseStreamEntry(['1-0', [...fields, ...rest]])).toBe(false);
  });
});

describe('TransferEvents: delivery cap, dead-letter, reasons', () => {
  /** The dead-letter stream's entries as records of their fields. */
  async function deadLetters(redis: Redis, stream: string): Promise<Array<Record<string, string>>> {
    const entries = await redis.xrange(stream, '-', '+');
    return entries.map(([, fields]) =>
      Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]])),
    );
  }

  it('a handler that always throws: after maxDeliveries the entry goes to the dead-letter stream (reason, count) and is acknowledged', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-dead');
    const poison = await publish(redis, stream, 'seq-poison', 1);
    await publish(redis, stream, 'seq-fine', 1);

    const handled: string[] = [];
    let attempts = 0;
    const errors: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    track(
      events.consume(
        {
          group: 'g',
          consumer: 'c',
          from: '0',
          blockMs: 50,
          claimIdleMs: 100,
          maxDeliveries: 3,
          onError: (error, info) => errors.push({ error, info }),
        },
        async (event) => {
          if (event.sequenceId === 'seq-poison') {
            attempts++;
            throw new Error('always fails');
          }
          handled.push(keyOf(event));
        },
      ),
    );
    // The default dead-letter: `<events stream>:dead`.
    await expect.poll(async () => (await deadLetters(redis, `${stream}:dead`)).length, { timeout: 10_000 }).toBe(1);
    await expect.poll(() => pendingCount(redis, stream, 'g'), { timeout: 5_000 }).toBe(0);
    expect(attempts).toBe(3);
    expect(handled).toEqual(['seq-fine:1']);
    const [dead] = await deadLetters(redis, `${stream}:dead`);
    expect(dead).toMatchObject({
      event: 'transfer.submitted',
      sequenceId: 'seq-poison',
      version: '1',
      'deadLetter.reason': 'max-deliveries',
      'deadLetter.deliveries': '3',
      'deadLetter.group': 'g',
      'deadLetter.entryId': poison,
    });
    // Two retriable failures, then one report that it was dead-lettered; nothing more after it.
    await sleep(400);
    expect(errors.map((e) => [e.info.stage, e.info.reason, e.info.deliveries])).toEqual([
      ['handler', 'handler', 1],
      ['handler', 'handler', 2],
      ['handler', 'dead-lettered', 3],
    ]);
    expect(errors[2]!.error.message).toContain(`${stream}:dead`);
    expect(attempts).toBe(3);
  });

  it('dead-letter as a callback: told the entry and why, then the entry is acknowledged', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-dead-cb');
    const poison = await publish(redis, stream, 'seq-poison', 1);
    const told: Array<{ id: string; event?: string; reason: string; deliveries: number }> = [];
    track(
      events.consume(
        {
          group: 'g',
          consumer: 'c',
          from: '0',
          blockMs: 50,
          claimIdleMs: 100,
          maxDeliveries: 2,
          onError: () => undefined,
          deadLetter: async (entry, info) =>
            void told.push({ id: entry.id, event: entry.event?.event, reason: info.reason, deliveries: info.deliveries }),
        },
        async () => {
          throw new Error('always fails');
        },
      ),
    );
    await expect.poll(() => told.length, { timeout: 10_000 }).toBe(1);
    expect(told).toEqual([{ id: poison, event: 'transfer.submitted', reason: 'max-deliveries', deliveries: 2 }]);
    await expect.poll(() => pendingCount(redis, stream, 'g'), { timeout: 5_000 }).toBe(0);
    expect(await redis.exists(`${stream}:dead`)).toBe(0);
  });

  it('a malformed entry reaches onError (reason malformed) and the dead-letter; the default onError writes one line to stderr', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-malformed');
    const garbage = (await redis.xadd(stream, '*', 'foo', 'secret-value-1', 'data', 'secret-value-2'))!;
    const unknownType = (await redis.xadd(
      stream,
      '*',
      ...streamEntryFields({ event: 'transfer.teleported', sequenceId: 'seq-u', version: '1', data: '{}' }),
    ))!;
    const errors: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    track(
      events.consume(
        { group: 'g', consumer: 'c', from: '0', blockMs: 50, onError: (error, info) => errors.push({ error, info }) },
        async () => undefined,
      ),
    );
    await expect.poll(() => errors.length, { timeout: 10_000 }).toBe(2);
    expect(errors.map((e) => e.info)).toEqual([
      expect.objectContaining({ stage: 'parse', reason: 'malformed', entryId: garbage }),
      expect.objectContaining({
        stage: 'parse',
        reason: 'unknown-type',
        entryId: unknownType,
        type: 'transfer.teleported',
        sequenceId: 'seq-u',
      }),
    ]);
    await expect.poll(async () => (await deadLetters(redis, `${stream}:dead`)).length, { timeout: 5_000 }).toBe(2);
    const dead = await deadLetters(redis, `${stream}:dead`);
    expect(dead[0]).toMatchObject({ foo: 'secret-value-1', 'deadLetter.reason': 'malformed', 'deadLetter.entryId': garbage });
    expect(dead[1]).toMatchObject({ event: 'transfer.teleported', 'deadLetter.reason': 'unknown-type', 'deadLetter.entryId': unknownType });
    expect(await pendingCount(redis, stream, 'g')).toBe(0);

    // Without onError: one line per report on stderr, naming the entry, never the payload's values.
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(' ')));
    try {
      const bad = (await redis.xadd(stream, '*', 'event', 'transfer.submitted', 'sequenceId', 'seq-b', 'data', 'secret-value-3'))!;
      track(events.consume({ group: 'quiet', consumer: 'c', from: bad, blockMs: 50 }, async () => undefined));
      const worse = (await redis.xadd(stream, '*', 'event', 'transfer.submitted', 'sequenceId', 'seq-w', 'data', 'secret-value-4'))!;
      await expect.poll(() => lines.length, { timeout: 10_000 }).toBe(1);
      expect(lines[0]).toContain(worse);
      expect(lines[0]).toContain('malformed');
      expect(lines[0]).toContain('seq-w');
      expect(lines[0]).not.toContain('secret-value');
      expect(lines[0]).not.toContain('\n');
    } finally {
      spy.mockRestore();
    }
  });

  it('a version going backwards for a transfer is reported (reason stale-version) and still handed to the handler', async () => {
    const { redis, events, stream } = consumerSetUp('consumer-stale');
    await publish(redis, stream, 'seq-1', 2);
    const stale = await publish(redis, stream, 'seq-1', 1);
    await publish(redis, stream, 'seq-1', 3);
    // Another life of the transfer starts again at 1: no stale version.
    await publish(redis, stream, 'seq-1', 1, 'E2');
    await publish(redis, stream, 'seq-9', 4);

    const handled: string[] = [];
    const errors: Array<{ error: Error; info: ConsumeErrorInfo }> = [];
    const consumeAs = (consumer: string): ConsumeHandle =>
      track(
        events.consume(
          {
            group: 'g',
            consumer,
            from: '0',
            blockMs: 50,
            onNewEpoch: () => undefined,
            onError: (error, info) => errors.push({ error, info }),
          },
          async (event) => void handled.push(lifeKeyOf(event)),
        ),
      );
    const first = consumeAs('c');
    await expect.poll(() => handled.length, { timeout: 10_000 }).toBe(5);
    expect(handled).toEqual(['-/seq-1:2', '-/seq-1:1', '-/seq-1:3', 'E2/seq-1:1', '-/seq-9:4']);
    expect(errors.map((e) => e.info)).toEqual([
      expect.objectContaining({ stage: 'version', reason: 'stale-version', entryId: stale, sequenceId: 'seq-1' }),
    ]);
    expect(errors[0]!.error.message).toMatch(/seq-1.*version 1.*version 2/);

    // Known across consumers and restarts: the group records the highest version it handled per transfer.
    await first.stop();
    const late = await publish(redis, stream, 'seq-9', 3);
    consumeAs('c2');
    await expect.poll(() => handled.length, { timeout: 10_000 }).toBe(6);
    expect(errors.map((e) => e.info)).toEqual([
      expect.objectContaining({ reason: 'stale-version', entryId: stale }),
      expect.objectContaining({ stage: 'version', reason: 'stale-version', entryId: late, sequenceId: 'seq-9' }),
    ]);
  });
});

/** Type-level checks, never called: `tsc --noEmit` fails if the producer's typing regresses. */
export async function typeChecks(producer: TransferProducer, events: TransferEvents): Promise<void> {
  // @ts-expect-error submit() takes a SubmitPayloadInput: a bare walletId is not one
  await producer.submit({ walletId: 'x' });
  // @ts-expect-error trySubmit() too
  await producer.trySubmit({ walletId: 'x' });
  // @ts-expect-error the handler must return a promise
  events.consume({ group: 'g', consumer: 'c' }, () => undefined);
  events.consume({ group: 'g', consumer: 'c' }, async (event) => {
    if (event.event === 'transfer.broadcast') {
      const txid: string = event.data.txid;
      void txid;
    }
  });
}
