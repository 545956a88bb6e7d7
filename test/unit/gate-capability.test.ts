/**
 * The travel-rule gate is a capability of the port: a provider without getTravelRuleSetting never
 * blocks (its setting reads as null) and the decision records that no setting was read. The decorators
 * keep the capability as the adapter has it: they never invent a gate call.
 */
import { describe, expect, it } from 'vitest';
import { decide } from '../../src/jobs/submit-transaction/steps/gate.ts';
import { decorate } from '../../src/custody/decorators.ts';
import type { CustodyPort } from '../../src/custody/port.ts';
import { submitPayloadSchema } from '../../packages/producer/src/payload.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';

const NOW = Date.parse('2026-11-26T12:00:00Z');

describe('a provider that does not gate', () => {
  it('passes every transfer, reference or not, and records no setting', () => {
    const payload = submitPayloadSchema.parse({ ...samplePayload(), travelRule: undefined });
    expect(decide(null, payload, NOW)).toEqual({
      setting: null,
      settingFetchedAt: '',
      checkedAt: new Date(NOW).toISOString(),
      applies: false,
      reference: false,
      outcome: 'passed',
    });
  });

  it('a provider that gates still blocks without a reference', () => {
    const payload = submitPayloadSchema.parse({ ...samplePayload(), travelRule: undefined });
    const setting = { outgoingTxn: 1, mandatory: true, blockTxn: true, fetchedAt: '2026-11-26T11:59:00.000Z' };
    expect(decide(setting, payload, NOW)).toMatchObject({ applies: true, outcome: 'blocked', setting: { outgoingTxn: 1 } });
  });

  it('decorating a port without the gate leaves it without one', () => {
    const port = {
      sendTransaction: () => Promise.reject(new Error('unused')),
      getTransfersBySequenceId: () => Promise.resolve([]),
      getTransfersByTxId: () => Promise.resolve([]),
      getWalletTransaction: () => Promise.reject(new Error('unused')),
      close: () => Promise.resolve(),
    } as unknown as CustodyPort;
    expect(decorate(port, { metrics: () => undefined }).getTravelRuleSetting).toBeUndefined();
  });
});
