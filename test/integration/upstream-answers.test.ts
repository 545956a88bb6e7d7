/**
 * What an upstream answer proves (docs/contract.md, "What an upstream answer proves"), through the
 * whole worker on real Redis, against the simulator over HTTP and, where a proxy's own status is the
 * point, a real HTTP gateway in front of it. One test per finding; each failed on the code before the
 * table moved into src/transfers/send-proof.ts (the commit message says how):
 *  1. a 5xx (or a proxy's 520/522/524, a 408) after the provider recorded the send, then refused
 *     resends → was `transfer.failed` with one accepted send upstream;
 *  2. a 409 on the first send, the sequenceId held by another client's transaction → was
 *     `transfer.submitted {recoveredBy:"duplicate"}`, then the other transaction's txid broadcast;
 *  3. an ended transfer whose record RETENTION removed, enqueued again → was a second life (a second
 *     `transfer.submitted` of version 1).
 * Plus: a lookup before every resend, even after answers that proved "not taken".
 */
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { startSimulator, type FaultKind, type Simulator } from '../../src/simulator/index.ts';
import { sampleSend, samplePayload } from '../../tools/sample-payloads.ts';
import { startGateway, type Gateway } from '../helpers/gateway.ts';
import { simulatorClient } from '../helpers/sim-client.ts';
import { startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

const SETTLED = new Set([
  'transfer.broadcast',
  'transfer.rejected',
  'transfer.blocked',
  'transfer.failed',
  'transfer.expired',
  'transfer.submitted',
]);

function describeEvents(events: TransferEvent[]): string {
  return events.map((e) => `${e.event} v${e.version} ${JSON.stringify(e.data)}`).join(' | ');
}

/** Another client of the same provider account, sending its own transaction under `sequenceId`. */
async function foreignSend(sim: Simulator, sequenceId: string): Promise<void> {
  const client = simulatorClient(sim, { connections: 1 });
  try {
    await client.sendTransaction(310, sampleSend(sequenceId));
  } finally {
    await client.close();
  }
}

describe('answers that prove nothing about a send, through a gateway', () => {
  let sim: Simulator;
  let gateway: Gateway;
  let h: Harness;
  beforeAll(async () => {
    sim = await startSimulator({ port: 0 });
    gateway = await startGateway(sim.url);
    h = await startHarness({
      name: 'upstream-answers',
      simulator: sim,
      env: {
        CUSTODY_SDK_URL: gateway.url,
        CUSTODY_BASE_URL: gateway.url,
        CUSTODY_TOKEN_URL: `${gateway.url}/oauth/token`,
        SUBMIT_ATTEMPTS: '3',
        UNRESOLVED_AFTER: '300ms',
      },
    });
  });
  afterEach(() => {
    gateway.setRule(undefined);
    sim.setFault('sendTransaction', null);
    sim.updateSettings({ visibleAfterMs: 0, includeSequenceIdInTransactions: false });
  });
  afterAll(async () => {
    await h.close();
    await gateway.close();
    await sim.close();
  });

  it.each<[string, FaultKind]>([
    ['500', 'accept-500'],
    ['520', 'accept-520'],
    ['522', 'accept-522'],
    ['524', 'accept-524'],
    ['408', 'accept-408'],
  ])(
    '1: the provider records the first send and answers %s, the resend is refused (400) → never failed; submitted once',
    async (_status, fault) => {
      // Hidden from lookups for a while, so the resend happens and is refused; later resends get 409.
      sim.updateSettings({ visibleAfterMs: 60_000 });
      sim.setFault('sendTransaction', { sequence: [fault, '400'] });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);
      const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
      const events = await h.eventsOf(sequenceId);
      expect(outcome.event, describeEvents(events)).toBe('transfer.submitted');
      expect(outcome.data).toEqual({ transfer: null, recoveredBy: 'duplicate' });
      expect(sim.stats().sends[sequenceId]!.accepted).toBe(1);

      sim.setTxid(sequenceId);
      const terminal = await h.producer.waitForTerminal(sequenceId, 15_000);
      expect(terminal.event).toBe('transfer.broadcast');
      expect(versionProblems(await h.eventsOf(sequenceId))).toEqual([]);
    },
  );

  it('1: a real gateway answers 524 after forwarding each send, every resend too → never failed; unresolved, then submitted when the lookup shows it', async () => {
    sim.updateSettings({ visibleAfterMs: 60_000 });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    gateway.setRule((request) =>
      request.endpoint === 'sendTransaction' && request.sequenceId === sequenceId ? { replaceStatus: 524 } : undefined,
    );
    await h.producer.submit(payload);
    await h.waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.unresolved'));
    const sends = gateway.log.filter((entry) => entry.endpoint === 'sendTransaction' && entry.sequenceId === sequenceId);
    expect(sends.map((entry) => entry.originStatus)).toEqual([200, ...sends.slice(1).map(() => 409)]);
    expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.unresolved']);

    // The provider shows it: the next lookup settles it.
    sim.updateSettings({ visibleAfterMs: 0 });
    sim.setTxid(sequenceId);
    const terminal = await h.producer.waitForTerminal(sequenceId, 15_000);
    expect(terminal.event).toBe('transfer.broadcast');
    const events = await h.eventsOf(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.unresolved', 'transfer.submitted', 'transfer.broadcast']);
    expect(sim.stats().sends[sequenceId]!.accepted).toBe(1);
  });

  it('looks the transfer up before every resend, also after an answer that proved "not taken" (503)', async () => {
    sim.setFault('sendTransaction', { sequence: ['5xx'] });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
    expect(outcome.event).toBe('transfer.submitted');
    const calls = gateway.log.filter((entry) => entry.sequenceId === sequenceId).map((entry) => `${entry.endpoint}:${entry.status}`);
    expect(calls.slice(0, 3)).toEqual(['sendTransaction:503', 'getTransfer:200', 'sendTransaction:200']);
  });

  it('2: the first send is answered 409 (another client holds the sequenceId) → transfer.unresolved SEQUENCE_ID_IN_USE, nothing claimed, nothing tracked', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await foreignSend(sim, sequenceId);
    sim.setTxid(sequenceId); // the foreign transaction is even on chain: its txid must never be ours
    await h.producer.submit(payload);
    await h.waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.unresolved'));
    const events = await h.eventsOf(sequenceId);
    expect(
      events.map((e) => e.event),
      describeEvents(events),
    ).toEqual(['transfer.unresolved']);
    expect(events[0]!.data).toMatchObject({ code: 'SEQUENCE_ID_IN_USE', attempts: 1, lastError: 'CUSTODY_DUPLICATE' });
    const record = (await h.app!.ledger.get(sequenceId))!;
    expect(record.state).toBe('submitting');
    expect(record.inUseSince).toBeGreaterThan(0);
    const track = new Queue(QueueName.TRACK, { connection: h.redis, prefix: h.prefix });
    expect(await track.getJob(trackJobId(sequenceId))).toBeUndefined();
    await track.close();
    // Parked: re-runs send nothing and look nothing up (the foreign record would read as ours).
    const before = gateway.log.filter((entry) => entry.sequenceId === sequenceId).length;
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(gateway.log.filter((entry) => entry.sequenceId === sequenceId).length).toBe(before);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
    expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.unresolved']);
  });

  it("2: the first send answered 503 and the lookup before the resend shows our sequenceId (another client's) → SEQUENCE_ID_IN_USE, no resend", async () => {
    sim.updateSettings({ includeSequenceIdInTransactions: true });
    sim.setFault('sendTransaction', { sequence: ['5xx'] });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await foreignSend(sim, sequenceId).catch(() => undefined); // takes the fault's 503 itself: nothing recorded
    await foreignSend(sim, sequenceId); // recorded
    sim.setFault('sendTransaction', { sequence: ['5xx'] });
    await h.producer.submit(payload);
    await h.waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.unresolved'));
    const events = await h.eventsOf(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.unresolved']);
    expect(events[0]!.data).toMatchObject({ code: 'SEQUENCE_ID_IN_USE' });
    const calls = gateway.log.filter((entry) => entry.sequenceId === sequenceId).map((entry) => `${entry.endpoint}:${entry.status}`);
    expect(calls).toEqual(['sendTransaction:503', 'getTransfer:200']);
  });
});

describe('3: an ended transfer is never started again (tombstones)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'tombstones', env: { RETENTION: '1s' } });
  });
  afterAll(async () => {
    await h.close();
  });

  it('a job for a sequenceId whose record RETENTION removed completes without a send and without an event, under any job id', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    h.sim.setTxid(sequenceId);
    expect((await h.producer.waitForTerminal(sequenceId, 15_000)).event).toBe('transfer.broadcast');
    await until('the record removed at RETENTION', 10_000, async () =>
      (await h.app!.ledger.get(sequenceId)) === undefined ? true : undefined,
    );
    expect(await h.app!.ledger.ended(sequenceId)).toEqual({ state: 'broadcast', version: 2 });

    const submit = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
    const job = await submit.add(QueueName.SUBMIT, payload, { jobId: `again-${sequenceId}` });
    await until('the second job completed', 10_000, async () => ((await job.getState()) === 'completed' ? true : undefined));
    expect((await submit.getJob(job.id!))!.returnvalue).toMatchObject({ outcome: 'ended', ended: { state: 'broadcast', version: 2 } });
    await submit.close();

    // And an invalid payload with that sequenceId publishes nothing either.
    const invalid = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
    const bad = await invalid.add(QueueName.SUBMIT, { ...payload, coin: 'NOT VALID' }, { jobId: `bad-${sequenceId}` });
    await until('the invalid job done', 10_000, async () => (['completed', 'failed'].includes(await bad.getState()) ? true : undefined));
    await invalid.close();

    const events = await h.eventsOf(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expect(events.filter((e) => e.version === 1)).toHaveLength(1);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });

    // The producer's trySubmit says so instead of enqueueing into nothing; submit() stays harmless.
    expect(await h.producer.trySubmit(payload)).toEqual({
      outcome: 'ended',
      sequenceId,
      ended: { event: 'transfer.broadcast', version: 2 },
    });
    await h.producer.submit(payload);
    expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    const fresh = samplePayload();
    expect(await h.producer.trySubmit(fresh)).toMatchObject({ outcome: 'enqueued', sequenceId: fresh.halfSigned.sequenceId });
  });

  it('the tombstone costs tens of bytes and lives RETENTION + TOMBSTONE_RETENTION', async () => {
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    h.sim.setTxid(sequenceId);
    await h.producer.waitForTerminal(sequenceId, 15_000);
    const key = `${h.prefix}:ended:${sequenceId}`;
    const ttl = await h.redis.pttl(key);
    // RETENTION 1 s + TOMBSTONE_RETENTION's default, 3650 days.
    expect(ttl).toBeGreaterThan(3650 * 86_400_000 - 60_000);
    expect(ttl).toBeLessThanOrEqual(3650 * 86_400_000 + 1_000);
    const bytes = Number(await h.redis.memory('USAGE', key));
    console.log(`[tombstone] ${bytes} bytes for a key of ${key.length} characters`);
    expect(bytes).toBeLessThan(200);
  });
});
