import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { newSequenceId, samplePayload } from '../../tools/sample-payloads.ts';
import { describeProfiles, simFor } from '../helpers/profiles.ts';

describeProfiles('submit-rules', (profile) => {
  describe('invalid payloads', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({ name: `submit-invalid-${profile}`, sim: simFor(profile) });
    });
    afterAll(async () => {
      await h.close();
    });

    const big = (n: number, ch = 'a') => ch.repeat(n);
    // The mutations write anything anywhere in the payload: that is what they test.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const mutate = (change: (p: Record<string, any>) => void) => () => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const payload = samplePayload() as Record<string, any>;
      change(payload);
      return payload;
    };

    // Each docs/contract.md section 3 rule broken once; `path` is the field the rejection must name.
    const cases: Array<[string, string, () => Record<string, unknown>]> = [
      ['walletId missing', 'walletId', mutate((p) => delete p.walletId)],
      ['walletId zero', 'walletId', mutate((p) => (p.walletId = 0))],
      ['walletId negative', 'walletId', mutate((p) => (p.walletId = -5))],
      ['walletId fraction', 'walletId', mutate((p) => (p.walletId = 1.5))],
      ['walletId letters', 'walletId', mutate((p) => (p.walletId = '31a'))],
      ['coin missing', 'coin', mutate((p) => delete p.coin)],
      ['coin upper case', 'coin', mutate((p) => (p.coin = 'ETH'))],
      ['coin too long', 'coin', mutate((p) => (p.coin = big(33)))],
      ['coin with space', 'coin', mutate((p) => (p.coin = 'e th'))],
      ['txHex missing', 'txHex', mutate((p) => delete p.txHex)],
      ['txHex empty', 'txHex', mutate((p) => (p.txHex = ''))],
      ['txHex not hex', 'txHex', mutate((p) => (p.txHex = '0xzz'))],
      ['txHex over 1 MiB', 'txHex', mutate((p) => (p.txHex = big(1024 * 1024 + 1, 'f')))],
      ['halfSigned missing', 'halfSigned', mutate((p) => delete p.halfSigned)],
      ['halfSigned.txHex not hex', 'halfSigned.txHex', mutate((p) => (p.halfSigned.txHex = 'hello'))],
      ['halfSigned.txBase64 empty', 'halfSigned.txBase64', mutate((p) => (p.halfSigned.txBase64 = ''))],
      ['halfSigned.txBase64 not base64', 'halfSigned.txBase64', mutate((p) => (p.halfSigned.txBase64 = 'not base64!'))],
      ['halfSigned.txBase64 over 1.4 MiB', 'halfSigned.txBase64', mutate((p) => (p.halfSigned.txBase64 = big(1_468_008, 'A')))],
      ['travelRule.reference empty', 'travelRule.reference', mutate((p) => (p.travelRule = { reference: '' }))],
      ['travelRule.reference too long', 'travelRule.reference', mutate((p) => (p.travelRule = { reference: big(257) }))],
      ['travelRule without reference', 'travelRule.reference', mutate((p) => (p.travelRule = {}))],
      ['metadata an array', 'metadata', mutate((p) => (p.metadata = [1, 2]))],
      ['metadata a string', 'metadata', mutate((p) => (p.metadata = 'order-1'))],
      ['metadata over 4 KiB', 'metadata', mutate((p) => (p.metadata = { note: big(4100) }))],
    ];
    const noSequenceCases: Array<[string, string, () => Record<string, unknown>]> = [
      ['sequenceId missing', 'halfSigned.sequenceId', mutate((p) => delete p.halfSigned.sequenceId)],
      ['sequenceId with a space', 'halfSigned.sequenceId', mutate((p) => (p.halfSigned.sequenceId = 'a b'))],
      ['sequenceId too long', 'halfSigned.sequenceId', mutate((p) => (p.halfSigned.sequenceId = big(129)))],
      ['sequenceId with a slash', 'halfSigned.sequenceId', mutate((p) => (p.halfSigned.sequenceId = '../x'))],
    ];

    it('rejects each broken rule with transfer.rejected naming the field, and sends nothing upstream', async () => {
      const queue = h.app!.queues[QueueName.SUBMIT];
      const expected = new Map<string, string>();
      for (const [name, path, build] of cases) {
        const payload = build();
        const sequenceId = (payload.halfSigned as { sequenceId?: string } | undefined)?.sequenceId ?? newSequenceId();
        if (path === 'halfSigned') (payload as Record<string, unknown>).metadata = { case: name };
        expected.set(path === 'halfSigned' ? `case:${name}` : sequenceId, path);
        await queue.add(QueueName.SUBMIT, payload, { jobId: `job-${newSequenceId()}` });
      }
      for (const [name, path, build] of noSequenceCases) {
        const payload = { ...build(), metadata: { case: name } };
        expected.set(`case:${name}`, path);
        await queue.add(QueueName.SUBMIT, payload);
      }

      const transferEvents = (all: Awaited<ReturnType<Harness['events']>>) => all.filter((e) => e.event !== 'reconcile.completed');
      const events = transferEvents(await h.waitForEvents((all) => transferEvents(all).length >= expected.size));
      expect(events).toHaveLength(expected.size);
      for (const event of events) {
        expect(event.event).toBe('transfer.rejected');
        expect(event.version).toBe(1);
        const key = expected.has(event.sequenceId) ? event.sequenceId : `case:${(event.metadata as { case: string }).case}`;
        const path = expected.get(key);
        expect(path, `unexpected event ${JSON.stringify(event)}`).toBeDefined();
        const data = dataOf(event, 'transfer.rejected');
        expect(data.code).toBe('INVALID_PAYLOAD');
        expect(
          data.issues.map((issue) => issue.path),
          key,
        ).toContain(path);
        for (const issue of data.issues) expect(issue.message.length).toBeGreaterThan(0);
        expected.delete(key);
      }
      expect([...expected.keys()]).toEqual([]);
      expect(h.sim.requestCount()).toBe(0);
    });

    it('echoes the fields it can: walletId and coin as given, sequenceId empty when there was none', async () => {
      const queue = h.app!.queues[QueueName.SUBMIT];
      const job = await queue.add(QueueName.SUBMIT, { walletId: 42, coin: 'btc', metadata: { case: 'echo' } });
      const events = await h.waitForEvents((all) => all.some((e) => (e.metadata as { case?: string })?.case === 'echo'));
      const event = events.find((e) => (e.metadata as { case?: string })?.case === 'echo')!;
      expect(event).toMatchObject({ event: 'transfer.rejected', sequenceId: '', walletId: '42', coin: 'btc', version: 1 });
      expect(job.id).toBeDefined();
    });

    it('rejects an invalid transfer once, whatever number of jobs carry it', async () => {
      const payload = samplePayload({ coin: 'ETH' });
      const queue = h.app!.queues[QueueName.SUBMIT];
      await Promise.all(
        Array.from({ length: 5 }, (_, i) => queue.add(QueueName.SUBMIT, payload, { jobId: `again-${i}-${newSequenceId()}` })),
      );
      const sequenceId = payload.halfSigned.sequenceId;
      await h.waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId));
      // Give the other four jobs time to run; they must publish nothing.
      await waitForQueueIdle(h);
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.rejected']);
    });

    it('ignores unknown fields and normalises a walletId given as digits', async () => {
      const payload = { ...samplePayload({ walletId: '310' }), extra: { anything: true } };
      await h.producer.submit(payload);
      const sequenceId = payload.halfSigned.sequenceId;
      const [event] = await h
        .waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId))
        .then((all) => all.filter((e) => e.sequenceId === sequenceId));
      expect(event).toMatchObject({ event: 'transfer.submitted', walletId: '310' });
    });
  });

  describe('travel-rule gate', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({
        name: `travel-rule-${profile}`,
        sim: simFor(profile),
        env: { TRAVEL_RULE_CACHE_TTL: '0', SUBMIT_ATTEMPTS: '3' },
      });
    });
    afterAll(async () => {
      await h.close();
    });

    const matrix: Array<[number, boolean, boolean, boolean]> = [];
    for (const outgoingTxn of [0, 1]) {
      for (const mandatory of [false, true]) {
        for (const withReference of [false, true]) {
          matrix.push([outgoingTxn, mandatory, withReference, outgoingTxn === 1 && mandatory && !withReference]);
        }
      }
    }

    it.each(matrix)('outgoingTxn %i, mandatory %s, reference %s → blocked %s', async (outgoingTxn, mandatory, withReference, blocked) => {
      h.sim.updateSettings({ travelRule: { outgoingTxn, mandatory, blockTxn: true } });
      const payload = samplePayload(withReference ? { travelRule: { reference: 'tr-5521' } } : {});
      const sequenceId = payload.halfSigned.sequenceId;
      await h.producer.submit(payload);
      const outcome = await h.producer.waitForTerminal(sequenceId, 10_000, new Set(['transfer.blocked', 'transfer.submitted']));
      if (blocked) {
        expect(outcome.event).toBe('transfer.blocked');
        expect(outcome.data).toEqual({ code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn, mandatory, blockTxn: true } });
        expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      } else {
        expect(outcome.event).toBe('transfer.submitted');
        expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      }
      const gate = (await h.app!.ledger.get(sequenceId))!.gate!;
      expect(gate).toMatchObject({
        setting: { outgoingTxn, mandatory, blockTxn: true },
        applies: outgoingTxn === 1 && mandatory,
        reference: withReference,
        outcome: blocked ? 'blocked' : 'passed',
      });
      expect(Date.parse(gate.checkedAt)).not.toBeNaN();
    });

    it('sends nothing when the setting cannot be fetched, and fails with the cause when retries run out', async () => {
      h.sim.setFault('isEnabled', { probability: 1, kinds: ['5xx'] });
      try {
        const payload = samplePayload();
        const sequenceId = payload.halfSigned.sequenceId;
        await h.producer.submit(payload);
        const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
        expect(outcome.event).toBe('transfer.failed');
        expect(outcome.data).toMatchObject({ code: 'TRAVEL_RULE_UNAVAILABLE', httpStatus: 503, attempts: 3 });
        expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
      } finally {
        h.sim.setFault('isEnabled', null);
      }
    });
  });

  describe('travel-rule cache', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({ name: `travel-rule-cache-${profile}`, sim: simFor(profile), env: { TRAVEL_RULE_CACHE_TTL: '1m' } });
    });
    afterAll(async () => {
      await h.close();
    });

    it('asks upstream once for many transfers within the time-to-live', async () => {
      h.sim.updateSettings({ latencyMs: { isEnabled: 100 } });
      const payloads = Array.from({ length: 30 }, () => samplePayload());
      await Promise.all(payloads.map((p) => h.producer.submit(p)));
      await h.waitForEvents((all) => all.filter((e) => e.event === 'transfer.submitted').length === 30);
      expect(h.sim.stats().requests.isEnabled).toEqual({ 200: 1 });
    });
  });

  async function waitForQueueIdle(h: Harness): Promise<void> {
    const queue = h.app!.queues[QueueName.SUBMIT];
    for (let i = 0; i < 200; i++) {
      const counts = await queue.getJobCounts('active', 'waiting', 'delayed', 'prioritized');
      if (Object.values(counts).every((n) => n === 0)) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error('queue did not go idle');
  }
});
