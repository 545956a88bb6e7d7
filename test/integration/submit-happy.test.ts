import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobIdFor } from '../../packages/producer/src/producer.ts';
import { trackJobId } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { describeProfiles, expectAddress, simFor } from '../helpers/profiles.ts';

/** The documented 2.4 keys an event carries: all but `raw` (contract v1.1). */
const SUBMITTED_KEYS = [
  'id',
  'userid',
  'status',
  'walletid',
  'type',
  'asset',
  'chain',
  'timestamp',
  'transactionSequenceId',
  'sequenceId',
  'amount',
  'destinationAddress',
  'usdamount',
];

describeProfiles('submit-happy', (profile) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: `submit-happy-${profile}`, sim: simFor(profile) });
  });
  afterAll(async () => {
    await h.close();
  });

  describe('submitting a transfer', () => {
    it('publishes transfer.submitted with the simulator record without raw (no person, no request echo) and creates the tracking job', async () => {
      const payload = samplePayload({ metadata: { orderId: 'A-1001' } });
      const sequenceId = payload.halfSigned.sequenceId;
      expect(await h.producer.submit(payload)).toBe(jobIdFor(sequenceId));

      await h.waitForEvents((events) => events.some((e) => e.sequenceId === sequenceId));
      const [submitted] = await h.eventsOf(sequenceId);
      expect(submitted).toMatchObject({
        event: 'transfer.submitted',
        sequenceId,
        walletId: '310',
        coin: 'eth',
        version: 1,
        metadata: { orderId: 'A-1001' },
      });
      expect(submitted!.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const record = dataOf(submitted, 'transfer.submitted').transfer!;
      const simRecord = h.sim.transfer(sequenceId)!.record;
      expect(record.id).toBe(simRecord.id);
      expect(record.sequenceId).toBe(sequenceId);
      expectAddress(profile, record.destinationAddress, simRecord.destinationAddress, 'destinationAddress');
      expect(record.amount).toBe(simRecord.amount);
      expect(record).not.toHaveProperty('raw');
      // Only documented 2.4 keys travel (the realistic profile adds createdBy, meta, _links).
      expect(Object.keys(record).filter((key) => !SUBMITTED_KEYS.includes(key))).toEqual([]);
      expect(JSON.stringify(submitted)).not.toMatch(/@example\.com|phoneNumber/);

      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      // The tracker is added right after the event is published, by the same job.
      await h.producer.waitForTerminal(sequenceId, 10_000);
      const track = await h.app!.queues['track-transfer'].getJob(trackJobId(sequenceId));
      expect(track?.data).toEqual({ sequenceId });

      const ledger = await h.app!.ledger.get(sequenceId);
      expect(ledger).toMatchObject({ state: 'broadcast', version: 2, sends: 1, jobId: jobIdFor(sequenceId) });
      expect(ledger!.payload).toBeUndefined();
      expect(ledger!.gate).toMatchObject({ applies: false, outcome: 'passed', setting: { outgoingTxn: 0, mandatory: false } });
    });

    it('refuses an invalid payload in the producer before it reaches the queue', async () => {
      const payload = samplePayload({ walletId: 'abc' });
      await expect(h.producer.submit(payload)).rejects.toMatchObject({ code: 'INVALID_PAYLOAD', issues: [{ path: 'walletId' }] });
      expect(await h.app!.queues['submit-transaction'].getJob(jobIdFor(payload.halfSigned.sequenceId))).toBeUndefined();
    });
  });
});
