import { createKeys } from '../../src/ledger/keys.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { until } from '../helpers/wait.ts';
import { describeProfiles, expectAddress, simFor } from '../helpers/profiles.ts';

describeProfiles('track', (profile) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ name: `track-${profile}`, sim: simFor(profile), env: { TRACK_POLL_MIN: '40ms', TRACK_POLL_MAX: '120ms' } });
  });
  afterAll(async () => {
    await h.close();
  });

  async function submit(overrides = {}) {
    const payload = samplePayload(overrides);
    await h.producer.submit(payload);
    return payload.halfSigned.sequenceId;
  }

  describe('tracking a submitted transfer', () => {
    it('publishes one transfer.broadcast with the wallet transaction once the txid shows up after several polls', async () => {
      // The txid shows only once the worker has polled three times: counted, not timed.
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 3_600_000 });
      const polls = () => h.sim.stats().requests.getTransfer?.['200'] ?? 0;
      const pollsBefore = polls();
      const sequenceId = await submit();
      await until('three polls without a txid', 10_000, async () => (polls() - pollsBefore >= 3 ? true : undefined));
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted']);
      h.sim.setTxid(sequenceId);
      const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect(outcome.version).toBe(2);
      const data = dataOf(outcome, 'transfer.broadcast');
      expect(data.txid).toMatch(/^0x[0-9a-f]{64}$/);
      expect(data.transaction.txid).toBe(data.txid);
      expect(data.transaction.type).toBe('send');
      expect(data.walletTransaction?.txid).toBe(data.txid);
      expect((await h.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
      expect((await h.app!.ledger.get(sequenceId))!.txid).toBe(data.txid);
    });

    it('broadcasts with walletTransaction null when the wallet transaction lookup answers 404', async () => {
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 0 });
      h.sim.setFault('getWalletTransaction', { sequence: ['404'] });
      const sequenceId = await submit();
      const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect(dataOf(outcome, 'transfer.broadcast').walletTransaction).toBeNull();
    });

    it('finds its transfer in answers not narrowed to it, with the address in another letter case', async () => {
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 200, narrowResults: false, mixedCaseAddresses: true });
      try {
        // Other transfers of the same wallet come along in every answer.
        const others = await Promise.all([submit(), submit(), submit()]);
        const sequenceId = await submit();
        const outcome = await h.producer.waitForTerminal(sequenceId, 10_000);
        expect(outcome.event).toBe('transfer.broadcast');
        const submitted = dataOf((await h.eventsOf(sequenceId))[0], 'transfer.submitted').transfer!;
        const tx = dataOf(outcome, 'transfer.broadcast').transaction;
        const destination = tx.outputs.find((o) => !o.isMine)!.address;
        expect(destination.toLowerCase()).toBe(submitted.destinationAddress!.toLowerCase());
        // Under `spec` mixedCaseAddresses guarantees another spelling; under `realistic` each record's
        // spelling is a draw of its own (src/simulator/realistic.ts respell), which may meet the send's.
        if (profile === 'spec') expect(destination).not.toBe(submitted.destinationAddress);
        const txids = await Promise.all(
          others.map(async (s) => dataOf(await h.producer.waitForTerminal(s, 10_000), 'transfer.broadcast').txid),
        );
        expect(new Set([...txids, dataOf(outcome, 'transfer.broadcast').txid]).size).toBe(4);
      } finally {
        h.sim.updateSettings({ narrowResults: true, mixedCaseAddresses: false, txidAfterMs: 0 });
      }
    });

    it('keeps polling without an event when two transactions match equally', async () => {
      // Two submissions with the same transaction (same destination and amount), different sequenceIds.
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 0, narrowResults: false });
      try {
        const first = samplePayload();
        const twin = samplePayload();
        twin.txHex = first.txHex;
        twin.halfSigned = { ...first.halfSigned, sequenceId: twin.halfSigned.sequenceId };
        await h.producer.submit(first);
        await h.producer.submit(twin);
        const seqs = [first.halfSigned.sequenceId, twin.halfSigned.sequenceId];
        await h.waitForEvents((all) => seqs.every((s) => all.some((e) => e.sequenceId === s && e.event === 'transfer.submitted')));
        // Several more polls answered, counted rather than timed.
        const polls = () => h.sim.stats().requests.getTransfer?.['200'] ?? 0;
        const pollsBefore = polls();
        await until('three more polls', 20_000, async () => (polls() > pollsBefore + 2 ? true : undefined));
        // The first sees both records, each dated after its send: no guess, no event, still tracking.
        expect((await h.eventsOf(seqs[0]!)).map((e) => e.event)).toEqual(['transfer.submitted']);
        // Still tracking: the job waits for its next poll, or is in the middle of one.
        expect(['delayed', 'active', 'waiting']).toContain(
          await (await h.app!.queues[QueueName.TRACK].getJob(trackJobId(seqs[0]!)))!.getState(),
        );
        // The twin too, unless its send came RECORD_DATE_SLACK_MS or more after the first was accepted (a
        // slow machine): the first is then an earlier twin, dated before the twin's send, never its
        // candidate, and the twin's own record is found. Never with the first's txid.
        const twinEvents = await h.eventsOf(seqs[1]!);
        const broadcast = twinEvents.find((e) => e.event === 'transfer.broadcast');
        if (broadcast) expect((broadcast.data as { txid: string }).txid).toBe(h.sim.transfer(seqs[1]!)!.txid);
        else expect(twinEvents.map((e) => e.event)).toEqual(['transfer.submitted']);
      } finally {
        h.sim.updateSettings({ narrowResults: true });
      }
    });

    it('keeps the record of a tracked transfer in the compact hash encoding once the payload is dropped', async () => {
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 60_000 });
      const sequenceId = await submit({ travelRule: { reference: 'tr-5521' } });
      await h.waitForEvents((all) => all.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.submitted'));
      const key = createKeys(h.prefix, h.config.queue.eventsStream).transfer(sequenceId);
      // Written while the payload (far above 64 bytes) was in it, so it started as a hashtable.
      expect(await h.redis.object('ENCODING', key)).toBe('listpack');
      const record = (await h.app!.ledger.get(sequenceId))!;
      expect(record).toMatchObject({ state: 'submitted', payload: undefined, gate: { outcome: 'passed', reference: true } });
      expectAddress(
        profile,
        record.match.destinationAddress,
        h.sim.transfer(sequenceId)!.record.destinationAddress,
        'match.destinationAddress',
      );
      expect(await h.redis.pttl(key)).toBe(-1);
      // Let it finish, so later tests do not see it tracking.
      h.sim.setTxid(sequenceId);
      expect((await h.producer.waitForTerminal(sequenceId, 10_000)).event).toBe('transfer.broadcast');
      h.sim.updateSettings({ txidAfterMs: 0 });
    });

    it('keeps tracking through upstream 5xx and time-outs while polling', async () => {
      h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 400 });
      h.sim.setFault('getTransfer', { sequence: ['5xx', 'timeout', 'reset', 'malformed', '5xx'] });
      const sequenceId = await submit();
      const outcome = await h.producer.waitForTerminal(sequenceId, 15_000);
      expect(outcome.event).toBe('transfer.broadcast');
      h.sim.setFault('getTransfer', null);
    });
  });

  describe('tracking deadline', () => {
    let d: Harness;
    beforeAll(async () => {
      d = await startHarness({
        name: `track-deadline-${profile}`,
        sim: simFor(profile),
        env: { TRACK_DEADLINE: '1s', TRACK_POLL_MIN: '50ms', TRACK_POLL_MAX: '200ms' },
      });
    });
    afterAll(async () => {
      await d.close();
    });

    it('publishes transfer.expired when no txid arrives before the deadline', async () => {
      d.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 60_000 });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await d.producer.submit(payload);
      const outcome = await d.producer.waitForTerminal(sequenceId, 10_000);
      expect(outcome.event).toBe('transfer.expired');
      const data = dataOf(outcome, 'transfer.expired');
      expect(data.code).toBe('TRACKING_DEADLINE');
      expect(Date.parse(data.deadline) - Date.parse(data.submittedAt)).toBe(1_000);
      expect((await d.eventsOf(sequenceId)).map((e) => e.event)).toEqual(['transfer.submitted', 'transfer.expired']);
      expect(versionProblems(await d.events())).toEqual([]);
    });
  });
});
