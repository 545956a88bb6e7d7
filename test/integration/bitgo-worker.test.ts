/**
 * The whole worker with CUSTODY_PROVIDER=bitgo against the BitGo simulator over HTTP: a transfer waits in
 * `pendingApproval` (no txid) before it is signed and broadcast; one sequenceId is one send whatever
 * the jobs; a send whose answer is lost is found by lookup, never sent twice; a wallet id of the other
 * provider's form is rejected; nothing is ever blocked, since BitGo does not gate on the travel rule.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { FAST_ENV } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { sleep } from '../helpers/wait.ts';

const hexId = () => crypto.randomUUID().replaceAll('-', '');

let sim: BitgoSimulator;
let app: App;
let redis: Redis;
let producer: TransferProducer;
let prefix: string;

beforeAll(async () => {
  sim = await startBitgoSimulator({ port: 0, settings: { approvalAfterMs: 400, txidAfterMs: 200 } });
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
});
afterAll(async () => {
  await app?.close();
  await producer?.close();
  await redis?.quit();
  await sim?.close();
});

const accepted = (sequenceId: string) => sim.stats().sends[sequenceId]?.accepted ?? 0;
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
  it('a transfer an approver rejects: reported once (log, metric), never broadcast, still tracked', async () => {
    const before = sim.settings().approvalAfterMs;
    sim.updateSettings({ approvalAfterMs: 60_000 });
    try {
      const payload = bitgoPayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await producer.submit(payload);
      await producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
      sim.setState(sequenceId, 'rejected');
      const halted = async () => (await app.metrics.registry.getSingleMetric('custody_track_halted_total')?.get())?.values ?? [];
      const deadline = Date.now() + 15_000;
      while (!(await halted()).some((v) => v.labels.state === 'rejected' && v.value >= 1) && Date.now() < deadline) await sleep(50);
      expect(await halted()).toContainEqual(expect.objectContaining({ labels: { state: 'rejected' }, value: 1 }));
      // Later polls see the same state: counted once, and the transfer stays submitted (tracked).
      const polls = sim.stats().requests.transferBySequenceId?.['200'] ?? 0;
      while ((sim.stats().requests.transferBySequenceId?.['200'] ?? 0) < polls + 3 && Date.now() < deadline) await sleep(50);
      expect((await halted()).find((v) => v.labels.state === 'rejected')?.value).toBe(1);
      const record = await app.ledger.get(sequenceId);
      expect(record).toMatchObject({ state: 'submitted', haltedAs: 'rejected' });
      expect(accepted(sequenceId)).toBe(1);
    } finally {
      sim.updateSettings({ approvalAfterMs: before });
    }
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
