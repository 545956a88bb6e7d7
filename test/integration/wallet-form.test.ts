/**
 * A wallet id of another provider's form is an invalid payload for this worker (CustodyPort.walletProblem):
 * the producer accepts both forms (it does not know the worker's CUSTODY_PROVIDER), the worker rejects
 * the one its provider cannot serve with `transfer.rejected` INVALID_PAYLOAD on `walletId`, and nothing
 * is sent. Against the first provider's simulator over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ name: 'wallet-form' });
});
afterAll(async () => {
  await h?.close();
});

describe('CUSTODY_PROVIDER=wallet-service', () => {
  it('rejects a 32-hex (BitGo) wallet id: transfer.rejected on walletId, no request upstream', async () => {
    const payload = samplePayload({ walletId: '0123456789abcdef0123456789abcdef' });
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    const terminal = await h.producer.waitForTerminal(sequenceId, 15_000);
    expect(terminal).toMatchObject({
      event: 'transfer.rejected',
      data: { code: 'INVALID_PAYLOAD', issues: [{ path: 'walletId', message: expect.stringMatching(/positive integer/) }] },
    });
    expect(h.sim.stats().sends[sequenceId]).toBeUndefined();
  });

  it('still sends a payload with an integer wallet id', async () => {
    const payload = samplePayload();
    await h.producer.submit(payload);
    expect(await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000, new Set(['transfer.submitted']))).toMatchObject({
      event: 'transfer.submitted',
    });
  });
});
