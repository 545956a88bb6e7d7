/**
 * EndpointStore (src/webhooks/store.ts) on real Redis: a transfer's later event is held back while an
 * earlier one is read from the stream and not queued, whether its lane is leased by a dispatcher's
 * round (claim) or goes on after a delivery (settle); and a lane keeps stream order however its events
 * are queued.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { endpointGroup, EndpointStore } from '../../src/webhooks/store.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { streamEntryFields } from '../helpers/stream-entry.ts';

afterAll(closeAllRedis);

// Fewer than the pending entries a lease looks at (store.ts).
const OTHERS = 800;

async function setUp() {
  const redis = newRedis();
  const prefix = uniquePrefix('webhook-store', { hashTag: true });
  const stream = `${prefix}:events`;
  const group = endpointGroup('hook');
  const store = new EndpointStore(redis, prefix, 'hook', stream);
  await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
  const read = async (count: number) => redis.xreadgroup('GROUP', group, 'c', 'COUNT', count, 'STREAMS', stream, '>');
  const publish = async (sequenceId: string, version: number) =>
    (await redis.xadd(
      stream,
      '*',
      ...streamEntryFields({ event: 'transfer.cancelled', sequenceId, version: String(version), data: '{}' }),
    ))!;
  const queue = (entryId: string, lane: string) => ({ entryId, lane, body: `{"id":"${entryId}"}`, type: 'transfer.cancelled', eventAt: 0 });
  return { redis, store, stream, group, read, publish, queue };
}

describe('EndpointStore', () => {
  it("holds a claimed transfer back behind its pending earlier event, among other transfers' pending entries", async () => {
    const { redis, store, stream, group, read, publish, queue } = await setUp();
    // Other transfers' entries read and not yet queued, before and after the earlier event.
    const others = async () => {
      const pipeline = redis.pipeline();
      for (let i = 0; i < OTHERS / 2; i++)
        pipeline.xadd(
          stream,
          '*',
          ...streamEntryFields({ event: 'transfer.cancelled', sequenceId: `other-${i}`, version: '1', data: '{}' }),
        );
      await pipeline.exec();
      await read(OTHERS / 2);
    };
    await others();
    // The earlier event of transfer `late`: read, never queued (its reader died, say).
    const earlier = await publish('late', 1);
    await read(1);
    await others();
    // The later event of `late`, queued and at the head of its lane: it must wait for `earlier`. Another
    // transfer's event, queued too, goes ahead.
    const later = await publish('late', 2);
    const free = await publish('free', 1);
    await read(2);
    expect(await store.enqueueAll([queue(later, 'late'), queue(free, 'free')], 0)).toBe(2);
    const round = await store.claim(Date.now(), Date.now() + 60_000, 8, 1);
    expect(round.claimed.map((d) => [d.lane, d.entryId, d.tries])).toEqual([['free', free, 1]]);
    // Due again at the retry time given, no try spent.
    expect(await redis.zscore(store.keys.due, 'late')).toBe('1');
    expect(await redis.hget(store.keys.delivery(later), 'tries')).toBe('0');

    // Once queued (before its later event) and acknowledged, the earlier event is the one tried.
    expect(await store.enqueue({ ...queue(earlier, 'late'), dueAt: 0 })).toBe(true);
    await redis.xack(stream, group, earlier, later);
    const again = await store.claim(Date.now(), Date.now() + 60_000, 8, 1);
    expect(again.claimed.map((d) => [d.lane, d.entryId, d.body])).toEqual([['late', earlier, `{"id":"${earlier}"}`]]);
  });

  it('goes on with a delivered lane under the same lease, but not past a pending earlier event', async () => {
    const { redis, store, stream, group, read, publish, queue } = await setUp();
    const [v1, v2, _v3, v4] = [await publish('t', 1), await publish('t', 2), await publish('t', 3), await publish('t', 4)];
    await read(4);
    // v3 is read and not yet queued; the others are queued and acknowledged.
    expect(await store.enqueueAll([queue(v1, 't'), queue(v2, 't'), queue(v4, 't')], 0)).toBe(3);
    await redis.xack(stream, group, v1, v2, v4);
    const [first] = (await store.claim(Date.now(), Date.now() + 60_000, 8, 1)).claimed;
    expect(first).toMatchObject({ entryId: v1, tries: 1 });
    const leaseUntil = Date.now() + 60_000;
    const [second] = await store.settle([{ delivery: first!, kind: 'delivered', goOn: true }], Date.now(), leaseUntil, 1);
    expect(second).toMatchObject({ lane: 't', entryId: v2, tries: 1 });
    expect(await redis.zscore(store.keys.due, 't')).toBe(String(leaseUntil));
    // v2 delivered: v4 is next in the lane, but v3 is pending; the lane waits, no try spent.
    expect(await store.settle([{ delivery: second!, kind: 'delivered', goOn: true }], Date.now(), leaseUntil, 1)).toEqual([]);
    expect(await redis.zscore(store.keys.due, 't')).toBe('1');
    expect(await redis.hget(store.keys.delivery(v4), 'tries')).toBe('0');
    expect(await redis.lrange(store.keys.lane('t'), 0, -1)).toEqual([v4]);
    // Settling an entry that is no longer the head changes nothing.
    expect(await store.settle([{ delivery: second!, kind: 'delivered', goOn: true }], Date.now(), leaseUntil, 1)).toEqual([]);
    expect(await redis.lrange(store.keys.lane('t'), 0, -1)).toEqual([v4]);
    expect(await redis.zcard(store.keys.backlog)).toBe(1);
  });

  it('keeps a lane in stream order whatever order its events are queued in, each once', async () => {
    const { redis, store, publish, queue } = await setUp();
    const ids = [await publish('o', 1), await publish('o', 2), await publish('o', 3), await publish('o', 4)];
    expect(await store.enqueueAll([queue(ids[2]!, 'o'), queue(ids[3]!, 'o')], 5)).toBe(2);
    expect(await store.enqueueAll([queue(ids[1]!, 'o'), queue(ids[3]!, 'o'), queue(ids[0]!, 'o')], 9)).toBe(2);
    expect(await redis.lrange(store.keys.lane('o'), 0, -1)).toEqual(ids);
    // Due from when the lane got its first event.
    expect(await redis.zscore(store.keys.due, 'o')).toBe('5');
  });
});
