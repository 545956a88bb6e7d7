import { describe, expect, it } from 'vitest';
import { boundedCopyWithoutUser, DASHBOARD_COPY_LIMITS, TRUNCATED } from '../../src/http/bounded-copy.ts';
import { REDACTED, redactJobData, redactMetadata, redactStoredMetadata } from '../../src/http/job-view.ts';

/** A submit-transaction payload (docs/contract.md section 3) carrying personal data. */
function payload() {
  return {
    walletId: 310,
    coin: 'eth',
    txHex: '0xabcdef',
    halfSigned: { txBase64: 'q83v', txHex: '0xabcdef', sequenceId: 'a88a1846-b23d-f7e8-2344-f2bddb0c16f9' },
    travelRule: {
      reference: 'tr-ref-1',
      originator: {
        name: 'Jane Roe',
        accountNumber: 12345,
        verified: true,
        address: { lines: ['1 Main St', 'Springfield'], country: null },
      },
    },
    metadata: { orderId: 'A-1003', email: 'jane@example.test', customerName: 'Jane Roe', tags: ['vip'] },
    user: { email: 'top@example.test' },
  };
}

describe('redactJobData', () => {
  it('keeps the transfer fields and shows only the allow-listed metadata values', () => {
    const view = redactJobData(payload(), ['orderId']) as Record<string, unknown>;
    expect(view).toMatchObject({ walletId: 310, coin: 'eth', txHex: '0xabcdef', halfSigned: payload().halfSigned });
    expect(view.metadata).toEqual({ orderId: 'A-1003', email: REDACTED, customerName: REDACTED, tags: REDACTED });
  });

  it('shows only scalars under an allow-listed key: an object or array there keeps its keys, every value redacted', () => {
    const metadata = { orderId: 'A-1', desk: { name: 'Jane Roe', notes: ['vip', { pin: 1234 }] }, tags: ['vip'], none: null };
    const shown = { orderId: 'A-1', desk: { name: REDACTED, notes: [REDACTED, { pin: REDACTED }] }, tags: [REDACTED], none: null };
    expect(redactMetadata(metadata, ['orderId', 'desk', 'tags', 'none'])).toEqual(shown);
    // The board applies the same function to a job's metadata.
    expect((redactJobData({ metadata }, ['orderId', 'desk', 'tags', 'none']) as { metadata: unknown }).metadata).toEqual(shown);
    const deep = JSON.parse(`{"desk":${'{"a":'.repeat(100_000)}"Jane Roe"${'}'.repeat(100_000)}}`) as unknown;
    expect(JSON.stringify(boundedCopyWithoutUser(redactMetadata(deep, ['desk'])))).not.toContain('Jane Roe');
  });

  it('redacts every metadata value when nothing is allow-listed', () => {
    const view = redactJobData(payload(), []) as Record<string, unknown>;
    expect(view.metadata).toEqual({ orderId: REDACTED, email: REDACTED, customerName: REDACTED, tags: REDACTED });
    expect(redactJobData({ metadata: 'jane@example.test' }, ['orderId'])).toEqual({ metadata: REDACTED });
  });

  it('keeps the travelRule structure and keys, every scalar leaf redacted', () => {
    const view = redactJobData(payload(), ['orderId', 'reference', 'name']) as Record<string, unknown>;
    expect(view.travelRule).toEqual({
      reference: REDACTED,
      originator: {
        name: REDACTED,
        accountNumber: REDACTED,
        verified: REDACTED,
        address: { lines: [REDACTED, REDACTED], country: REDACTED },
      },
    });
    expect(redactJobData({ travelRule: 'Jane Roe' }, [])).toEqual({ travelRule: REDACTED });
    expect(redactJobData({ travelRule: null, metadata: null }, [])).toEqual({ travelRule: null, metadata: null });
  });

  it('leaves `user` to the bounded copy, which removes it everywhere', () => {
    const data = {
      ...payload(),
      metadata: { orderId: 'A-1', user: { email: 'm@example.test' } },
      track: { user: { email: 'n@example.test' } },
    };
    const shown = boundedCopyWithoutUser(redactJobData(data, ['orderId', 'user']));
    expect(JSON.stringify(shown)).not.toMatch(/"user"|example\.test|Jane Roe/);
    expect(shown).toMatchObject({ metadata: { orderId: 'A-1' }, track: {} });
  });

  it('applies to any job data with a top-level metadata or travelRule (track-transfer too)', () => {
    expect(redactJobData({ sequenceId: 's-1', metadata: { email: 'x@example.test' } }, [])).toEqual({
      sequenceId: 's-1',
      metadata: { email: REDACTED },
    });
    // Only at the top: a nested `metadata` is job data like any other.
    const nested = { sequenceId: 's-1', record: { metadata: { orderId: 'A-1' } } };
    expect(redactJobData(nested, [])).toBe(nested);
  });

  it('returns anything that is not an object as it is', () => {
    for (const value of ['text', 42, true, null, undefined]) expect(redactJobData(value, ['orderId'])).toBe(value);
    const list = [{ metadata: { email: 'x@example.test' } }];
    expect(redactJobData(list, [])).toBe(list);
  });

  it('does not change its input', () => {
    const data = payload();
    const before = structuredClone(data);
    const view = redactJobData(data, ['orderId']) as Record<string, unknown>;
    expect(data).toEqual(before);
    expect(view).not.toBe(data);
    expect(view.metadata).not.toBe(data.metadata);
    expect(view.travelRule).not.toBe(data.travelRule);
    expect(Object.isFrozen(data)).toBe(false);
  });

  it('keeps a `__proto__` key a key', () => {
    const data = JSON.parse(
      '{"metadata":{"__proto__":{"polluted":true},"orderId":"A-1"},"travelRule":{"__proto__":{"name":"x"}}}',
    ) as unknown;
    const view = redactJobData(data, ['__proto__']) as Record<string, Record<string, unknown>>;
    expect(Object.keys(view.metadata!)).toEqual(['__proto__', 'orderId']);
    expect(view.metadata!.orderId).toBe(REDACTED);
    expect(Object.keys(view.travelRule!)).toEqual(['__proto__']);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it('survives a hostile travelRule (100,000 levels, 50,000 wide) and leaves the cuts to the bounded copy', () => {
    const deep = JSON.parse(`{"travelRule":${'{"a":'.repeat(100_000)}"Jane Roe"${'}'.repeat(100_000)}}`) as unknown;
    const deepShown = JSON.stringify(boundedCopyWithoutUser(redactJobData(deep, [])));
    expect(deepShown).toContain(`${TRUNCATED} (deeper than ${DASHBOARD_COPY_LIMITS.depth} levels)`);
    expect(deepShown).not.toContain('Jane Roe');

    const names = Array.from({ length: 50_000 }, (_, index) => `name-${index}`);
    const wide = { travelRule: { names }, metadata: Object.fromEntries(names.map((name) => [name, name])) };
    const view = redactJobData(wide, ['name-1']) as { travelRule: { names: unknown[] }; metadata: Record<string, unknown> };
    expect(view.travelRule.names.length).toBe(names.length);
    expect(Object.keys(view.metadata).length).toBe(DASHBOARD_COPY_LIMITS.breadth + 1);
    const shown = boundedCopyWithoutUser(view) as { travelRule: { names: unknown[] }; metadata: Record<string, unknown> };
    // What the bounded copy of the raw data shows, with the values redacted.
    const raw = boundedCopyWithoutUser(wide) as { travelRule: { names: unknown[] }; metadata: Record<string, unknown> };
    expect(shown.travelRule.names).toEqual(raw.travelRule.names.map((name) => (String(name).startsWith(TRUNCATED) ? name : REDACTED)));
    expect(Object.keys(shown.metadata)).toEqual(Object.keys(raw.metadata));
    expect(shown.metadata['name-1']).toBe('name-1');
    expect(shown.metadata['name-2']).toBe(REDACTED);
  });

  it("shows a record's stored metadata text redacted and bounded: none is null, text that is not JSON is redacted", () => {
    expect(redactStoredMetadata('', ['orderId'])).toBeNull();
    expect(redactStoredMetadata('{"orderId":', ['orderId'])).toBe(REDACTED);
    const shown = redactStoredMetadata('{"orderId":"A-1","email":"jane@example.test","user":{"name":"Jane Roe"}}', ['orderId', 'user']);
    expect(shown).toEqual({ orderId: 'A-1', email: REDACTED });
  });
});
