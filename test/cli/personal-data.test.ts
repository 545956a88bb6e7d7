import { describe, expect, it } from 'vitest';
import { withoutPersonalData } from '../../src/cli/personal-data.ts';

const user = { id: 7, displayName: 'Jane Doe', email: 'jane.doe@example.com', phoneNumber: null };

describe('what the CLI prints of upstream records', () => {
  it('drops the user inside a raw object, at any depth, and leaves the rest', () => {
    const record = { id: 1, raw: { txHex: '02f8', user, sequenceId: 's-1' }, wallet: { raw: { user, note: 'kept' } } };
    expect(withoutPersonalData(record)).toEqual({ id: 1, raw: { txHex: '02f8', sequenceId: 's-1' }, wallet: { raw: { note: 'kept' } } });
    expect(record.raw.user).toBe(user);
  });

  it('drops the user inside raw given as JSON text, and leaves other raw text byte for byte', () => {
    const text = JSON.stringify({ txHex: '02f8', halfSigned: { sequenceId: 's-1' }, user, sequenceId: 's-1' });
    const cleaned = withoutPersonalData([{ raw: text }, { raw: '{"txHex": "02f8"}' }, { raw: 'not json' }]) as Array<{ raw: string }>;
    expect(JSON.parse(cleaned[0]!.raw)).toEqual({ txHex: '02f8', halfSigned: { sequenceId: 's-1' }, sequenceId: 's-1' });
    expect(cleaned[1]!.raw).toBe('{"txHex": "02f8"}');
    expect(cleaned[2]!.raw).toBe('not json');
  });

  it('drops the travel-rule originator data and keeps a user that is not inside raw', () => {
    expect(withoutPersonalData({ data: { outgoingTxn: 1, dataJson: { name: 'Jane Doe' } }, user: 'ops' })).toEqual({
      data: { outgoingTxn: 1 },
      user: 'ops',
    });
  });

  it('keeps a __proto__ key from JSON as a plain field', () => {
    const cleaned = withoutPersonalData(JSON.parse('{"metadata": {"__proto__": {"polluted": true}}}')) as { metadata: object };
    expect(Object.getPrototypeOf(cleaned.metadata)).toBe(Object.prototype);
    expect(JSON.stringify(cleaned)).toBe('{"metadata":{"__proto__":{"polluted":true}}}');
  });
});
