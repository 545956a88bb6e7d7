/**
 * TransferProducer.cancel (docs/contract.md section 4, "Cancelling a transfer"): the package sends the
 * worker's own cancel request to the worker's own transition script (shipped in the package), so what
 * it decides is what Ledger.cancel decides, in the same atomic step as a send claim. Against the
 * worker in this process (test/helpers/harness.ts) and the simulator: a cancel that takes effect means
 * the worker sends nothing for that sequenceId; one that comes after submitted changes nothing.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidCancelError, jobIdFor, TransferProducer, type CancelResult } from '../../packages/producer/src/index.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { checkCancelResultJson } from '../helpers/json-schemas.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { completedReturnValue } from '../helpers/jobs.ts';
import { LEDGER_DEFAULTS } from '../../packages/producer/src/producer.ts';
import { transitionKeys } from '../../packages/producer/src/keys.ts';

const REASON = 'duplicate of order A-1001, ticket OPS-77';

let h: Harness;
let submitQueue: Queue;

beforeAll(async () => {
  // The worker starts later (the first test cancels before it runs). Broadcast only when a test sets
  // the txid: a submitted transfer stays submitted meanwhile.
  h = await startHarness({ name: 'producer-cancel', worker: false, sim: { settings: { txidAfterMs: 24 * 3_600_000 } } });
  submitQueue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
});
afterAll(async () => {
  await submitQueue?.close();
  await h?.close();
});

const sends = (sequenceId: string) => h.sim.stats().sends[sequenceId]?.accepted ?? 0;

/** The result, after checking it against the shipped JSON Schema (schemas/cancel-result.schema.json). */
async function cancel(sequenceId: string, reason = REASON): Promise<CancelResult> {
  const result = await h.producer.cancel(sequenceId, { reason });
  const json = checkCancelResultJson(JSON.parse(JSON.stringify(result)));
  expect(json.valid, json.errors).toBe(true);
  return result;
}

const completed = (jobId: string) => completedReturnValue(submitQueue, jobId);

describe('TransferProducer.cancel', () => {
  it('on a ledger without an epoch (no worker ever ran): too-late, the ledger cannot vouch; nothing written', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    expect(await cancel(sequenceId)).toEqual({ outcome: 'too-late', state: '-', ledger: 'no-epoch-or-recovering' });
    expect(await h.eventsOf(sequenceId)).toEqual([]);
  });

  it('before the worker runs: cancelled (by: producer); the worker then sends nothing and publishes nothing more', async () => {
    // The ledger's epoch exists, and the worker's record of its script and settings, as they do once a
    // worker ever ran (a cancel is refused while the ledger has an epoch and nothing is recorded).
    const ran = new Ledger(h.redis, createKeys(h.prefix, h.config.queue.eventsStream), {
      eventsMaxLen: h.config.queue.eventsMaxLen,
      retentionMs: h.config.retention.transfersMs,
      tombstoneRetentionMs: h.config.retention.tombstonesMs,
    });
    await ran.epoch.init();
    await ran.recordSettings('replace');
    const payload = samplePayload({ metadata: { orderId: 'A-1001' } });
    const sequenceId = payload.halfSigned.sequenceId;
    const jobId = await h.producer.submit(payload);
    expect(await cancel(sequenceId)).toMatchObject({ outcome: 'cancelled', state: 'cancelled', version: 1 });

    await h.startWorker();
    expect(await completed(jobId)).toMatchObject({ outcome: 'ended', ended: { state: 'cancelled', version: 1 } });
    expect(jobId).toBe(jobIdFor(sequenceId));
    const events = await h.eventsOf(sequenceId);
    expect(events).toMatchObject([
      { event: 'transfer.cancelled', version: 1, walletId: '', coin: '', data: { reason: REASON, by: 'producer' } },
    ]);
    expect(sends(sequenceId)).toBe(0);
    expect(h.sim.transfer(sequenceId)).toBeUndefined();
    // The worker's ledger reads the record and tombstone the package wrote, under its own keys.
    expect(await h.app!.ledger.ended(sequenceId)).toEqual({ state: 'cancelled', version: 1 });
    expect((await h.producer.waitForTerminal(sequenceId, 1_000)).event).toBe('transfer.cancelled');
  });

  it('twice: already-ended, state cancelled, nothing published again', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    expect(await cancel(sequenceId)).toMatchObject({ outcome: 'cancelled', version: 1 });
    // Indexed as the worker's own terminal transitions are: terminal, not active.
    const keys = createKeys(h.prefix, h.config.queue.eventsStream);
    expect(await h.redis.zscore(keys.terminal, sequenceId)).not.toBeNull();
    expect(await h.redis.zscore(keys.byState('received'), sequenceId)).toBeNull();
    expect(await cancel(sequenceId, 'second ask')).toEqual({ outcome: 'already-ended', state: 'cancelled' });
    // Once RETENTION removed the record, the tombstone answers.
    await h.redis.del(createKeys(h.prefix, h.config.queue.eventsStream).transfer(sequenceId));
    expect(await cancel(sequenceId, 'third ask')).toEqual({ outcome: 'already-ended', state: 'cancelled', version: 1 });
    expect((await h.eventsOf(sequenceId)).map((event) => [event.event, event.version])).toEqual([['transfer.cancelled', 1]]);
  });

  it('after submitted: too-late, and the transfer goes on to broadcast with its one send', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    expect(await cancel(sequenceId)).toEqual({ outcome: 'too-late', state: 'submitted' });
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 15_000)).event).toBe('transfer.broadcast');
    expect((await h.eventsOf(sequenceId)).map((event) => event.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expect(sends(sequenceId)).toBe(1);
    expect(await cancel(sequenceId)).toEqual({ outcome: 'already-ended', state: 'broadcast' });
  });

  it('a ledger that went back below the tick this producer saw (a replica promoted, a snapshot restored): too-late', async () => {
    // A ledger of its own, with no worker watching it (a worker would declare the loss itself).
    const prefix = `${h.prefix}-rollback`;
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const ledger = new Ledger(h.redis, keys, { eventsMaxLen: 1_000, retentionMs: 60_000 });
    await ledger.epoch.init();
    await ledger.recordSettings('replace');
    const settings = { eventsMaxLen: 1_000, retentionMs: 60_000 };
    const producer = new TransferProducer({ connection: testRedisUrl(), prefix, eventsStream: keys.events, ledger: settings });
    let late: TransferProducer | undefined;
    try {
      const first = samplePayload().halfSigned.sequenceId;
      expect(await producer.cancel(first, { reason: REASON })).toMatchObject({ outcome: 'cancelled' }); // it sees the tick of its change
      // The older copy: the last change (this cancel among them) forgotten.
      const tick = Number(await h.redis.hget(keys.epoch, 'tick'));
      await h.redis.hset(keys.epoch, 'tick', String(tick - 1));
      const second = samplePayload().halfSigned.sequenceId;
      expect(await producer.cancel(second, { reason: REASON })).toEqual({
        outcome: 'too-late',
        state: '-',
        ledger: 'no-epoch-or-recovering',
      });
      expect(await h.redis.exists(keys.transfer(second), keys.tombstone(second))).toBe(0);
      // The refusal marked the older copy `behind`: a producer that first reads it is refused too,
      // until a loss is declared (a worker's next transition, or `ledger init --after-loss`).
      expect(await h.redis.hget(keys.epoch, 'behind')).toBe('1');
      late = new TransferProducer({ connection: testRedisUrl(), prefix, eventsStream: keys.events, ledger: settings });
      expect(await late.cancel(second, { reason: REASON })).toMatchObject({ outcome: 'too-late' });
      // Had nobody noticed (no mark), it could not tell: the residual risk the docs state.
      await h.redis.hdel(keys.epoch, 'behind');
      expect(await late.cancel(second, { reason: REASON })).toMatchObject({ outcome: 'cancelled' });
    } finally {
      await producer.close();
      await late?.close();
    }
  });

  it('refuses an invalid reason or sequenceId with InvalidCancelError before Redis is contacted', async () => {
    // Every command the producer's connection is asked to send, recorded (BullMQ's own set-up included).
    const lazy = new Redis(testRedisUrl(), { lazyConnect: true });
    const producer = new TransferProducer({ connection: lazy, prefix: h.prefix });
    const sent: string[] = [];
    const sendCommand = lazy.sendCommand.bind(lazy);
    lazy.sendCommand = ((command: { name: string }, stream?: unknown) => {
      sent.push(command.name);
      return sendCommand(command as never, stream as never);
    }) as typeof lazy.sendCommand;
    try {
      const cases: Array<[string, unknown, string[]]> = [
        ['ok-1', '', ['reason']],
        ['ok-1', '   ', ['reason']],
        ['ok-1', 'two\nlines', ['reason']],
        ['ok-1', 'x'.repeat(257), ['reason']],
        ['ok-1', undefined, ['reason']],
        ['ok-1', 42, ['reason']],
        ['not a sequence id', REASON, ['sequenceId']],
        ['', 'bell\u0007', ['sequenceId', 'reason']],
      ];
      for (const [sequenceId, reason, paths] of cases) {
        const error = await producer.cancel(sequenceId, { reason: reason as string }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, JSON.stringify([sequenceId, reason])).toBeInstanceOf(InvalidCancelError);
        expect((error as InvalidCancelError).code).toBe('INVALID_CANCEL');
        expect((error as InvalidCancelError).issues.map((issue) => issue.path)).toEqual(paths);
      }
      expect(sent.filter((name) => /^(eval|evalsha|hmget|get|hset|xadd)$/i.test(name))).toEqual([]);
      // The record shows a cancel that does reach Redis.
      expect(await producer.cancel(samplePayload().halfSigned.sequenceId, { reason: REASON })).toMatchObject({ outcome: 'cancelled' });
      expect(sent).toContain('eval');
    } finally {
      await producer.close();
      lazy.disconnect();
    }
  });

  it("names the same keys as the worker's ledger, in transition.lua's order", () => {
    const keys = createKeys(h.prefix, h.config.queue.eventsStream);
    expect(transitionKeys(h.prefix, h.config.queue.eventsStream, 'seq-1', ['-', 'received', 'gated'], 'cancelled')).toEqual([
      keys.transfer('seq-1'),
      keys.events,
      keys.terminal,
      keys.broadcast,
      keys.transferPayload('seq-1'),
      keys.tombstone('seq-1'),
      keys.trackerOutbox,
      keys.epoch,
      keys.ids,
      keys.endedEntries,
      keys.attention('unresolved'),
      keys.attention('send-unknown'),
      keys.attention('halted'),
      keys.attention('expired-unknown'),
      keys.attention('approval'),
      keys.search,
      keys.byState('cancelled'),
      keys.byState('received'),
      keys.byState('gated'),
      keys.attempts('seq-1'),
    ]);
  });

  it("writes with the worker's defaults of EVENTS_MAXLEN, RETENTION and TOMBSTONE_RETENTION unless told", () => {
    const defaults = loadConfig({ REDIS_URL: testRedisUrl(), ...h.env, EVENTS_MAXLEN: '', RETENTION: '', TOMBSTONE_RETENTION: '' });
    expect(LEDGER_DEFAULTS).toEqual({
      eventsMaxLen: defaults.queue.eventsMaxLen,
      retentionMs: defaults.retention.transfersMs,
      tombstoneRetentionMs: defaults.retention.tombstonesMs,
    });
  });
});
