import { Queue, Worker, type Job } from 'bullmq';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState } from '../../src/ledger/ledger.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { Trackers } from '../../src/queues/trackers.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';

/**
 * A submitted transfer is never without either its tracking job or the ledger's record that it still
 * needs one. The `submitted` transition records the transfer in the tracker outbox (a ledger key: no
 * script of ours writes a key of BullMQ's); Trackers.ensure adds the job with BullMQ's own Queue.add
 * and clears the entry; a sweep adds the job for an entry a crash left, and drops entries of transfers
 * no longer submitted. A terminal transition clears the entry too.
 */
const redis = newRedis();
const queues: Queue[] = [];
const workers: Worker[] = [];
let keys: Keys;
let prefix: string;
let ledger: Ledger;
let track: Queue;
let trackers: Trackers;
let seq = 0;
const id = () => `outbox-${++seq}-a88a1846-b23d-f7e8-2344-f2bddb0c16f9`;

beforeEach(() => {
  prefix = uniquePrefix('outbox');
  keys = createKeys(prefix, `${prefix}:transfer-events`);
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000 });
  track = new Queue(QueueName.TRACK, { connection: redis, prefix });
  queues.push(track);
  trackers = new Trackers(track, ledger, 50);
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  await Promise.all(queues.map((queue) => queue.close()));
  await closeAllRedis();
});

const SUBMITTED = { type: 'transfer.submitted', data: { transfer: null, recoveredBy: 'duplicate' } } as const;

/** A transfer moved to `submitted` as the submit handler does it: with the outbox entry, no job yet. */
async function submitted(sequenceId: string): Promise<void> {
  await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.SUBMITTING, set: { walletId: '1', coin: 'eth' } });
  const moved = await ledger.transition(sequenceId, {
    from: [TransferState.SUBMITTING],
    to: TransferState.SUBMITTED,
    lease: { mode: 'free' },
    event: SUBMITTED,
    trackerPending: true,
  });
  expect(moved.ok).toBe(true);
}

const outbox = () => redis.zrange(keys.trackerOutbox, '0', '-1');

describe('the tracker outbox', () => {
  it('is written by the submitted transition, in the same atomic step, and by nothing refused', async () => {
    const s = id();
    await submitted(s);
    expect(await outbox()).toEqual([s]);
    // A refused transition (the transfer is no longer submitting) records nothing.
    const refused = await ledger.transition(s, {
      from: [TransferState.SUBMITTING],
      to: TransferState.SUBMITTED,
      lease: { mode: 'free' },
      trackerPending: true,
    });
    expect(refused.ok).toBe(false);
    expect(await outbox()).toEqual([s]);
    // No key of BullMQ's was written by the transition: no job hash, nothing delayed or waiting.
    expect(await redis.exists(`${prefix}:${QueueName.TRACK}:${trackJobId(s)}`)).toBe(0);
    expect(await track.getJobCounts('delayed', 'waiting', 'prioritized')).toEqual({ delayed: 0, waiting: 0, prioritized: 0 });
  });

  it('ensure adds the job with Queue.add (BullMQ runs it) and clears the entry; again is a no-op', async () => {
    const s = id();
    await submitted(s);
    expect(await trackers.ensure(s)).toBe('added');
    expect(await outbox()).toEqual([]);
    const job = (await track.getJob(trackJobId(s)))!;
    expect(job.data).toEqual({ sequenceId: s });
    expect(await job.getState()).toBe('delayed');
    expect(await trackers.ensure(s)).toBe('added');
    expect(await track.getJobCounts('delayed', 'waiting')).toEqual({ delayed: 1, waiting: 0 });

    const ran: string[] = [];
    const worker = new Worker(QueueName.TRACK, async (j: Job) => void ran.push((j.data as { sequenceId: string }).sequenceId), {
      connection: redis.duplicate(),
      prefix,
    });
    workers.push(worker);
    await until('the tracking job ran', 10_000, async () => (ran.length > 0 ? true : undefined));
    expect(ran).toEqual([s]);
  });

  it('the sweep adds the job an interrupted runner left in the outbox, and drops entries of transfers no longer submitted', async () => {
    const crashed = id();
    await submitted(crashed); // the runner died before Queue.add
    const ended = id();
    await submitted(ended);
    await ledger.transition(ended, {
      from: [TransferState.SUBMITTED],
      to: TransferState.BROADCAST,
      event: {
        type: 'transfer.expired',
        data: { code: 'TRACKING_DEADLINE', submittedAt: new Date().toISOString(), deadline: new Date().toISOString() },
      },
    });
    // The terminal transition cleared its entry already; one left by an older worker goes in the sweep.
    expect(await outbox()).toEqual([crashed]);
    await redis.zadd(keys.trackerOutbox, 1, ended);

    expect(await trackers.sweep(await ledger.now(), 0, 100)).toEqual([crashed]);
    expect(await outbox()).toEqual([]);
    expect(await (await track.getJob(trackJobId(crashed)))!.getState()).toBe('delayed');
    expect(await track.getJob(trackJobId(ended))).toBeUndefined();
  });

  it('the sweep leaves entries younger than its grace alone (their runner is about to add the job)', async () => {
    const s = id();
    await submitted(s);
    expect(await trackers.sweep(await ledger.now(), 60_000, 100)).toEqual([]);
    expect(await outbox()).toEqual([s]);
  });
});

describe('pollNow', () => {
  it('puts the job it hurries at the head of the line, ahead of polls due before it', async () => {
    // Three due (no worker yet), in this order, and one waiting an hour for its next poll.
    const [a, b, c, d] = [id(), id(), id(), id()];
    for (const s of [a, b, c]) {
      await submitted(s);
      await new Trackers(track, ledger, 0).ensure(s);
    }
    await submitted(d);
    await new Trackers(track, ledger, 3_600_000).ensure(d);
    expect(await track.getJobCounts('delayed', 'waiting')).toEqual({ delayed: 1, waiting: 3 });

    expect(await trackers.pollNow(c)).toBe('polling');
    expect(await trackers.pollNow(d)).toBe('promoted');

    const ran: string[] = [];
    const worker = new Worker(QueueName.TRACK, async (j: Job) => void ran.push((j.data as { sequenceId: string }).sequenceId), {
      connection: redis.duplicate(),
      prefix,
      concurrency: 1,
    });
    workers.push(worker);
    await until('the four ran', 10_000, async () => (ran.length === 4 ? true : undefined));
    expect(ran).toEqual([d, c, a, b]);
  });
});
