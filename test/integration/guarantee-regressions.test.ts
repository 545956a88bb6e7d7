/**
 * Regressions of "The guarantee, made true under every interleaving": one test per reproduction found
 * against the code before the fix (51fe0d4), each on real Redis, against the real simulator over HTTP
 * wherever upstream is involved. Each test fails on that code (see the commit message for how).
 *
 * Where a reproduction needs control no simulator offers (a runner that outlives its lease, a process
 * clock 30 s ahead), the real submit handler runs with the real ledger and a real CustodyClient, wrapped
 * so that one call's answer is held until the test releases it: the pause between an answer and the
 * write of its outcome.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseStreamEntry, type TransferEvent } from '../../packages/producer/src/events.ts';
import { createReconcileHandler, type ReconcileResult } from '../../src/jobs/reconcile/handler.ts';
import { LookupNarrowing } from '../../src/custody/lookup-narrowing.ts';
import { findInAnswer } from '../../src/custody/matching.ts';
import { createSubmitHandler, type SubmitDeps } from '../../src/jobs/submit-transaction/handler.ts';
import { createTrackHandler } from '../../src/jobs/track-transfer/handler.ts';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger, TERMINAL_STATES, TransferState } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import { RetryLater } from '../../src/queues/outcomes.ts';
import { QueueName } from '../../src/queues/names.ts';
import { Trackers } from '../../src/queues/trackers.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { startSimulator, type FaultKind, type Simulator } from '../../src/simulator/index.ts';
import type { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { simulatorClient } from '../helpers/sim-client.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { newSequenceId, samplePayload, type SamplePayload } from '../../tools/sample-payloads.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';
import { recordUnknownSend } from '../helpers/unknown-send.ts';

const TERMINAL = new Set(['transfer.broadcast', 'transfer.rejected', 'transfer.blocked', 'transfer.failed', 'transfer.expired']);
/** What ends a submission: its terminal events, and `transfer.submitted`. */
const SETTLED = new Set([...TERMINAL, 'transfer.submitted']);
const log = createLogger({ level: 'silent' });

/** docs/contract.md section 4 on one transfer's events: versions 1..n, at most one terminal event and nothing after it, submitted at most once. */
function expectContractHolds(events: TransferEvent[]): void {
  expect(versionProblems(events)).toEqual([]);
  const terminal = events.filter((event) => TERMINAL.has(event.event));
  expect(terminal.length, events.map((e) => e.event).join(', ')).toBeLessThanOrEqual(1);
  if (terminal[0]) expect(events.at(-1)).toBe(terminal[0]);
  expect(events.filter((event) => event.event === 'transfer.submitted').length).toBeLessThanOrEqual(1);
}

function describeEvents(events: TransferEvent[]): string {
  return events.map((e) => `${e.event} v${e.version} ${JSON.stringify(e.data)}`).join(' | ');
}

/** Redis's clock (what leases are judged by), ms. */
async function redisNow(redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

function sequenceIdOf(payload: SamplePayload): string {
  return payload.halfSigned.sequenceId;
}

/** The txHex the simulator recorded for the accepted send (it keeps the request in `raw`). */
function acceptedTxHex(sim: Simulator, sequenceId: string): string | undefined {
  const raw = sim.transfer(sequenceId)?.record.raw;
  return raw ? (JSON.parse(raw) as { txHex: string }).txHex : undefined;
}

// ---------------------------------------------------------------------------------------------------
// 1. A send that may have gone out never ends in transfer.failed; 5b-5d share the same worker.

describe('through the worker: 1 (never failed while a send may have gone out), 5b, 5c, 5d', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'guarantee-1', env: { SUBMIT_ATTEMPTS: '3', UNRESOLVED_AFTER: '300ms' } });
  });
  afterEach(() => {
    h.sim.setFault('sendTransaction', null);
    h.sim.updateSettings({ visibleAfterMs: 0 });
  });
  afterAll(async () => {
    await h.close();
  });

  /** Submits with the first sends answered as `faults`; upstream shows nothing by lookup until setTxid. */
  async function submitHidden(faults: Array<FaultKind | 'ok'>): Promise<string> {
    h.sim.updateSettings({ visibleAfterMs: 60_000 });
    h.sim.setFault('sendTransaction', { sequence: faults });
    const payload = samplePayload();
    await h.producer.submit(payload);
    return sequenceIdOf(payload);
  }

  /** Lets upstream show the transfer with its txid, and waits for the tracker's broadcast. */
  async function broadcastNow(sequenceId: string): Promise<TransferEvent[]> {
    h.sim.setTxid(sequenceId);
    await h.producer.waitForTerminal(sequenceId, 15_000);
    return h.eventsOf(sequenceId);
  }

  it('1a: first send processed and its connection dropped, the resend answered 200 {success:false} → not failed; submitted once (409 on a later resend)', async () => {
    const sequenceId = await submitHidden(['accept-reset', 'success-false']);
    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
    expect(outcome.event, describeEvents(await h.eventsOf(sequenceId))).toBe('transfer.submitted');
    expect(outcome.data).toEqual({ transfer: null, recoveredBy: 'duplicate' });
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
    expect((await h.app!.ledger.get(sequenceId))!.sends).toBe(3);

    const events = await broadcastNow(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expectContractHolds(events);
    expect(h.sim.stats().sends[sequenceId]!.accepted).toBe(1);
  });

  it('1b: first send processed and its connection dropped, every resend answered 5xx until SUBMIT_ATTEMPTS → unresolved (not failed), then submitted when a lookup shows it', async () => {
    const sequenceId = await submitHidden(['accept-reset', '5xx', '5xx', '5xx', '5xx']);
    const settledOrUnresolved = (all: TransferEvent[]) =>
      all.some((e) => e.sequenceId === sequenceId && (SETTLED.has(e.event) || e.event === 'transfer.unresolved'));
    await h.waitForEvents(settledOrUnresolved, 15_000);
    const early = await h.eventsOf(sequenceId);
    expect(
      early.map((e) => e.event),
      describeEvents(early),
    ).toEqual(['transfer.unresolved']);
    expect(early[0]!.data).toMatchObject({ code: 'SEND_OUTCOME_UNKNOWN', attempts: 3 });
    const record = (await h.app!.ledger.get(sequenceId))!;
    expect(record.state).toBe(TransferState.SUBMITTING);
    expect(record.sends).toBe(3); // resends stop at SUBMIT_ATTEMPTS; lookups go on
    expect(record.unknownSince).toBeGreaterThan(0);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });

    const events = await broadcastNow(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.unresolved', 'transfer.submitted', 'transfer.broadcast']);
    expect(events[1]!.data).toMatchObject({ transfer: null, recoveredBy: 'get-transfer' });
    expectContractHolds(events);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect((await h.app!.ledger.get(sequenceId))!.sends).toBe(3);
  });

  it.each<[string, FaultKind]>([
    ['an unreadable 200 (truncated body)', 'accept-malformed'],
    ['a gateway 504', 'accept-504'],
  ])(
    '1c: first send processed and answered with %s, the resend answered 400 → not failed; submitted once (409 on a later resend)',
    async (_name, first) => {
      const sequenceId = await submitHidden([first, '400']);
      const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
      expect(outcome.event, describeEvents(await h.eventsOf(sequenceId))).toBe('transfer.submitted');
      expect(outcome.data).toEqual({ transfer: null, recoveredBy: 'duplicate' });
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });

      const events = await broadcastNow(sequenceId);
      expect(events.map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
      expectContractHolds(events);
    },
  );

  // ---- 5b, 5c, 5d share this worker.

  /** The raw BullMQ job hash (read without parsing its data, which may not be JSON). */
  async function jobHash(jobId: string): Promise<Record<string, string>> {
    return h.redis.hgetall(`${h.prefix}:${QueueName.SUBMIT}:${jobId}`);
  }

  /** BullMQ's counters in the job hash: attempts made, attempts started, times stalled. */
  function counters(hash: Record<string, string>) {
    return { made: Number(hash.atm ?? 0), started: Number(hash.ats ?? 0), stalled: Number(hash.stc ?? 0) };
  }

  async function waitForJobEnd(jobId: string, timeoutMs = 10_000): Promise<string> {
    const queue = h.app!.queues[QueueName.SUBMIT];
    return until(
      `job ${jobId} to end`,
      timeoutMs,
      async () => {
        const state = await queue.getJobState(jobId);
        return state === 'failed' || state === 'completed' ? state : undefined;
      },
      25,
    );
  }

  /**
   * A normal transfer through the same worker, to its broadcast (two events): shows the worker keeps
   * working, and lets time pass by events rather than by a sleep.
   */
  async function sentinelBroadcast(): Promise<void> {
    const payload = samplePayload();
    await h.producer.submit(payload);
    expect((await h.producer.waitForTerminal(sequenceIdOf(payload), 15_000)).event).toBe('transfer.broadcast');
  }

  function transferEventsOtherThan(events: TransferEvent[]): TransferEvent[] {
    return events.filter((e) => e.event !== 'reconcile.completed');
  }

  it('5b: a job of another name in the submit queue fails for good, untouched: no ledger record, no event, nothing sent, no cycling', async () => {
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    const jobId = `other-name-${newSequenceId()}`;
    const before = transferEventsOtherThan(await h.events()).length;
    await h.app!.queues[QueueName.SUBMIT].add('other-name', payload, { jobId });

    expect(await waitForJobEnd(jobId)).toBe('failed');
    const failed = await jobHash(jobId);
    expect(failed.failedReason).toMatch(/job name "other-name" is not "submit-transaction"/);
    expect(counters(failed)).toEqual({ made: 1, started: 1, stalled: 0 });
    expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();
    expect(h.sim.stats().sends[sequenceId]).toBeUndefined();

    await sentinelBroadcast();
    expect(await h.app!.queues[QueueName.SUBMIT].getJobState(jobId)).toBe('failed');
    const later = await jobHash(jobId);
    expect(counters(later)).toEqual(counters(failed));
    expect(await h.eventsOf(sequenceId)).toEqual([]);
    // Only the sentinel's two events were published meanwhile (no rejection for the foreign job).
    expect(transferEventsOtherThan(await h.events()).length).toBe(before + 2);
  });

  it('5c: a job whose data is not JSON fails for good with a clear reason, its data left as it was, instead of cycling active → stalled', async () => {
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    const jobId = `garbled-${newSequenceId()}`;
    const garbled = '{"walletId":310,"coin":"eth","txHex":"02f8';
    const before = transferEventsOtherThan(await h.events()).length;
    const job = await h.app!.queues[QueueName.SUBMIT].add(QueueName.SUBMIT, payload, { jobId, delay: 3_600_000 });
    await h.redis.hset(`${h.prefix}:${QueueName.SUBMIT}:${jobId}`, 'data', garbled);
    await job.promote();

    expect(await waitForJobEnd(jobId)).toBe('failed');
    const failed = await jobHash(jobId);
    expect(failed.failedReason).toMatch(/not JSON/);
    expect(counters(failed)).toEqual({ made: 1, started: 1, stalled: 0 });
    expect(failed.data).toBe(garbled);
    expect(await h.app!.ledger.get(sequenceId)).toBeUndefined();
    expect(h.sim.stats().sends[sequenceId]).toBeUndefined();

    await sentinelBroadcast();
    expect(await h.app!.queues[QueueName.SUBMIT].getJobState(jobId)).toBe('failed');
    const later = await jobHash(jobId);
    expect(counters(later)).toEqual(counters(failed));
    expect(transferEventsOtherThan(await h.events()).length).toBe(before + 2);
  });

  it('5d: once a record exists, its owner job sends the payload stored with the record, not the one it carries', async () => {
    const stored = samplePayload();
    const sequenceId = sequenceIdOf(stored);
    const carried = samplePayload({ sequenceId }); // same transfer, other transaction bytes
    expect(carried.txHex).not.toBe(stored.txHex);
    const jobId = `owner-${newSequenceId()}`;
    // What a first run that died after gating left: a record owned by jobId, holding its payload.
    const ledger = h.app!.ledger;
    const created = await ledger.transition(sequenceId, {
      from: ['-'],
      to: TransferState.RECEIVED,
      set: { jobId, walletId: '310', coin: 'eth', metadata: '', createdAt: Date.now(), payload: JSON.stringify(stored) },
    });
    expect(created.ok).toBe(true);
    expect(
      (await ledger.transition(sequenceId, { from: [TransferState.RECEIVED], to: TransferState.GATED, set: { gateOutcome: 'passed' } })).ok,
    ).toBe(true);

    await h.app!.queues[QueueName.SUBMIT].add(QueueName.SUBMIT, carried, { jobId });
    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
    expect(outcome.event).toBe('transfer.submitted');
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect(acceptedTxHex(h.sim, sequenceId)).toBe(stored.txHex);
    expect(acceptedTxHex(h.sim, sequenceId)).not.toBe(carried.txHex);
  });
});

// ---------------------------------------------------------------------------------------------------
// 2. The send lease covers the whole send.

interface LeaseSample {
  /** Redis's clock at the sample. */
  now: number;
  state: string;
  leaseOwner: string | undefined;
  /** 0 when no lease is recorded (never taken, or released by its holder). */
  leaseUntil: number;
}

/**
 * Samples the transfer's record and Redis's clock in one atomic look every 20 ms, from before the job
 * is enqueued until the transfer leaves `submitting` for good (submitted or terminal).
 */
async function sampleLease(h: Harness, sequenceId: string, submit: () => Promise<void>, timeoutMs: number): Promise<LeaseSample[]> {
  const key = createKeys(h.prefix, h.config.queue.eventsStream).transfer(sequenceId);
  const samples: LeaseSample[] = [];
  await submit();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [[, time], [, hash]] = (await h.redis.multi().time().hgetall(key).exec()) as [
      [null, [string, string]],
      [null, Record<string, string>],
    ];
    const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    if (hash.state === TransferState.SUBMITTED || TERMINAL_STATES.has(hash.state as TransferState)) return samples;
    if (hash.state === TransferState.SUBMITTING) {
      samples.push({ now, state: hash.state, leaseOwner: hash.leaseOwner, leaseUntil: Number(hash.leaseUntil ?? 0) });
    }
    if (Date.now() > deadline) throw new Error(`transfer still not submitted after ${timeoutMs} ms; record ${JSON.stringify(hash)}`);
    await sleep(20);
  }
}

/**
 * The lease in every sample is either released (none recorded: no call of ours in flight) or live and
 * owned; never a lease that ran out while its holder still held it (its call still running).
 */
function expectNoLapsedLease(samples: LeaseSample[]): void {
  for (const sample of samples) {
    if (sample.leaseUntil === 0) continue;
    expect(sample.leaseOwner, JSON.stringify(sample)).toBeTruthy();
    expect(sample.leaseUntil, `lease ran out while held: ${JSON.stringify(sample)}`).toBeGreaterThan(sample.now);
  }
}

/** The lease recorded at the last sample before `at` (Redis/simulator clock of this machine, ms). */
function leaseAt(samples: LeaseSample[], at: number): number {
  const before = samples.filter((sample) => sample.now <= at);
  expect(before.length, 'no sample before the accepted send').toBeGreaterThan(0);
  return before.at(-1)!.leaseUntil;
}

describe('2: the send lease covers the whole call (scaled: CUSTODY_TIMEOUT 1.5 s)', () => {
  let h: Harness;
  beforeAll(async () => {
    // Scaled from the reproduction (CUSTODY_TIMEOUT 12 s, token and send answering after 11.5 s each).
    h = await startHarness({ name: 'guarantee-2', env: { CUSTODY_TIMEOUT: '1500ms', SUBMIT_ATTEMPTS: '3' } });
  });
  afterAll(async () => {
    await h.close();
  });

  it('2: slow token and send answers with an expired token (401, new token, second send): the lease is held by the sender and live at every moment until the outcome is written, the accepted send lands inside it, and sends counts both HTTP sends', async () => {
    // The worker first gets a token it keeps; upstream then expires every token.
    const warm = samplePayload();
    await h.producer.submit(warm);
    expect((await h.producer.waitForTerminal(sequenceIdOf(warm), 15_000)).event).toBe('transfer.broadcast');
    h.sim.updateSettings({ latencyMs: { token: 1_200, sendTransaction: 1_200 } });
    h.sim.expireTokens();
    const sendsBefore = { ...h.sim.stats().requests.sendTransaction };

    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    let samples: LeaseSample[];
    try {
      samples = await sampleLease(h, sequenceId, () => h.producer.submit(payload).then(() => undefined), 20_000);
    } finally {
      h.sim.updateSettings({ latencyMs: { token: 0, sendTransaction: 0 } });
    }

    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
    expect(outcome.event, describeEvents(await h.eventsOf(sequenceId))).toBe('transfer.submitted');
    expect(dataOf(outcome, 'transfer.submitted').transfer).not.toBeNull(); // the second send's own answer

    // The call took three answers of ~1.2 s each, all under one lease: observed live throughout.
    expect(samples.filter((sample) => sample.leaseUntil > sample.now).length).toBeGreaterThan(10);
    expect(
      samples.every((sample) => sample.leaseUntil > 0),
      'the lease was released before the outcome',
    ).toBe(true);
    expectNoLapsedLease(samples);
    const acceptedAt = Date.parse(h.sim.transfer(sequenceId)!.acceptedAt);
    expect(acceptedAt).toBeLessThan(leaseAt(samples, acceptedAt));

    // Two HTTP sends (the 401 and the accepted one), both counted.
    const sendsAfter = h.sim.stats().requests.sendTransaction;
    expect((sendsAfter['401'] ?? 0) - (sendsBefore['401'] ?? 0)).toBe(1);
    expect((sendsAfter['200'] ?? 0) - (sendsBefore['200'] ?? 0)).toBe(1);
    expect((await h.app!.ledger.get(sequenceId))!.sends).toBe(2);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});

describe('2: the send lease covers the whole call (CUSTODY_TIMEOUT 4 s: a call longer than the old lease)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: 'guarantee-2-long', env: { CUSTODY_TIMEOUT: '4s', SUBMIT_ATTEMPTS: '3' } });
  });
  afterAll(async () => {
    await h.close();
  });

  /*
   * Token, send (401), token, send, each answering after 3.7 s: 14.8 s in all, more than CUSTODY_TIMEOUT
   * plus the old fixed margins (4 + 10 s), so this is the reproduction itself at a third of its scale.
   * The send deadline (5 + 2 × 4 = 13 s) cuts the call before its last answer; the lease (23 s) outlasts
   * the deadline. The second send was processed upstream, so a lookup then settles it.
   */
  it('2: a call of token, 401, token and send each near CUSTODY_TIMEOUT never runs past its lease; the accepted send lands inside it; sends counts both', async () => {
    h.sim.updateSettings({ latencyMs: { token: 3_700, sendTransaction: 3_700 } });
    h.sim.setFault('sendTransaction', { sequence: ['401'] });
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    let samples: LeaseSample[];
    try {
      samples = await sampleLease(h, sequenceId, () => h.producer.submit(payload).then(() => undefined), 40_000);
    } finally {
      h.sim.updateSettings({ latencyMs: { token: 0, sendTransaction: 0 } });
      h.sim.setFault('sendTransaction', null);
    }

    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, SETTLED);
    expect(outcome.event, describeEvents(await h.eventsOf(sequenceId))).toBe('transfer.submitted');
    expect(samples.filter((sample) => sample.leaseUntil > sample.now).length).toBeGreaterThan(10);
    expectNoLapsedLease(samples);
    const acceptedAt = Date.parse(h.sim.transfer(sequenceId)!.acceptedAt);
    expect(acceptedAt).toBeLessThan(leaseAt(samples, acceptedAt));
    expect(h.sim.stats().requests.sendTransaction['401']).toBe(1);
    expect((await h.app!.ledger.get(sequenceId))!.sends).toBe(2);
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------
// 3 and 4: runners driven directly (a process pause; a skewed process clock).

/** A custody client whose first sendTransaction answer (or error) is held until `release()`. */
function holdFirstSend(client: CustodyClient) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let calls = 0;
  let answered = false;
  const custody: SubmitDeps['custody'] = {
    findTransfer: (...args) => client.findTransfer(...args),
    async sendTransaction(...args) {
      calls += 1;
      if (calls > 1) return client.sendTransaction(...args);
      try {
        const accepted = await client.sendTransaction(...args);
        answered = true;
        await released;
        return accepted;
      } catch (error) {
        answered = true;
        await released;
        throw error;
      }
    },
  };
  return { custody, release, answered: () => answered, calls: () => calls };
}

describe('3, 4: stale and skewed runners (real handler and ledger on Redis, real client against the simulator)', () => {
  let sim: Simulator;
  let redis: Redis;
  let keys: Keys;
  let ledger: Ledger;
  const clients: CustodyClient[] = [];

  beforeAll(async () => {
    sim = await startSimulator({ port: 0 });
    redis = newRedis();
  });
  afterEach(async () => {
    sim.reset();
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });
  afterAll(async () => {
    await sim.close();
    await closeAllRedis();
  });

  function freshLedger(): void {
    const prefix = uniquePrefix('guarantee-runners');
    keys = createKeys(prefix, `${prefix}:transfer-events`);
    ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 3_600_000 });
  }

  /** A separate client per runner, as separate processes have. */
  function newClient(): CustodyClient {
    // As the worker builds its adapter (src/app.ts): whether lookups are narrowed is probed and kept in Redis.
    const narrowing = new LookupNarrowing(redis, (wallet) => `${uniquePrefix('narrowing')}:${wallet.walletId}:${wallet.coin}`);
    const client = simulatorClient(sim, { narrowing });
    clients.push(client);
    return client;
  }

  function runner(custody: SubmitDeps['custody'], client: CustodyClient, over: Partial<SubmitDeps> = {}) {
    return createSubmitHandler({
      ledger,
      travelRule: {
        async setting() {
          const setting = await client.getTravelRuleSetting();
          return {
            outgoingTxn: setting.outgoingTxn,
            mandatory: setting.mandatory,
            blockTxn: setting.blockTxn,
            fetchedAt: new Date().toISOString(),
          };
        },
      },
      custody,
      trackers: { ensure: async () => 'added' as const },
      attempts: 3,
      retry: { name: 'test-retry', baseMs: 20, maxMs: 200 },
      sendDeadlineMs: 5_000,
      sendLeaseMs: 10_000,
      unresolvedAfterMs: 600_000,
      deadlineMs: 3_600_000,
      ...over,
    });
  }

  function jobContext(jobId: string, payload: SamplePayload): JobContext {
    return {
      job: { id: jobId, name: QueueName.SUBMIT, data: payload, attemptsStarted: 1 },
      token: undefined,
      log,
    } as unknown as JobContext;
  }

  async function eventsOf(sequenceId: string): Promise<TransferEvent[]> {
    const entries = await redis.xrange(keys.events, '-', '+');
    return entries.map((entry) => parseStreamEntry(entry as [string, string[]])).filter((event) => event.sequenceId === sequenceId);
  }

  /** Waits until the lease on the record has ended by Redis's clock (what any other runner judges it by). */
  async function leaseRunsOut(sequenceId: string): Promise<void> {
    await until("the held runner's lease to run out", 10_000, async () => {
      const [record, now] = await Promise.all([redis.hget(keys.transfer(sequenceId), 'leaseUntil'), redisNow(redis)]);
      return Number(record ?? 0) > 0 && Number(record) < now ? true : undefined;
    });
  }

  it("3: a runner whose send outlived its lease (answer: gateway 504) publishes nothing after another runner's transfer.submitted and transfer.broadcast", async () => {
    freshLedger();
    sim.setFault('sendTransaction', { sequence: ['accept-504'] }); // processed upstream, answer lost behind a gateway
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    const jobId = `job-${sequenceId}`;

    const clientA = newClient();
    const held = holdFirstSend(clientA);
    // Runner A: attempts 1, so a refusal it still believed in would end the transfer at once.
    const runA = runner(held.custody, clientA, { attempts: 1, sendDeadlineMs: 1_000, sendLeaseMs: 1_200 })(jobContext(jobId, payload)).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    await until("runner A's send to be answered", 5_000, async () => (held.answered() ? true : undefined));
    await leaseRunsOut(sequenceId);

    // Runner B: a stalled copy of the same job, on another worker.
    const clientB = newClient();
    expect(await runner(clientB, clientB, { attempts: 1 })(jobContext(jobId, payload))).toMatchObject({ outcome: 'submitted' });
    const track = createTrackHandler({
      ledger,
      custody: clientB,
      pollMinMs: 20,
      pollMaxMs: 100,
      deadlineMs: 3_600_000,
      pacedByBudget: false,
    });
    await until(
      'the broadcast',
      10_000,
      async () => {
        try {
          const result = await track({ job: { id: 't', data: { sequenceId } }, token: undefined, log } as unknown as JobContext);
          return result.outcome === 'broadcast' ? true : undefined;
        } catch (error) {
          if (error instanceof RetryLater) return undefined;
          throw error;
        }
      },
      50,
    );
    expect((await eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);

    held.release();
    const a = await runA;
    const events = await eventsOf(sequenceId);
    expect(
      events.map((e) => e.event),
      describeEvents(events),
    ).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expectContractHolds(events);
    expect(a).toEqual({ result: { outcome: 'broadcast', sequenceId } });
    expect((await ledger.get(sequenceId))!.state).toBe(TransferState.BROADCAST);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it("3: a runner whose refused send outlived its lease cannot fail the transfer while the new lease holder's resend is in flight", async () => {
    freshLedger();
    sim.setFault('sendTransaction', { sequence: ['400'] }); // A's send refused; B's resend accepted
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    const jobId = `job-${sequenceId}`;

    const clientA = newClient();
    const heldA = holdFirstSend(clientA);
    const runA = runner(heldA.custody, clientA, { sendDeadlineMs: 1_000, sendLeaseMs: 1_200 })(jobContext(jobId, payload)).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    await until("runner A's send to be answered", 5_000, async () => (heldA.answered() ? true : undefined));
    await leaseRunsOut(sequenceId);

    const clientB = newClient();
    const heldB = holdFirstSend(clientB);
    const runB = runner(
      heldB.custody,
      clientB,
    )(jobContext(jobId, payload)).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    await until("runner B's resend to be answered", 5_000, async () => (heldB.answered() ? true : undefined));
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });

    // A's 400 arrives now: it proves nothing about B's send, and A no longer holds the lease.
    heldA.release();
    const a = await runA;
    expect(describeEvents(await eventsOf(sequenceId))).toBe('');
    expect('error' in a ? a.error : a.result).toMatchObject({ reason: 'send lease held' });

    heldB.release();
    expect(await runB).toEqual({ result: { outcome: 'submitted', sequenceId } });
    const events = await eventsOf(sequenceId);
    expect(
      events.map((e) => e.event),
      describeEvents(events),
    ).toEqual(['transfer.submitted']);
    expectContractHolds(events);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });

  /** Runs `task` with this process's Date 30 s ahead (timers and Redis untouched). */
  async function asProcess30sAhead<T>(task: () => Promise<T>): Promise<T> {
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true, now: Date.now() + 30_000 });
    try {
      return await task();
    } finally {
      vi.useRealTimers();
    }
  }

  it('4: a runner whose clock is 30 s ahead waits for another\'s live lease (RetryLater "send lease held") and sends nothing', async () => {
    freshLedger();
    sim.updateSettings({ visibleAfterMs: 60_000 }); // a lookup would not show A's send yet
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    const jobId = `job-${sequenceId}`;

    const clientA = newClient();
    const held = holdFirstSend(clientA);
    const runA = runner(
      held.custody,
      clientA,
    )(jobContext(jobId, payload)).then(
      (result) => ({ result }),
      (error: unknown) => ({ error }),
    );
    await until("runner A's send to be answered", 5_000, async () => (held.answered() ? true : undefined));
    const sendRequests = () => Object.values(sim.stats().requests.sendTransaction).reduce((sum, n) => sum + n, 0);
    expect(sendRequests()).toBe(1);

    // Runner B is another process whose clock is 30 s ahead: while it runs, every Date in this process
    // (its handler's clock, its ledger, its client) is 30 s fast. Redis's clock is not.
    const clientB = newClient();
    const ledgerB = await asProcess30sAhead(async () => {
      expect(Date.now() - (await redisNow(redis))).toBeGreaterThan(29_000);
      return new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 3_600_000 });
    });
    const skewed = runner(clientB, clientB, { ledger: ledgerB, now: () => Date.now() });
    const b = await asProcess30sAhead(() =>
      skewed(jobContext(jobId, payload)).then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      ),
    );
    expect('error' in b ? b.error : b.result).toBeInstanceOf(RetryLater);
    expect('error' in b ? b.error : b.result).toMatchObject({ reason: 'send lease held' });
    expect(sendRequests()).toBe(1);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect((await ledger.get(sequenceId))!.sends).toBe(1);

    held.release();
    expect(await runA).toEqual({ result: { outcome: 'submitted', sequenceId } });
    // B comes back (its RetryLater) and finds the transfer done.
    expect(await asProcess30sAhead(() => skewed(jobContext(jobId, payload)))).toEqual({ outcome: 'submitted', sequenceId });
    expect(sendRequests()).toBe(1);
    const events = await eventsOf(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.submitted']);
    expectContractHolds(events);
  });
});

// ---------------------------------------------------------------------------------------------------
// 5a. An error raised before any byte was written.

describe('5a: a request refused before any byte was written', () => {
  let h: Harness;
  beforeAll(async () => {
    // A bearer token holding CR/LF: undici refuses the header (UND_ERR_INVALID_ARG) before writing anything.
    h = await startHarness({
      name: 'guarantee-5a',
      env: { CUSTODY_TOKEN_URL: '', CUSTODY_ACCESS_TOKEN: 'static-token\r\nx-injected: 1', SUBMIT_ATTEMPTS: '3' },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  it('5a: is not "may have gone out": the transfer ends transfer.failed CUSTODY_INVALID_REQUEST, with nothing sent', async () => {
    const payload = samplePayload();
    const sequenceId = sequenceIdOf(payload);
    await h.producer.submit(payload);
    const outcome = await h.producer.waitForTerminal(sequenceId, 8_000, SETTLED);
    expect(outcome.event).toBe('transfer.failed');
    expect(outcome.data).toMatchObject({ code: 'CUSTODY_INVALID_REQUEST', httpStatus: null, attempts: 0 });
    expect(h.sim.stats().requests.sendTransaction).toEqual({});
    expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
    const events = await h.eventsOf(sequenceId);
    expect(events.map((e) => e.event)).toEqual(['transfer.failed']);
    expectContractHolds(events);
  });
});

// ---------------------------------------------------------------------------------------------------
// 5e. Reconciliation walks its index by score.

describe('5e: the active index is walked by score while the walk itself moves entries', () => {
  let redis: Redis;
  let sim: Simulator;
  beforeAll(async () => {
    redis = newRedis();
    sim = await startSimulator({ port: 0 });
  });
  afterAll(async () => {
    await sim.close();
    await closeAllRedis();
  });

  it('5e: staleActive with a page of 3 yields each of 25 due entries exactly once while each yielded entry moves to a later score or leaves the index', async () => {
    const prefix = uniquePrefix('guarantee-5e');
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    let clock = 1_000;
    const ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 3_600_000, clock: () => clock });
    const due: string[] = [];
    for (let i = 0; i < 25; i++) {
      clock = 1_000 + Math.floor(i / 4); // runs of 4 equal scores, across page boundaries
      const sequenceId = `due-${String(i).padStart(2, '0')}`;
      due.push(sequenceId);
      await ledger.transition(sequenceId, { from: ['-'], to: TransferState.RECEIVED, set: { jobId: sequenceId } });
    }
    clock = 9_000;
    for (let i = 0; i < 5; i++) await ledger.transition(`later-${i}`, { from: ['-'], to: TransferState.RECEIVED, set: { jobId: 'x' } });

    clock = 5_000; // after the cutoff: every transition of the walk moves its entry out of range
    const seen: string[] = [];
    for await (const sequenceId of ledger.staleActive(2_000, 3)) {
      seen.push(sequenceId);
      if (seen.length % 3 === 0) {
        await ledger.transition(sequenceId, {
          from: [TransferState.RECEIVED],
          to: TransferState.BLOCKED,
          event: {
            type: 'transfer.blocked',
            data: { code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: 1, mandatory: true, blockTxn: false } },
          },
        });
      } else {
        await ledger.transition(sequenceId, { from: [TransferState.RECEIVED], to: TransferState.RECEIVED, set: { touched: 1 } });
      }
    }
    expect(seen.length).toBe(new Set(seen).size);
    expect([...seen].sort()).toEqual(due);
  });

  it('5e: one reconciliation run recreates every one of 600 lost submissions (more than a page), although each repair moves its entry', async () => {
    const prefix = uniquePrefix('guarantee-5e-run');
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const ledger = new Ledger(redis, keys, { eventsMaxLen: 10_000, retentionMs: 3_600_000 });
    const submit = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
    const track = new Queue(QueueName.TRACK, { connection: redis, prefix });
    const client = simulatorClient(sim);
    try {
      // Gated transfers whose jobs are gone (no worker runs here, so the recreated jobs just wait).
      const lost: string[] = [];
      for (let batch = 0; batch < 6; batch++) {
        await Promise.all(
          Array.from({ length: 100 }, async () => {
            const payload = samplePayload();
            const sequenceId = sequenceIdOf(payload);
            lost.push(sequenceId);
            await ledger.transition(sequenceId, {
              from: ['-'],
              to: TransferState.RECEIVED,
              set: {
                jobId: 'job-that-died',
                walletId: '310',
                coin: 'eth',
                metadata: '',
                createdAt: Date.now(),
                payload: JSON.stringify(payload),
              },
            });
            await ledger.transition(sequenceId, {
              from: [TransferState.RECEIVED],
              to: TransferState.GATED,
              set: { gateOutcome: 'passed' },
            });
          }),
        );
      }

      const reconcile = createReconcileHandler({
        ledger,
        submitQueue: submit,
        trackers: new Trackers(track, ledger, 50),
        custody: client,
        graceMs: 0,
        retentionMs: 3_600_000,
      });
      const result = (await reconcile({
        job: { id: 'manual', data: {} },
        token: undefined,
        log,
      } as unknown as JobContext)) as ReconcileResult;
      expect(result).toMatchObject({ skipped: false, checked: 600, resubmitted: 600 });
      const records = await Promise.all(lost.map((sequenceId) => ledger.get(sequenceId)));
      expect(records.filter((record) => !record!.jobId.startsWith('resume-')).map((record) => record!.sequenceId)).toEqual([]);
      expect(await submit.getJobCountByTypes('waiting')).toBe(600);
    } finally {
      await client.close();
      await submit.close();
      await track.close();
    }
  });
});

describe('chaos finding: an unknown send past TRACK_DEADLINE is looked up once more before it expires', () => {
  it('ends transfer.submitted, not transfer.expired, when the last lookup finds it', async () => {
    const redis = newRedis();
    const prefix = uniquePrefix('deadline-lookup');
    let clock = 1_700_000_000_000;
    const ledger = new Ledger(redis, createKeys(prefix, `${prefix}:events`), {
      eventsMaxLen: 1_000,
      retentionMs: 60_000,
      clock: () => clock,
    });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    // A runner sent and died: its lease ran out long ago, well past the deadline.
    await recordUnknownSend(ledger, payload);
    clock += 10 * 60_000;
    const handler = createSubmitHandler({
      ledger,
      travelRule: { setting: async () => ({ outgoingTxn: 0, mandatory: false, blockTxn: false, fetchedAt: '' }) },
      custody: {
        sendTransaction: async () => {
          throw new Error('no send expected');
        },
        findTransfer: async (_wallet, known) =>
          findInAnswer([{ id: '70000001', sequenceId, type: 'send', txid: '', outputs: [] }], known, { narrows: async () => true }),
      },
      trackers: { ensure: async () => 'added' as const },
      attempts: 3,
      retry: { name: 'test', baseMs: 10, maxMs: 10 },
      sendDeadlineMs: 5_000,
      sendLeaseMs: 10_000,
      unresolvedAfterMs: 60_000,
      deadlineMs: 5 * 60_000, // passed: the send became unknown 10 minutes ago
    });
    const result = await handler({
      job: { id: 'job-1', name: QueueName.SUBMIT, data: payload, attemptsStarted: 2 },
      token: undefined,
      log,
    } as unknown as JobContext);
    expect(result).toMatchObject({ outcome: 'submitted' });
    const entries = await redis.xrange(`${prefix}:events`, '-', '+');
    expect(entries.map((entry) => parseStreamEntry(entry as [string, string[]]).event)).toEqual(['transfer.submitted']);
  });
});
