/**
 * LOOKUP_BEFORE_FIRST_SEND=1, for a provider that does not refuse a reused sequenceId: the residual
 * risk of a ledger that went back in time unnoticed (every worker process restarted onto an older
 * copy) is a second accepted send of a transfer the older copy never saw sent. Two ledgers (two
 * QUEUE_PREFIXes) in front of one simulator stand for the newer copy and the older one: the transfer
 * sent through the first is enqueued again through the second. With the setting, the second looks it up,
 * finds it and sends nothing; a transfer new to both is looked up (absent), then sent once. Without the
 * setting the same enqueue is accepted twice (the control that shows the test can fail).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

describe('LOOKUP_BEFORE_FIRST_SEND', () => {
  let sim: Simulator;
  const harnesses: Harness[] = [];

  beforeAll(async () => {
    sim = await startSimulator({ port: 0, settings: { rejectDuplicates: false, txidAfterMs: 24 * 3_600_000 } });
  });
  afterAll(async () => {
    for (const h of harnesses) await h.close();
    await sim?.close();
  });

  async function harness(name: string, env: Record<string, string> = {}): Promise<Harness> {
    const h = await startHarness({ name, simulator: sim, env });
    harnesses.push(h);
    return h;
  }

  async function submitted(h: Harness, sequenceId: string) {
    await h.producer.waitForTerminal(sequenceId, 20_000, new Set(['transfer.submitted']));
    return (await h.eventsOf(sequenceId)).find((event) => event.event === 'transfer.submitted')!;
  }

  it(
    'finds a transfer an older ledger never saw sent and sends nothing; sends a new one once, after an absent lookup',
    { timeout: 60_000 },
    async () => {
      const newer = await harness('lookup-first-newer');
      const older = await harness('lookup-first-older', { LOOKUP_BEFORE_FIRST_SEND: '1' });
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await newer.producer.submit(payload);
      expect((await submitted(newer, sequenceId)).data).toMatchObject({ transfer: { sequenceId } });
      expect(sim.stats().sends[sequenceId]?.accepted).toBe(1);

      await older.producer.submit(payload);
      expect((await submitted(older, sequenceId)).data).toMatchObject({ recoveredBy: 'get-transfer' });
      expect(sim.stats().sends[sequenceId]?.accepted).toBe(1);

      const fresh = samplePayload();
      const freshId = fresh.halfSigned.sequenceId;
      await older.producer.submit(fresh);
      expect((await submitted(older, freshId)).data).toMatchObject({ transfer: { sequenceId: freshId } });
      expect(sim.stats().sends[freshId]?.accepted).toBe(1);
    },
  );

  it('without it, the same enqueue on the older ledger is accepted twice (the residual risk)', { timeout: 60_000 }, async () => {
    const newer = await harness('lookup-none-newer');
    const older = await harness('lookup-none-older');
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await newer.producer.submit(payload);
    await submitted(newer, sequenceId);
    await older.producer.submit(payload);
    await submitted(older, sequenceId);
    expect(sim.stats().sends[sequenceId]?.accepted).toBe(2);
  });
});
