import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { createReconcileHandler } from '../../src/jobs/reconcile/handler.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import { legacyTrackJobId, QueueName, trackJobId, trackJobOptions } from '../../src/queues/names.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { Trackers } from '../../src/queues/trackers.ts';
import { newSequenceId } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';

const redis = newRedis();
const queues: Queue[] = [];
afterAll(async () => {
  await Promise.all(queues.map((queue) => queue.close()));
  await closeAllRedis();
});

describe('the tracking job', () => {
  it('has one short id per sequenceId, whatever its length', () => {
    const ids = ['a88a1846-b23d-f7e8-2344-f2bddb0c16f9', '1', 'x'.repeat(128), 'a88a1846-b23d-f7e8-2344-f2bddb0c16f8'].map(trackJobId);
    expect(new Set(ids).size).toBe(4);
    for (const id of ids) expect(id).toMatch(/^track-[A-Za-z0-9_-]{22}$/);
    expect(trackJobId('a88a1846-b23d-f7e8-2344-f2bddb0c16f9')).toBe(ids[0]);
  });

  it('is stored as a compact listpack hash, even delayed by an hour', async () => {
    const queue = new Queue(QueueName.TRACK, { connection: redis, prefix: uniquePrefix('track-job') });
    queues.push(queue);
    const sequenceId = newSequenceId();
    await queue.add(QueueName.TRACK, { sequenceId }, trackJobOptions(sequenceId, 3_600_000));
    const key = `${queue.opts.prefix}:${QueueName.TRACK}:${trackJobId(sequenceId)}`;
    const opts = await redis.hget(key, 'opts');
    expect(JSON.parse(opts!)).toEqual({ jobId: trackJobId(sequenceId), delay: 3_600_000 });
    expect(await redis.call('OBJECT', 'ENCODING', key)).toBe('listpack');
    const job = (await queue.getJob(trackJobId(sequenceId)))!;
    expect(job.data).toEqual({ sequenceId });
    expect(job.opts.attempts).toBe(0);
  });

  it('reconciliation leaves a live tracker of the former id alone, and replaces one that ended', async () => {
    const prefix = uniquePrefix('track-legacy');
    const keys = createKeys(prefix, `${prefix}:events`);
    const ledger = new Ledger(redis, keys, { eventsMaxLen: 1_000, retentionMs: 3_600_000 });
    const track = new Queue(QueueName.TRACK, { connection: redis, prefix });
    const submit = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
    queues.push(track, submit);
    const reconcile = createReconcileHandler({
      ledger,
      submitQueue: submit,
      trackers: new Trackers(track, ledger, 3_600_000),
      custody: {
        findTransfer: async () => ({ kind: 'absent', others: new Map(), compared: [], sendsListed: 0 }),
        getWalletTransaction: async () => {
          throw new Error('not used');
        },
      },
      graceMs: 0,
      retentionMs: 3_600_000,
    });
    const run = () =>
      reconcile({
        job: { id: 'reconcile', name: QueueName.RECONCILE, data: {} },
        token: undefined,
        log: createLogger({ level: 'silent' }),
      } as unknown as JobContext);

    const sequenceId = newSequenceId();
    await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.SUBMITTED, set: { walletId: '310', coin: 'eth' } });
    await track.add(QueueName.TRACK, { sequenceId }, { jobId: legacyTrackJobId(sequenceId), delay: 3_600_000 });
    expect(await run()).toMatchObject({ skipped: false, trackersRestored: 0 });
    expect(await track.getJob(trackJobId(sequenceId))).toBeUndefined();

    await (await track.getJob(legacyTrackJobId(sequenceId)))!.remove();
    expect(await run()).toMatchObject({ skipped: false, trackersRestored: 1 });
    expect(await (await track.getJob(trackJobId(sequenceId)))!.getState()).toBe('delayed');
  });
});
