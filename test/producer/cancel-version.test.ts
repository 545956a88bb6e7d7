/**
 * The producer's cancel() and the worker in step: the worker records at start-up the SHA1 of its
 * transition script and the settings a cancel writes with (packages/producer/src/worker-settings.ts);
 * a producer whose copy of the script, events stream or `ledger` settings differ refuses to cancel
 * with VersionMismatchError, naming the fields, and writes nothing. Against the worker in this process
 * (test/helpers/harness.ts) on the test Redis.
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer, VersionMismatchError, type CancelResult } from '../../packages/producer/src/index.ts';
import { LEDGER_DEFAULTS } from '../../packages/producer/src/producer.ts';
import { TRANSITION_LUA } from '../../packages/producer/src/transition.ts';
import { scriptSha, WORKER_SETTING_FIELDS } from '../../packages/producer/src/worker-settings.ts';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';

const REASON = 'duplicate of order A-1001, ticket OPS-77';

let h: Harness;
let keys: Keys;
const opened: TransferProducer[] = [];

beforeAll(async () => {
  h = await startHarness({ name: 'producer-version' });
  keys = createKeys(h.prefix, h.config.queue.eventsStream);
});
afterAll(async () => {
  for (const producer of opened) await producer.close();
  await h?.close();
});

function producer(options: Partial<ConstructorParameters<typeof TransferProducer>[0]> = {}): TransferProducer {
  const made = new TransferProducer({
    connection: testRedisUrl(),
    prefix: h.prefix,
    eventsStream: h.config.queue.eventsStream,
    ...options,
  });
  opened.push(made);
  return made;
}

/** The cancel's rejection (fails the test when it resolves). */
async function refusal(cancel: Promise<CancelResult>): Promise<VersionMismatchError> {
  const error = await cancel.then(
    (result) => new Error(`resolved ${JSON.stringify(result)}`),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(VersionMismatchError);
  return error as VersionMismatchError;
}

/** Nothing of the sequenceId in Redis: no record, no tombstone, no event. */
async function nothingWritten(sequenceId: string): Promise<void> {
  expect(await h.redis.exists(keys.transfer(sequenceId), keys.tombstone(sequenceId))).toBe(0);
  expect(await h.eventsOf(sequenceId)).toEqual([]);
}

describe('the worker records its transition script and settings', () => {
  it('at start-up, under the ledger prefix: the SHA1 of the script the package ships, and its settings', async () => {
    const recorded = await h.redis.hgetall(keys.workerSettings);
    expect(recorded).toMatchObject({
      script: scriptSha(TRANSITION_LUA),
      eventsStream: h.config.queue.eventsStream,
      eventsMaxLen: String(h.config.queue.eventsMaxLen),
      retentionMs: String(h.config.retention.transfersMs),
      tombstoneTtlMs: String(h.config.retention.transfersMs + h.config.retention.tombstonesMs),
    });
    expect(Number(recorded.recordedAt)).toBeGreaterThan(0);
    expect(keys.workerSettings).toBe(`${h.prefix}:ledger:worker`);
  });

  it('a worker with other settings records its own and says so in one warn line; after a reconnection only what is absent', async () => {
    const prefix = uniquePrefix('producer-version-deploy');
    const lines: Array<Record<string, unknown>> = [];
    const start = (retention: string) =>
      createApp(
        loadConfig({ ...h.env, QUEUE_PREFIX: prefix, RETENTION: retention, LOG_LEVEL: 'info' }),
        createLogger({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) }),
      );
    const settingsKey = createKeys(prefix, `${prefix}:transfer-events`).workerSettings;
    const first = await start('30d');
    const second = await start('7d');
    try {
      const warned = lines.filter((line) => String(line.msg).includes('another transition script or other ledger settings'));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({
        level: 'warn',
        fields: ['retentionMs', 'tombstoneTtlMs'],
        before: { retentionMs: String(30 * 86_400_000) },
      });
      expect(await h.redis.hget(settingsKey, 'retentionMs')).toBe(String(7 * 86_400_000));
      // The first worker reconnects: the record stays the second's. (The worker's own 'ready' listener
      // runs before this test's, so a read on its connection comes after what the listener sent.)
      first.redis.disconnect(true);
      await once(first.redis, 'ready');
      expect(await first.redis.hget(settingsKey, 'retentionMs')).toBe(String(7 * 86_400_000));
      // Redis lost the record: a reconnection puts it back.
      await h.redis.del(settingsKey);
      first.redis.disconnect(true);
      await once(first.redis, 'ready');
      expect(await first.redis.hget(settingsKey, 'retentionMs')).toBe(String(30 * 86_400_000));
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe('TransferProducer.cancel against what the worker recorded', () => {
  it('with the same settings: cancels', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    expect(await producer().cancel(sequenceId, { reason: REASON })).toMatchObject({ outcome: 'cancelled', state: 'cancelled' });
  });

  it('with another ledger.retentionMs: VersionMismatchError naming the fields, nothing written', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const error = await refusal(producer({ ledger: { retentionMs: 60_000 } }).cancel(sequenceId, { reason: REASON }));
    expect(error.code).toBe('VERSION_MISMATCH');
    expect(error.recorded).toBe(true);
    // The tombstone's TTL is RETENTION + TOMBSTONE_RETENTION: it differs with RETENTION.
    expect(error.fields).toEqual(['retentionMs', 'tombstoneTtlMs']);
    expect(error.differences[0]).toEqual({ field: 'retentionMs', worker: String(h.config.retention.transfersMs), mine: '60000' });
    expect(error.message).toMatch(/retentionMs \(worker: \d+, here: 60000\)/);
    await nothingWritten(sequenceId);
  });

  it('with another events stream or EVENTS_MAXLEN: refused, each field named', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const stream = await refusal(producer({ eventsStream: `${h.prefix}:other-events` }).cancel(sequenceId, { reason: REASON }));
    expect(stream.fields).toEqual(['eventsStream']);
    const maxLen = await refusal(
      producer({ ledger: { eventsMaxLen: LEDGER_DEFAULTS.eventsMaxLen + 1 } }).cancel(sequenceId, { reason: REASON }),
    );
    expect(maxLen.fields).toEqual(['eventsMaxLen']);
    await nothingWritten(sequenceId);
    expect(await h.redis.exists(`${h.prefix}:other-events`)).toBe(0);
  });

  it('when the worker recorded another script: refused (script); once the record matches again, the same producer cancels', async () => {
    const recordedScript = await h.redis.hget(keys.workerSettings, 'script');
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const p = producer();
    await h.redis.hset(keys.workerSettings, 'script', 'f'.repeat(40));
    try {
      const error = await refusal(p.cancel(sequenceId, { reason: REASON }));
      expect(error.fields).toEqual(['script']);
      expect(error.differences).toEqual([{ field: 'script', worker: 'f'.repeat(40), mine: scriptSha(TRANSITION_LUA) }]);
      await nothingWritten(sequenceId);
    } finally {
      await h.redis.hset(keys.workerSettings, 'script', recordedScript!);
    }
    // A refusal is never judged on what was read before: it reads again first.
    expect(await p.cancel(sequenceId, { reason: REASON })).toMatchObject({ outcome: 'cancelled' });
  });

  it('reads the record again after a reconnection', async () => {
    const connection = new Redis(testRedisUrl(), { maxRetriesPerRequest: 1 });
    const p = producer({ connection });
    try {
      expect(await p.cancel(samplePayload().halfSigned.sequenceId, { reason: REASON })).toMatchObject({ outcome: 'cancelled' });
      await h.redis.hset(keys.workerSettings, 'eventsMaxLen', '5');
      connection.disconnect(true);
      await once(connection, 'ready');
      const sequenceId = samplePayload().halfSigned.sequenceId;
      expect((await refusal(p.cancel(sequenceId, { reason: REASON }))).fields).toEqual(['eventsMaxLen']);
      await nothingWritten(sequenceId);
    } finally {
      await h.redis.hset(keys.workerSettings, 'eventsMaxLen', String(h.config.queue.eventsMaxLen));
      await p.close();
      connection.disconnect();
    }
  });

  it('nothing recorded: refused while the ledger has an epoch (every field, recorded false); without one, too-late and nothing written', async () => {
    const prefix = uniquePrefix('producer-version-none');
    const own = createKeys(prefix, `${prefix}:transfer-events`);
    const p = producer({ prefix, eventsStream: own.events });
    const never = samplePayload().halfSigned.sequenceId;
    expect(await p.cancel(never, { reason: REASON })).toEqual({ outcome: 'too-late', state: '-', ledger: 'no-epoch-or-recovering' });

    // An epoch (a worker ran, or `ledger init`), but no record: a worker older than the record, or the record lost.
    const ledger = new Ledger(h.redis, own, { eventsMaxLen: LEDGER_DEFAULTS.eventsMaxLen, retentionMs: LEDGER_DEFAULTS.retentionMs });
    await ledger.epoch.init();
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const error = await refusal(p.cancel(sequenceId, { reason: REASON }));
    expect(error).toMatchObject({ code: 'VERSION_MISMATCH', recorded: false, fields: [...WORKER_SETTING_FIELDS] });
    expect(await h.redis.exists(own.transfer(sequenceId), own.tombstone(sequenceId), own.events)).toBe(0);
    // Once a worker recorded the same settings, it cancels.
    await ledger.recordSettings('replace');
    expect(await p.cancel(sequenceId, { reason: REASON })).toMatchObject({ outcome: 'cancelled' });
  });
});
