/**
 * The whole worker with CUSTODY_PROVIDER=bitgo against the BitGo simulator over HTTP: a transfer waits in
 * `pendingApproval` (no txid) before it is signed and broadcast; one sequenceId is one send whatever
 * the jobs; a send whose answer is lost is found by lookup, never sent twice; a wallet id of the other
 * provider's form is rejected; nothing is ever blocked, since BitGo does not gate on the travel rule. A
 * transfer BitGo ends for good without a txid (rejected, failed, deleted) ends `transfer.halted`; one a
 * re-org removed stays tracked; a sequenceId another client holds expires SEQUENCE_ID_IN_USE.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { TransferQueries } from '../../src/ledger/queries.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { FAST_ENV } from '../helpers/harness.ts';
import { parseCheckedEntry } from '../helpers/json-schemas.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';

/** A transfer waits 400 ms for its approval, then 200 ms for its txid (tests that need it longer set it, for themselves). */
const SIM_SETTINGS = { approvalAfterMs: 400, txidAfterMs: 200 };
const hexId = () => crypto.randomUUID().replaceAll('-', '');

let sim: BitgoSimulator;
let app: App;
let redis: Redis;
let producer: TransferProducer;
let prefix: string;
let eventsStream: string;
let submitQueue: Queue;
let trackQueue: Queue;

beforeAll(async () => {
  sim = await startBitgoSimulator({ port: 0, settings: SIM_SETTINGS });
  prefix = uniquePrefix('bitgo-worker');
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: prefix,
    ...workerBitgoEnv(sim),
    HTTP_PORT: '0',
    ...FAST_ENV,
  });
  app = await createApp(config, createLogger({ level: config.log.level }));
  redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });
  eventsStream = config.queue.eventsStream;
  submitQueue = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
  trackQueue = new Queue(QueueName.TRACK, { connection: redis, prefix });
});
afterEach(() => {
  sim.updateSettings(SIM_SETTINGS);
});
afterAll(async () => {
  await submitQueue?.close();
  await trackQueue?.close();
  await app?.close();
  await producer?.close();
  await redis?.quit();
  await sim?.close();
});

const accepted = (sequenceId: string) => sim.stats().sends[sequenceId]?.accepted ?? 0;
const haltedCount = async (state: string) =>
  (await app.metrics.registry.getSingleMetric('custody_track_halted_total')?.get())?.values.find((v) => v.labels.state === state)?.value ??
  0;

/** A transfer submitted and left waiting in pendingApproval (for a minute: the test decides its fate). */
async function submittedAwaitingApproval() {
  sim.updateSettings({ approvalAfterMs: 60_000 });
  const payload = bitgoPayload();
  const sequenceId = payload.halfSigned.sequenceId;
  await producer.submit(payload);
  await producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
  return { payload, sequenceId };
}

/** The events of one transfer, oldest first, each checked against its committed JSON Schema. */
async function eventsOf(sequenceId: string, stream = eventsStream): Promise<TransferEvent[]> {
  const entries = await redis.xrange(stream, '-', '+');
  return entries.map((entry) => parseCheckedEntry(entry as [string, string[]])).filter((event) => event.sequenceId === sequenceId);
}

/** Another client of the same BitGo account sends its own transaction under `sequenceId`, first. */
async function foreignSend(walletId: string, coin: string, sequenceId: string): Promise<void> {
  const res = await fetch(`${sim.apiBase}/${coin}/wallet/${walletId}/tx/send`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${sim.accessToken}` },
    body: JSON.stringify({ sequenceId, txHex: '02f8b1aa', recipients: [{ address: 'sim1foreign', amount: '1000' }] }),
  });
  expect(res.status).toBeLessThan(300);
}
const bitgoPayload = (extra: Record<string, unknown> = {}) => samplePayload({ walletId: hexId(), coin: 'tbtc', ...extra });

describe('CUSTODY_PROVIDER=bitgo', () => {
  it('a transfer waits in pendingApproval, then is signed and broadcast: submitted, then broadcast with its txid', async () => {
    const payload = bitgoPayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await producer.submit(payload);
    const submitted = await producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    expect(submitted.event).toBe('transfer.submitted');
    // Accepted and waiting for an approval: no txid yet.
    expect(sim.transfer(sequenceId)).toMatchObject({ state: 'pendingApproval', txid: '' });
    const broadcast = await producer.waitForTerminal(sequenceId, 20_000);
    expect(broadcast).toMatchObject({ event: 'transfer.broadcast', data: { txid: sim.transfer(sequenceId)!.txid } });
    expect(accepted(sequenceId)).toBe(1);
  });

  it('no travel-rule gate: a transfer without a reference is sent, never blocked', async () => {
    const payload = bitgoPayload({ travelRule: undefined });
    await producer.submit(payload);
    const event = await producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000, new Set(['transfer.submitted']));
    expect(event.event).toBe('transfer.submitted');
    expect(accepted(payload.halfSigned.sequenceId)).toBe(1);
  });

  it('one sequenceId under three job ids: one send', async () => {
    const payload = bitgoPayload();
    const sequenceId = payload.halfSigned.sequenceId;
    const queue = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
    await Promise.all(['a', 'b', 'c'].map((suffix) => queue.add('submit-transaction', payload, { jobId: `dup-${suffix}-${sequenceId}` })));
    await producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    await queue.close();
    expect(accepted(sequenceId)).toBe(1);
    expect(sim.stats().sends[sequenceId]?.duplicates ?? 0).toBe(0);
  });

  it('a send accepted whose answer is lost (504 after processing): found by lookup, submitted, never sent twice', async () => {
    sim.setFault('sendTransaction', { sequence: ['accept-504'] });
    const payload = bitgoPayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await producer.submit(payload);
    const event = await producer.waitForTerminal(sequenceId, 20_000, new Set(['transfer.submitted']));
    expect(event.event).toBe('transfer.submitted');
    expect(accepted(sequenceId)).toBe(1);
    sim.setFault('sendTransaction', null);
  });

  it("a wallet id of the other provider's form (an integer) is rejected, nothing sent", async () => {
    const payload = samplePayload({ walletId: 310, coin: 'tbtc' });
    const sequenceId = payload.halfSigned.sequenceId;
    await producer.submit(payload);
    expect(await producer.waitForTerminal(sequenceId, 15_000)).toMatchObject({
      event: 'transfer.rejected',
      data: { code: 'INVALID_PAYLOAD', issues: [{ path: 'walletId' }] },
    });
    expect(sim.stats().sends[sequenceId]).toBeUndefined();
  });

  it('a pendingApproval transfer an approver rejects: submitted once, then halted once; never sent again, tracking ends', async () => {
    const { payload, sequenceId } = await submittedAwaitingApproval();
    expect(sim.transfer(sequenceId)).toMatchObject({ state: 'pendingApproval', txid: '' });
    sim.setState(sequenceId, 'rejected');

    const halted = await producer.waitForTerminal(sequenceId, 15_000);
    expect(halted).toMatchObject({
      event: 'transfer.halted',
      data: { state: 'rejected', providerTransferId: sim.transfer(sequenceId)!.id },
    });
    // Tracking ends with it: its job completes instead of polling on.
    await until('the tracking job to complete', 15_000, async () =>
      (await trackQueue.getJob(trackJobId(sequenceId)))?.finishedOn !== undefined ? true : undefined,
    );
    expect(await app.ledger.get(sequenceId)).toMatchObject({ state: 'halted', haltedAs: 'rejected' });
    expect(await haltedCount('rejected')).toBe(1);

    // The sequenceId stays used: the same payload under another job id completes without a send or an event.
    const again = await submitQueue.add('submit-transaction', payload, { jobId: `again-${sequenceId}` });
    await until('the second job to complete', 15_000, async () => ((await again.getState()) === 'completed' ? true : undefined));
    expect((await eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.halted']);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it.each(['failed', 'deleted'] as const)('a transfer %s upstream before any txid: halted with that state', async (state) => {
    const { sequenceId } = await submittedAwaitingApproval();
    sim.setState(sequenceId, state, { hideTxid: true });
    expect(await producer.waitForTerminal(sequenceId, 15_000)).toMatchObject({ event: 'transfer.halted', data: { state } });
    expect((await eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.halted']);
    expect(accepted(sequenceId)).toBe(1);
  });

  it('waiting for an approval is recorded once (approvalSince), needs attention past CONSOLE_APPROVAL_WAIT, and is cleared when BitGo moves on', async () => {
    const { sequenceId } = await submittedAwaitingApproval();
    const since = await until('approvalSince recorded', 15_000, async () => (await app.ledger.get(sequenceId))?.approvalSince);
    // More polls see the same pendingApproval and write nothing: the first sighting stays.
    const lookups = () => Object.values(sim.stats().requests.transferBySequenceId).reduce((a, b) => a + b, 0);
    const seen = lookups();
    await until('two more polls', 15_000, async () => (lookups() >= seen + 2 ? true : undefined));
    expect((await app.ledger.get(sequenceId))?.approvalSince).toBe(since);

    const keys = createKeys(prefix, eventsStream);
    const now = () => since + 1;
    const withinWait = new TransferQueries(redis, keys, { unresolvedAfterMs: 0, approvalWaitMs: 3_600_000, clock: now });
    const pastWait = new TransferQueries(redis, keys, { unresolvedAfterMs: 0, approvalWaitMs: 1, clock: now });
    expect((await withinWait.attention()).filter((item) => item.sequenceId === sequenceId)).toEqual([]);
    expect((await pastWait.attention()).filter((item) => item.sequenceId === sequenceId)).toEqual([
      expect.objectContaining({ sequenceId, reason: 'approval', since }),
    ]);
    expect((await pastWait.counts()).attention.approval).toBeGreaterThanOrEqual(1);

    // Approved and signed, no txid yet: no longer waiting for an approval.
    sim.setState(sequenceId, 'signed', { hideTxid: true });
    await until('approvalSince cleared', 15_000, async () =>
      (await app.ledger.get(sequenceId))?.approvalSince === undefined ? true : undefined,
    );
    expect((await pastWait.attention()).filter((item) => item.sequenceId === sequenceId)).toEqual([]);
    expect((await app.ledger.get(sequenceId))?.state).toBe('submitted');
  });

  it('a transfer removed by a re-org is not halted: reported once (metric, haltedAs), still tracked, broadcast when mined again', async () => {
    const { sequenceId } = await submittedAwaitingApproval();
    sim.setState(sequenceId, 'removed', { hideTxid: true });
    await until('the removed transfer to be reported', 15_000, async () => ((await haltedCount('removed')) >= 1 ? true : undefined));
    // Later polls see the same state: counted once, no event, the transfer stays submitted (tracked).
    const polls = sim.stats().requests.transferBySequenceId?.['200'] ?? 0;
    await until('three more polls', 15_000, async () =>
      (sim.stats().requests.transferBySequenceId?.['200'] ?? 0) >= polls + 3 ? true : undefined,
    );
    expect(await haltedCount('removed')).toBe(1);
    expect(await app.ledger.get(sequenceId)).toMatchObject({ state: 'submitted', haltedAs: 'removed' });
    expect((await eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted']);
    // Mined again: tracking was still on, and the transfer ends broadcast.
    sim.setState(sequenceId, 'confirmed');
    expect(await producer.waitForTerminal(sequenceId, 15_000)).toMatchObject({
      event: 'transfer.broadcast',
      data: { txid: sim.transfer(sequenceId)!.txid },
    });
    expect(accepted(sequenceId)).toBe(1);
  });
});

describe('CUSTODY_PROVIDER=bitgo, a sequenceId held by another client', () => {
  let inUseApp: App;
  let inUseProducer: TransferProducer;
  let inUseStream: string;
  beforeAll(async () => {
    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      QUEUE_PREFIX: uniquePrefix('bitgo-in-use'),
      ...workerBitgoEnv(sim),
      HTTP_PORT: '0',
      ...FAST_ENV,
      TRACK_DEADLINE: '1s',
    });
    inUseStream = config.queue.eventsStream;
    inUseApp = await createApp(config, createLogger({ level: config.log.level }));
    inUseProducer = new TransferProducer({ connection: redis, prefix: config.queue.prefix, eventsStream: inUseStream });
  });
  afterAll(async () => {
    await inUseApp?.close();
    await inUseProducer?.close();
  });

  it('none of our sends was accepted: unresolved, then at TRACK_DEADLINE expired SEQUENCE_ID_IN_USE (not SEND_OUTCOME_UNKNOWN)', async () => {
    const payload = bitgoPayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await foreignSend(payload.walletId as string, payload.coin as string, sequenceId);
    await inUseProducer.submit(payload);
    const expired = await inUseProducer.waitForTerminal(sequenceId, 20_000);
    const events = (await eventsOf(sequenceId, inUseStream)).map((e) => ({ event: e.event, code: (e.data as { code?: string }).code }));
    expect(events).toEqual([
      { event: 'transfer.unresolved', code: 'SEQUENCE_ID_IN_USE' },
      { event: 'transfer.expired', code: 'SEQUENCE_ID_IN_USE' },
    ]);
    const data = expired.data as { submittedAt: string; deadline: string };
    expect(Date.parse(data.deadline) - Date.parse(data.submittedAt)).toBe(1_000);
    // Only the other client's send was accepted; ours was refused as a duplicate.
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
  });

  it('every send refused, and the lookup before a resend answers a body it cannot read: in use, never failed', async () => {
    // BitGo answers the lookup by sequenceId 200 only with that sequenceId's transfer: one is there.
    sim.setFault('sendTransaction', { probability: 1, kinds: ['401'] });
    sim.setFault('transferBySequenceId', { probability: 1, kinds: ['schema'] });
    try {
      const payload = bitgoPayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await producer.submit(payload);
      const event = await producer.waitForTerminal(sequenceId, 20_000, new Set(['transfer.unresolved', 'transfer.failed']));
      expect(event).toMatchObject({ event: 'transfer.unresolved', data: { code: 'SEQUENCE_ID_IN_USE' } });
      expect(sim.stats().sends[sequenceId]?.accepted ?? 0).toBe(0);
    } finally {
      sim.setFault('sendTransaction', null);
      sim.setFault('transferBySequenceId', null);
    }
  });

  it('a send that may have been processed, then lookups that keep failing: never failed, submitted once one answers', async () => {
    sim.setFault('sendTransaction', { sequence: ['accept-504'] });
    sim.setFault('transferBySequenceId', { probability: 1, kinds: ['5xx'] });
    const payload = bitgoPayload();
    const sequenceId = payload.halfSigned.sequenceId;
    try {
      await producer.submit(payload);
      // More failed lookups than SUBMIT_ATTEMPTS (8): each one counts a failure on the record.
      const deadline = Date.now() + 20_000;
      while (((await app.ledger.get(sequenceId))?.failures ?? 0) < 10 && Date.now() < deadline) await sleep(50);
      expect((await app.ledger.get(sequenceId))?.failures).toBeGreaterThanOrEqual(10);
      expect(await app.ledger.get(sequenceId)).toMatchObject({ state: 'submitting' });
    } finally {
      sim.setFault('sendTransaction', null);
      sim.setFault('transferBySequenceId', null);
    }
    const event = await producer.waitForTerminal(sequenceId, 20_000, new Set(['transfer.submitted', 'transfer.failed']));
    expect(event.event).toBe('transfer.submitted');
    expect(accepted(sequenceId)).toBe(1);
  });
});
