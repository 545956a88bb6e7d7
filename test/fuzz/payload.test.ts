/**
 * Property-based tests of the `submit-transaction` payload edge: parseSubmitPayload against an
 * independent oracle of docs/contract.md section 3 (payload-oracle.ts), then a few hundred invalid payloads
 * through the real in-process worker.
 */
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import fc from 'fast-check';
import './fc-seed.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSubmitPayload, type ParsedPayload } from '../../packages/producer/src/payload.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { until } from '../helpers/wait.ts';
import {
  isBitgoWalletId,
  isValidSequenceId,
  jsonCopy,
  mutatedPayloadArb,
  payloadProblems,
  randomPayloadArb,
  validPayloadArb,
} from './payload-oracle.ts';

const SAMPLES = Array.from({ length: 4 }, () => jsonCopy(samplePayload()) as Record<string, unknown>);

/** Runs per property; together they take a few seconds. */
const RUNS = { mutated: 3_000, valid: 500, random: 1_500, worker: 1 } as const;
/** Invalid payloads put through the real worker in its one run. */
const WORKER_PAYLOADS = 200;

function own(value: unknown, key: string): unknown {
  return value && typeof value === 'object' && Object.hasOwn(value, key) ? (value as Record<string, unknown>)[key] : undefined;
}

/**
 * Under which sequenceId the worker records the rejection of an invalid payload: the sequenceId as
 * given when it is text that is a valid sequenceId (a number is not one); otherwise none, and the
 * rejection is recorded per job.
 */
function rejectionIdentity(data: unknown): string | undefined {
  const value = own(own(data, 'halfSigned'), 'sequenceId');
  return typeof value === 'string' && isValidSequenceId(value) ? value : undefined;
}

/** Whether a queue can store it: JSON text exists (a cyclic or BigInt value cannot be enqueued at all). */
function storable(payload: unknown): boolean {
  try {
    return JSON.stringify(payload) !== undefined;
  } catch {
    return false;
  }
}

function prototypeUntouched(): void {
  const probe = {} as Record<string, unknown>;
  expect(probe.polluted).toBeUndefined();
  expect(Object.prototype).not.toHaveProperty('polluted');
  expect(Object.prototype).not.toHaveProperty('reference');
}

/** The whole check of one payload: never throws, accepts exactly what the oracle accepts, says where. */
function checkAgainstOracle(payload: unknown): void {
  let result: ParsedPayload | undefined;
  expect(() => {
    result = parseSubmitPayload(payload);
  }).not.toThrow();
  const problems = payloadProblems(payload);
  if (problems.length === 0) {
    expect(result!.ok ? 'accepted' : result!.issues).toBe('accepted');
    if (!result!.ok) return;
    const parsed = result!.payload;
    // Normalised and faithful: nothing changes on the way in except the walletId's type (BitGo's id stays text).
    const walletId = own(payload, 'walletId');
    if (isBitgoWalletId(walletId)) {
      expect(parsed.walletId).toBe(walletId);
    } else {
      expect(typeof parsed.walletId === 'number' && Number.isSafeInteger(parsed.walletId) && parsed.walletId > 0).toBe(true);
      expect(parsed.walletId).toBe(Number(walletId));
    }
    expect(parsed.coin).toBe(own(payload, 'coin'));
    expect(parsed.txHex).toBe(own(payload, 'txHex'));
    const halfSigned = own(payload, 'halfSigned');
    expect(parsed.halfSigned).toEqual({
      txBase64: own(halfSigned, 'txBase64'),
      txHex: own(halfSigned, 'txHex'),
      sequenceId: own(halfSigned, 'sequenceId'),
    });
    const travelRule = own(payload, 'travelRule');
    expect(parsed.travelRule?.reference).toBe(travelRule == null ? undefined : own(travelRule, 'reference'));
    const metadata = own(payload, 'metadata');
    // Echoed in every event: the same JSON, `__proto__` keys included.
    expect(parsed.metadata === undefined ? undefined : JSON.stringify(parsed.metadata)).toBe(
      metadata == null ? undefined : JSON.stringify(metadata),
    );
  } else {
    expect(result!.ok).toBe(false);
    if (result!.ok) return;
    const issues = result!.issues;
    expect(issues.length).toBeGreaterThan(0);
    for (const issue of issues) {
      expect(typeof issue.path === 'string' && issue.path.length > 0).toBe(true);
      expect(typeof issue.message === 'string' && issue.message.length > 0).toBe(true);
    }
    expect([...new Set(issues.map((issue) => issue.path))].sort()).toEqual([...problems].sort());
  }
  prototypeUntouched();
}

describe('parseSubmitPayload against an independent reading of docs/contract.md section 3', () => {
  it(`accepts every valid payload (${RUNS.valid} runs)`, () => {
    fc.assert(
      fc.property(validPayloadArb, (payload) => {
        expect(payloadProblems(payload)).toEqual([]);
        checkAgainstOracle(payload);
      }),
      { numRuns: RUNS.valid },
    );
  });

  it(`decides mutated payloads exactly as the contract does, naming each broken path (${RUNS.mutated} runs)`, () => {
    fc.assert(fc.property(mutatedPayloadArb(SAMPLES), checkAgainstOracle), { numRuns: RUNS.mutated });
  });

  it(`never throws on random values and rejects them with paths (${RUNS.random} runs)`, () => {
    fc.assert(fc.property(randomPayloadArb, checkAgainstOracle), { numRuns: RUNS.random });
  });

  it('rejects metadata that has no JSON text (BigInt, a cycle) instead of throwing', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    for (const metadata of [{ big: 10n }, cyclic, { nested: [1, { n: 2n }] }]) {
      const result = parseSubmitPayload({ ...samplePayload(), metadata });
      expect(result).toEqual({ ok: false, issues: [{ path: 'metadata', message: expect.any(String) }] });
    }
  });

  it('keeps a `__proto__` key of metadata as data and pollutes no prototype', () => {
    const payload = { ...samplePayload(), metadata: JSON.parse('{"__proto__": {"polluted": "yes"}, "orderId": "A-1"}') };
    const result = parseSubmitPayload(payload);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(JSON.stringify(result.payload.metadata)).toBe('{"__proto__":{"polluted":"yes"},"orderId":"A-1"}');
    expect(Object.getPrototypeOf(result.payload.metadata)).toBe(Object.prototype);
    expect((result.payload.metadata as Record<string, unknown>).polluted).toBeUndefined();
    prototypeUntouched();
  });
});

describe('invalid payloads through the real worker', () => {
  let h: Harness;
  let queue: Queue;
  beforeAll(async () => {
    h = await startHarness({ name: 'fuzz-payload', env: { SUBMIT_CONCURRENCY: '32' } });
    queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
  });
  afterAll(async () => {
    await queue?.close();
    await h?.close();
  });

  /** Invalid as the queue stores them (through JSON), each valid-looking sequenceId made unique. */
  const invalidAsStored = fc
    .oneof({ weight: 4, arbitrary: mutatedPayloadArb(SAMPLES) }, { weight: 1, arbitrary: randomPayloadArb })
    .filter(storable)
    .map((payload) => jsonCopy(payload))
    .filter((payload) => payloadProblems(payload).length > 0);

  it(`rejects each of ${WORKER_PAYLOADS} invalid jobs exactly once, sends nothing, and still processes a valid job after`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(invalidAsStored, { minLength: WORKER_PAYLOADS, maxLength: WORKER_PAYLOADS }), async (payloads) => {
        const run = randomBytes(4).toString('hex');
        const jobs = payloads.map((data, i) => {
          const halfSigned = own(data, 'halfSigned') as Record<string, unknown>;
          // Two payloads with the same identity are one transfer: the second would publish nothing. Make it unique.
          if (rejectionIdentity(data) !== undefined) halfSigned.sequenceId = `fz-${run}-${i}`;
          expect(payloadProblems(data).length).toBeGreaterThan(0);
          return { name: QueueName.SUBMIT, data, opts: { jobId: `fz-${run}-job-${i}` } };
        });
        await queue.addBulk(jobs);

        await until(
          'every invalid job to complete',
          30_000,
          async () => {
            const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
            return Object.values(counts).every((n) => n === 0) ? true : undefined;
          },
          50,
        );

        const keys = createKeys(h.prefix, h.config.queue.eventsStream);
        const events = await h.events();
        const transferEvents = events.filter((e) => e.event !== 'reconcile.completed');
        expect(transferEvents.every((e) => e.event === 'transfer.rejected')).toBe(true);
        expect(transferEvents).toHaveLength(WORKER_PAYLOADS);
        for (const [i, job] of jobs.entries()) {
          const stored = await queue.getJob(job.opts.jobId);
          expect(await stored!.getState()).toBe('completed');
          expect(stored!.returnvalue).toMatchObject({ outcome: 'rejected' });
          const sequenceId = rejectionIdentity(job.data);
          if (sequenceId !== undefined) {
            expect(sequenceId).toBe(`fz-${run}-${i}`);
            const own = await h.eventsOf(sequenceId);
            expect(own.map((e) => [e.event, e.version])).toEqual([['transfer.rejected', 1]]);
            expect((own[0]!.data as { code: string }).code).toBe('INVALID_PAYLOAD');
            expect((own[0]!.data as { issues: unknown[] }).issues.length).toBeGreaterThan(0);
          } else {
            // No usable sequenceId: exactly one rejection recorded for the job itself.
            const record = await h.redis.hgetall(keys.jobRejection(job.opts.jobId));
            expect({ state: record.state, version: record.version, events: record.events?.split(',').length }).toEqual({
              state: 'rejected',
              version: '1',
              events: 1,
            });
          }
        }
        const requests = h.sim.stats().requests;
        const total = Object.values(requests).reduce((sum, byStatus) => sum + Object.values(byStatus).reduce((a, b) => a + b, 0), 0);
        expect({ requests: total, sends: Object.keys(h.sim.stats().sends).length }).toEqual({ requests: 0, sends: 0 });

        // The worker is alive and well: a valid job goes all the way.
        expect(h.app!.running()).toBe(true);
        const valid = samplePayload();
        await h.producer.submit(valid);
        const outcome = await h.producer.waitForTerminal(valid.halfSigned.sequenceId, 15_000);
        expect(outcome.event).toBe('transfer.broadcast');
      }),
      { numRuns: RUNS.worker, endOnFailure: true },
    );
  }, 90_000);
});
