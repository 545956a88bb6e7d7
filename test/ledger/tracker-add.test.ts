import { Queue, Worker, type Job } from 'bullmq';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, NO_RECORD, TransferState, type TransitionRequest } from '../../src/ledger/ledger.ts';
import { QueueName, trackerJobs, trackJobId, trackJobOptions } from '../../src/queues/names.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';

/**
 * The `submitted` transition writes the transfer's tracking job itself (transition.lua), in the layout
 * BullMQ's own add writes. These tests hold the two side by side, field by field, so a BullMQ upgrade
 * that changes its layout fails here; and they run the job with a real BullMQ worker, which must pick it
 * up when it is due even while it is already blocked waiting for work.
 */
const redis = newRedis();
const queues: Queue[] = [];
const workers: Worker[] = [];
let keys: Keys;
let prefix: string;
let ledger: Ledger;
let seq = 0;
const id = () => `tracker-${++seq}-a88a1846-b23d-f7e8-2344-f2bddb0c16f9`;

beforeEach(() => {
  prefix = uniquePrefix('tracker');
  keys = createKeys(prefix, `${prefix}:transfer-events`);
  // A virtual ledger clock far from real time: the tracking job must still be stamped with Redis's TIME.
  ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 60_000, clock: () => 1_000_000 });
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.close()));
  await Promise.all(queues.map((queue) => queue.close()));
  await closeAllRedis();
});

function trackQueue(queuePrefix: string): Queue {
  const queue = new Queue(QueueName.TRACK, { connection: redis, prefix: queuePrefix });
  queues.push(queue);
  return queue;
}

/** A transfer in `submitting` whose lease `owner` holds. */
async function sending(sequenceId: string, owner: string): Promise<void> {
  await ledger.transition(sequenceId, { from: [NO_RECORD], to: TransferState.GATED, set: { walletId: '1', coin: 'eth' } });
  const taken = await ledger.transition(sequenceId, {
    from: [TransferState.GATED],
    to: TransferState.SUBMITTING,
    lease: { mode: 'take', owner, ms: 60_000 },
    set: { pending: 1 },
    increment: { sends: 1 },
  });
  expect(taken.ok).toBe(true);
}

function submittedBy(owner: string, queue: Queue, sequenceId: string, delayMs: number): TransitionRequest {
  return {
    from: [TransferState.SUBMITTING],
    to: TransferState.SUBMITTED,
    lease: { mode: 'own', owner },
    stamp: ['submittedAt'],
    unset: ['leaseOwner', 'leaseUntil', 'pending'],
    event: { type: 'transfer.submitted', data: { transfer: null, recoveredBy: 'duplicate' } },
    tracker: trackerJobs(queue, delayMs)(sequenceId),
  };
}

async function stream(key: string): Promise<Array<Record<string, string>>> {
  const entries = await redis.xrange(key, '-', '+');
  return entries.map(([, fields]) => {
    const record: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!;
    return record;
  });
}

describe('the tracking job written by the submitted transition', () => {
  it('is the job BullMQ would add: same hash fields, options, data, state, delayed score, marker and queue events', async () => {
    const sequenceId = id();
    const delayMs = 2_000;
    const ours = trackQueue(prefix);
    const theirs = trackQueue(uniquePrefix('tracker-bullmq'));
    await sending(sequenceId, 'runner-1');

    const before = Date.now();
    const result = await ledger.transition(sequenceId, submittedBy('runner-1', ours, sequenceId, delayMs));
    expect(result.ok).toBe(true);
    await theirs.add(QueueName.TRACK, { sequenceId }, trackJobOptions(sequenceId, delayMs));
    const after = Date.now();

    const jobId = trackJobId(sequenceId);
    const oursHash = await redis.hgetall(ours.toKey(jobId));
    const theirsHash = await redis.hgetall(theirs.toKey(jobId));
    expect(Object.keys(oursHash).sort()).toEqual(Object.keys(theirsHash).sort());
    for (const field of Object.keys(theirsHash)) {
      if (field !== 'timestamp') expect([field, oursHash[field]]).toEqual([field, theirsHash[field]]);
    }
    // Redis's clock, not the ledger's virtual one (1,000,000).
    const stamp = Number(oursHash.timestamp);
    expect(stamp).toBeGreaterThanOrEqual(before - 1_000);
    expect(stamp).toBeLessThanOrEqual(after + 1_000);

    const oursJob = (await ours.getJob(jobId))!;
    const theirsJob = (await theirs.getJob(jobId))!;
    expect(await oursJob.getState()).toBe('delayed');
    expect(await theirsJob.getState()).toBe('delayed');
    expect(oursJob.name).toBe(theirsJob.name);
    expect(oursJob.data).toEqual(theirsJob.data);
    expect(oursJob.opts).toEqual(theirsJob.opts);
    expect(oursJob.delay).toBe(theirsJob.delay);
    expect(await ours.getDelayedCount()).toBe(1);

    // Delayed score: the due time × 0x1000 (BullMQ's getDelayedScore), and the marker at the due time.
    const [member, score] = await redis.zrange(ours.toKey('delayed'), '0', '0', 'WITHSCORES');
    expect(member).toBe(jobId);
    expect(Math.floor(Number(score) / 0x1000)).toBe(stamp + delayMs);
    const [markerMember, markerScore] = await redis.zrange(ours.toKey('marker'), '0', '0', 'WITHSCORES');
    const [theirMarkerMember] = await redis.zrange(theirs.toKey('marker'), '0', '0', 'WITHSCORES');
    expect(markerMember).toBe(theirMarkerMember);
    expect(Math.floor(Number(markerScore))).toBe(stamp + delayMs);

    const oursEvents = await stream(ours.toKey('events'));
    const theirsEvents = await stream(theirs.toKey('events'));
    expect(oursEvents.map((event) => Object.keys(event))).toEqual(theirsEvents.map((event) => Object.keys(event)));
    expect(oursEvents.map((event) => [event.event, event.jobId])).toEqual(theirsEvents.map((event) => [event.event, event.jobId]));
    expect(Number(oursEvents[1]!.delay)).toBe(stamp + delayMs);
  });

  it('is not written when the transition is refused, and nothing else changes', async () => {
    const sequenceId = id();
    const queue = trackQueue(prefix);
    await sending(sequenceId, 'runner-1');
    const refused = await ledger.transition(sequenceId, submittedBy('stale-runner', queue, sequenceId, 1_000));
    expect(refused).toMatchObject({ ok: false, reason: 'owner' });
    expect(await redis.exists(queue.toKey(trackJobId(sequenceId)))).toBe(0);
    expect(await redis.exists(queue.toKey('delayed'), queue.toKey('marker'), queue.toKey('events'))).toBe(0);
    expect((await ledger.get(sequenceId))?.state).toBe(TransferState.SUBMITTING);
  });

  it('leaves an existing job of that id as it is, as BullMQ does with a duplicate id', async () => {
    const sequenceId = id();
    const queue = trackQueue(prefix);
    await queue.add(QueueName.TRACK, { sequenceId }, trackJobOptions(sequenceId, 60_000));
    const jobKey = queue.toKey(trackJobId(sequenceId));
    const existing = await redis.hgetall(jobKey);
    const existingScore = await redis.zscore(queue.toKey('delayed'), trackJobId(sequenceId));
    await sending(sequenceId, 'runner-1');

    const result = await ledger.transition(sequenceId, submittedBy('runner-1', queue, sequenceId, 10));
    expect(result.ok).toBe(true);
    expect(await redis.hgetall(jobKey)).toEqual(existing);
    expect(await redis.zscore(queue.toKey('delayed'), trackJobId(sequenceId))).toBe(existingScore);
    expect(await queue.getDelayedCount()).toBe(1);
  });

  it('is run by a BullMQ worker that was already waiting for work, once it is due', async () => {
    const sequenceId = id();
    const delayMs = 300;
    const queue = trackQueue(prefix);
    const seen: Job[] = [];
    // A long drainDelay: an idle worker blocks that long unless the marker wakes it, so a job that
    // runs within the wait below was announced by the marker, as BullMQ's own add announces it.
    const worker = new Worker(QueueName.TRACK, async (job) => void seen.push(job), { connection: redis, prefix, drainDelay: 60 });
    workers.push(worker);
    await worker.waitUntilReady();
    // Let the worker find the queue empty and block on its marker before the job arrives.
    await sleep(500);
    await sending(sequenceId, 'runner-1');
    expect((await ledger.transition(sequenceId, submittedBy('runner-1', queue, sequenceId, delayMs))).ok).toBe(true);

    const job = await until('the tracking job to run', 10_000, async () => seen[0]);
    expect(job.id).toBe(trackJobId(sequenceId));
    expect(job.name).toBe(QueueName.TRACK);
    expect(job.data).toEqual({ sequenceId });
    // Not before it was due.
    expect(job.processedOn! - job.timestamp).toBeGreaterThanOrEqual(delayMs);
    expect(seen).toHaveLength(1);
  });
});
