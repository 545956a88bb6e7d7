import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '../../src/queues/names.ts';
import type { FaultKind } from '../../src/simulator/index.ts';
import { countBy, startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { newSequenceId, samplePayload } from '../../tools/sample-payloads.ts';
import { describeProfiles, simFor } from '../helpers/profiles.ts';

describeProfiles('submit-faults', (profile) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      name: `submit-faults-${profile}`,
      sim: simFor(profile),
      env: { SUBMIT_ATTEMPTS: '3', CUSTODY_TIMEOUT: '300ms' },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  async function submitAndWait(payload = samplePayload(), terminal = ['transfer.submitted', 'transfer.failed']) {
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, new Set(terminal));
    return { sequenceId, outcome };
  }

  describe('duplicates', () => {
    it('one sequenceId enqueued 20 times under different job ids, at once and after completion, is sent and published once', async () => {
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      const queue = h.app!.queues[QueueName.SUBMIT];
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => queue.add(QueueName.SUBMIT, payload, { jobId: `dup-${i}-${newSequenceId()}` })),
      );
      await h.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.submitted']));
      await waitIdle();
      await Promise.all(
        Array.from({ length: 20 }, (_, i) => queue.add(QueueName.SUBMIT, payload, { jobId: `later-${i}-${newSequenceId()}` })),
      );
      await h.producer.submit(payload);
      await waitIdle();
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      await h.producer.waitForTerminal(sequenceId, 10_000);
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    });
  });

  describe('upstream faults on sendTransaction', () => {
    it.each<[string, FaultKind[]]>([
      ['5xx twice', ['5xx', '5xx']],
      ['connection reset', ['reset']],
      ['malformed body', ['malformed']],
      ['schema-breaking body', ['schema']],
      ['one 401 (token renewed)', ['401']],
    ])('%s → submitted, sent once', async (_name, sequence) => {
      h.sim.setFault('sendTransaction', { sequence });
      const { sequenceId, outcome } = await submitAndWait();
      expect(outcome.event).toBe('transfer.submitted');
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    });

    it('429 → waits for Retry-After, then submitted, without using an attempt', async () => {
      h.sim.updateSettings({ retryAfterSec: 1 });
      h.sim.setFault('sendTransaction', { sequence: ['429', '429', '429'] });
      const started = Date.now();
      const { sequenceId, outcome } = await submitAndWait();
      expect(outcome.event).toBe('transfer.submitted');
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      expect((await h.app!.ledger.get(sequenceId))!.failures).toBe(0);
    });

    it('time-out after processing, visible at once → found by lookup, no second send', async () => {
      h.sim.setFault('sendTransaction', { sequence: ['timeout'] });
      const { sequenceId, outcome } = await submitAndWait();
      expect(outcome.event).toBe('transfer.submitted');
      expect(outcome.data).toMatchObject({ transfer: null, recoveredBy: 'get-transfer', transaction: { type: 'send' } });
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    });

    it('time-out after processing, not yet visible → resend answered 409, taken as accepted earlier', async () => {
      h.sim.updateSettings({ visibleAfterMs: 60_000 });
      h.sim.setFault('sendTransaction', { sequence: ['timeout'] });
      try {
        const { sequenceId, outcome } = await submitAndWait();
        expect(outcome.event).toBe('transfer.submitted');
        expect(outcome.data).toEqual({ transfer: null, recoveredBy: 'duplicate' });
        expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 1 });
      } finally {
        h.sim.updateSettings({ visibleAfterMs: 0 });
      }
    });

    it('401 again after renewing the token → sent again later (an auth hiccup), submitted once', async () => {
      h.sim.setFault('sendTransaction', { sequence: ['401', '401'] });
      const { sequenceId, outcome } = await submitAndWait();
      expect(outcome.event).toBe('transfer.submitted');
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      expect((await h.app!.ledger.get(sequenceId))!.sends).toBe(3);
    });

    it('401 on every send → transfer.failed after SUBMIT_ATTEMPTS sends, nothing accepted', async () => {
      h.sim.setFault('sendTransaction', { probability: 1, kinds: ['401'] });
      try {
        const { sequenceId, outcome } = await submitAndWait();
        expect(outcome.event).toBe('transfer.failed');
        // attempts counts HTTP sends: each call is a send, a renewed token and a second send.
        expect(outcome.data).toMatchObject({ code: 'CUSTODY_UNAUTHORIZED', httpStatus: 401 });
        expect(dataOf(outcome, 'transfer.failed').attempts).toBeGreaterThanOrEqual(3);
        expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      } finally {
        h.sim.setFault('sendTransaction', null);
      }
    });

    it('success:false on HTTP 200 → transfer.failed', async () => {
      h.sim.setFault('sendTransaction', { sequence: ['success-false'] });
      const { outcome } = await submitAndWait();
      expect(outcome.event).toBe('transfer.failed');
      expect(outcome.data).toMatchObject({ code: 'CUSTODY_REJECTED', httpStatus: 200, attempts: 1 });
    });

    it('5xx on every attempt → transfer.failed after SUBMIT_ATTEMPTS with the attempts made', async () => {
      h.sim.setFault('sendTransaction', { probability: 1, kinds: ['5xx'] });
      try {
        const { sequenceId, outcome } = await submitAndWait();
        expect(outcome.event).toBe('transfer.failed');
        expect(outcome.data).toMatchObject({ code: 'CUSTODY_UNAVAILABLE', httpStatus: 503, attempts: 3 });
        expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      } finally {
        h.sim.setFault('sendTransaction', null);
      }
    });

    it('time-outs on every attempt → never failed while the send may have gone out; resends stop at SUBMIT_ATTEMPTS, lookups go on, and the lookup settles it', async () => {
      h.sim.updateSettings({ visibleAfterMs: 60_000 });
      h.sim.setFault('sendTransaction', { probability: 1, kinds: ['timeout'] });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      try {
        await h.producer.submit(payload);
        await waitFor(async () => ((await h.app!.ledger.get(sequenceId))?.failures ?? 0) >= 5);
        expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual([]);
        const record = (await h.app!.ledger.get(sequenceId))!;
        expect(record.state).toBe('submitting');
        expect(record.sends).toBe(3);
        expect(record.unknownSince).toBeGreaterThan(0);
      } finally {
        h.sim.setFault('sendTransaction', null);
        h.sim.updateSettings({ visibleAfterMs: 0 });
      }
      h.sim.setTxid(sequenceId); // upstream shows it at last
      const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted', 'transfer.failed']));
      expect(outcome.event).toBe('transfer.submitted');
      expect(outcome.data).toMatchObject({ transfer: null, recoveredBy: 'get-transfer' });
      expect(h.sim.stats().sends[sequenceId]!.accepted).toBe(1);
    });

    it('every event of every transfer in this file has versions without gaps, and no transfer was accepted twice', async () => {
      const events = await h.events();
      expect(versionProblems(events)).toEqual([]);
      for (const [sequenceId, count] of countBy(events, 'transfer.submitted')) expect(count, sequenceId).toBe(1);
      for (const [sequenceId, sends] of Object.entries(h.sim.stats().sends)) expect(sends.accepted, sequenceId).toBe(1);
    });
  });

  async function waitIdle(): Promise<void> {
    const queue = h.app!.queues[QueueName.SUBMIT];
    await waitFor(async () => Object.values(await queue.getJobCounts('active', 'waiting', 'delayed')).every((n) => n === 0));
  }

  async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not reached in time');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
});
