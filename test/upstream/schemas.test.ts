/**
 * The `raw` fields of 2.3 (wallet) and 2.5 (wallet transaction) are "null or any value": whatever a
 * provider puts there is kept, but a person (`user`) never gets past the schema, as with 2.4's raw.
 */
import { describe, expect, it } from 'vitest';
import {
  EXACT_AMOUNT,
  ExactNumber,
  parseTransactionList,
  sendTransactionResponseSchema,
  sendTransactionResponseWithoutRawSchema,
  walletTransactionResponseSchema,
} from '../../src/custody/wallet-service/schemas.ts';
import { send, transfersOf, useSimulator } from '../simulator/sim-client.ts';

const ctx = useSimulator();
const user = { id: 7, displayName: 'Jane Doe', email: 'jane.doe@example.com', phoneNumber: '+15551234567' };

async function walletTransactionBody(): Promise<{ result: Record<string, unknown> }> {
  const sequenceId = `schema-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
  ctx.sim.setTxid(sequenceId);
  const [tx] = await transfersOf(ctx.sim, { sequenceId });
  const res = await fetch(`${ctx.sim.url}/api/wallet/310/txid/${tx!.txid}`, { headers: { authorization: `Bearer ${ctx.bearer}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as { result: Record<string, unknown> };
}

describe('raw of wallets and wallet transactions', () => {
  it('drops a user object and keeps everything else', async () => {
    const body = await walletTransactionBody();
    body.result.raw = { user, note: 'kept', nested: { amount: '1.50000000' } };
    const parsed = walletTransactionResponseSchema.parse(body);
    expect(parsed.result.raw).toEqual({ note: 'kept', nested: { amount: '1.50000000' } });
    expect(JSON.stringify(parsed)).not.toContain('jane.doe@example.com');
  });

  it('keeps raw values that hold no user as they are', async () => {
    const body = await walletTransactionBody();
    for (const raw of [null, 'text', 42, ['user'], { users: 1 }]) {
      body.result.raw = raw;
      expect(walletTransactionResponseSchema.parse(body).result.raw).toEqual(raw);
    }
  });

  it('drops a user inside the raw of a wallet embedded in a transfer party (2.2/2.3)', async () => {
    const sequenceId = `schema-w-${Date.now()}`;
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
    ctx.sim.setTxid(sequenceId);
    type Party = { wallet?: Record<string, unknown> };
    const list = (await transfersOf(ctx.sim, { sequenceId })) as Array<{ inputs: Party[]; outputs: Party[] }>;
    let planted = 0;
    for (const party of list.flatMap((tx) => [...tx.inputs, ...tx.outputs])) {
      if (party.wallet) {
        party.wallet.raw = { user, kept: true };
        planted++;
      }
    }
    expect(planted).toBeGreaterThan(0);
    const { transactions: parsed, skipped } = parseTransactionList(list);
    expect(skipped).toEqual([]);
    expect(JSON.stringify(parsed)).not.toContain('Jane Doe');
    expect(JSON.stringify(parsed)).toContain('"kept":true');
  });
});

describe('the 2.4 record without raw', () => {
  const record = {
    id: 150001,
    sequenceId: 's-1',
    destinationAddress: '0xAbCdEf',
    amount: new ExactNumber(0.30000000000000004, '0.300000000000000044'),
    raw: JSON.stringify({ user, txHex: '02f8' }),
    status: 1,
    undocumented: 'dropped',
  };

  it('decides on every money field as the record with raw does, and carries no raw', () => {
    const withRaw = sendTransactionResponseSchema.parse(record);
    const withoutRaw = sendTransactionResponseWithoutRawSchema.parse(record);
    expect(withoutRaw).not.toHaveProperty('raw');
    expect(withoutRaw).not.toHaveProperty('undocumented');
    const { raw: _raw, ...rest } = withRaw;
    expect(withoutRaw).toEqual(rest);
    expect(withoutRaw[EXACT_AMOUNT]).toBe('0.300000000000000044');
    for (const broken of [
      { amount: -1 },
      { amount: '1,5' },
      { id: 'abc' },
      { sequenceId: '' },
      { destinationAddress: null },
      { destinationAddress: undefined },
    ]) {
      const body = { ...record, ...broken };
      expect(sendTransactionResponseWithoutRawSchema.safeParse(body).success).toBe(false);
      expect(sendTransactionResponseSchema.safeParse(body).success).toBe(false);
    }
  });
});
