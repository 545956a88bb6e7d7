/**
 * EndpointStore.claim (src/webhooks/store.ts) on real Redis, past the bound of the sequenceIds it
 * remembers: a transfer's later event is still held back while an earlier one is read and not queued.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { endpointGroup, EndpointStore, SEQUENCE_IDS_KEPT } from '../../src/webhooks/store.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { streamEntryFields } from '../helpers/stream-entry.ts';

afterAll(closeAllRedis);

const BATCH = 1_000;

describe('EndpointStore.claim', () => {
  it('holds a transfer back behind its pending earlier event after the remembered sequenceIds were emptied', async () => {
    const redis = newRedis();
    const prefix = uniquePrefix('webhook-store', { hashTag: true });
    const stream = `${prefix}:events`;
    const group = endpointGroup('hook');
    const store = new EndpointStore(redis, prefix, 'hook', stream);
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM');
    const read = async (count: number) => redis.xreadgroup('GROUP', group, 'c', 'COUNT', count, 'STREAMS', stream, '>');
    const entry = (sequenceId: string, version: number) =>
      streamEntryFields({ event: 'transfer.cancelled', sequenceId, version: String(version), data: '{}' });

    // The earlier event of transfer `late`: read, never queued (its reader died, say).
    const earlier = (await redis.xadd(stream, '*', ...entry('late', 1)))!;
    await read(1);
    // Rounds of other transfers' entries, read, seen by a claim, then acknowledged, until the store
    // has remembered more sequenceIds than it keeps (`earlier` among them from the first round on).
    for (let round = 0; round * BATCH <= SEQUENCE_IDS_KEPT; round++) {
      const pipeline = redis.pipeline();
      for (let i = 0; i < BATCH; i++) pipeline.xadd(stream, '*', ...entry(`other-${round}-${i}`, 1));
      const ids = ((await pipeline.exec()) ?? []).map(([, id]) => String(id));
      await read(BATCH);
      const newest = ids[ids.length - 1]!;
      await store.enqueue({
        entryId: newest,
        lane: `other-${round}-${BATCH - 1}`,
        body: '{}',
        type: 'transfer.cancelled',
        dueAt: 0,
        eventAt: 0,
      });
      await store.claim(Date.now(), Date.now() + 60_000, 8, 0);
      await redis.xack(stream, group, ...ids);
    }
    // Another transfer's event read and not yet queued: one the store has not seen, so it looks up.
    await redis.xadd(stream, '*', ...entry('bystander', 1));
    await read(1);
    // The later event of `late`, queued and at the head of its lane: it must wait for `earlier`.
    const later = (await redis.xadd(stream, '*', ...entry('late', 2)))!;
    await read(1);
    await store.enqueue({ entryId: later, lane: 'late', body: '{}', type: 'transfer.cancelled', dueAt: 0, eventAt: 0 });
    const round = await store.claim(Date.now(), Date.now() + 60_000, 8, 1);
    expect(earlier < later).toBe(true);
    expect(round.claimed).toEqual([]);
    // Due again at the retry time given, no try spent.
    expect(await redis.zscore(store.keys.due, 'late')).toBe('1');
  });
});
