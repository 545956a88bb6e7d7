/**
 * Every body the simulator answers, checked field for field against docs/upstream-api.md section 2 by hand (not
 * against the project's own schemas, so a drift on either side shows up).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { basicOf, getTransfer, newSequenceId, postJson, send, sendBody, transfersOf, useSimulator } from './sim-client.ts';

const SIGNED_8 = /^-?\d+\.\d{8}$/;
const UNSIGNED_8 = /^\d+\.\d{8}$/;
const SIGNED_5 = /^-?\d+\.\d{5}$/;
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const TXID = /^0x[0-9a-f]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

type Json = Record<string, unknown>;

function keys(value: unknown): string[] {
  return Object.keys(value as Json).sort();
}

function expectWallet23(wallet: Json, walletId: number, coin: string): void {
  expect(keys(wallet)).toEqual(
    [
      'id',
      'name',
      'type',
      'config',
      'status',
      'balance',
      'balanceusd',
      'raw',
      'issynced',
      'walletpath',
      'walletidentifier',
      'coin',
      'chain',
      'parentchain',
      'subtype',
      'isArchived',
      'teamId',
      'version',
      'orgid',
    ].sort(),
  );
  expect(wallet.id).toBe(walletId);
  expect(typeof wallet.name).toBe('string');
  expect(wallet.type).toBe('pipeline');
  expect(wallet.config).toMatch(/^\dof\d$/);
  expect(Number.isInteger(wallet.status)).toBe(true);
  expect(wallet.balance).toMatch(UNSIGNED_8);
  expect(wallet.balanceusd).toMatch(UNSIGNED_8);
  expect(wallet.raw).toBeNull();
  expect(typeof wallet.issynced).toBe('boolean');
  expect(wallet.walletpath).toBeNull();
  expect(wallet.walletidentifier).toMatch(ADDRESS);
  expect(wallet.coin).toBe(coin);
  expect(typeof wallet.chain).toBe('string');
  expect(wallet.parentchain).toBe('EVM');
  expect(['hot', 'deposit']).toContain(wallet.subtype);
  expect(typeof wallet.isArchived).toBe('boolean');
  expect(wallet.teamId).toBeNull();
  expect(Number.isInteger(wallet.version)).toBe(true);
  expect(Number.isInteger(wallet.orgid)).toBe(true);
}

function expectParty22(party: Json): void {
  expect(party.address).toMatch(ADDRESS);
  expect(party.amount).toMatch(UNSIGNED_8);
  expect(typeof party.isMine).toBe('boolean');
  if (party.isMine) expect(keys(party)).toEqual(['address', 'amount', 'isMine', 'wallet']);
  else expect(keys(party)).toEqual(['address', 'amount', 'isMine']);
}

const ctx = useSimulator();

describe('sendTransaction answers a upstream API 2.4 record', () => {
  it('with every field typed as the spec says and raw holding the submission', async () => {
    const sequenceId = newSequenceId();
    const txHex = '02f8b1018203e8843b9aca00850df8475800825208944b5a';
    const body = sendBody(sequenceId, txHex) as { halfSigned: Json };
    const res = await postJson(`${ctx.sim.url}/api/wallet/310/sendTransaction`, body, {
      authorization: `Bearer ${ctx.bearer}`,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const record = (await res.json()) as Json;
    expect(keys(record)).toEqual(
      [
        'id',
        'userid',
        'raw',
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
      ].sort(),
    );
    expect(Number.isInteger(record.id)).toBe(true);
    expect(Number.isInteger(record.userid)).toBe(true);
    expect(Number.isInteger(record.status)).toBe(true);
    expect(record.walletid).toBe('310');
    expect(Number.isInteger(record.type)).toBe(true);
    expect(record.asset).toBe('eth');
    expect(typeof record.chain).toBe('string');
    expect(record.timestamp).toMatch(ISO_MS);
    expect(Math.abs(Date.parse(record.timestamp as string) - Date.now())).toBeLessThan(5_000);
    expect(Number.isInteger(record.transactionSequenceId)).toBe(true);
    expect(record.sequenceId).toBe(sequenceId);

    // derived deterministically from txHex
    const hash = createHash('sha256').update(txHex).digest('hex');
    expect(record.destinationAddress).toBe(`0x${hash.slice(0, 40)}`);
    expect(typeof record.amount).toBe('number');
    expect(record.amount as number).toBeGreaterThan(0);
    expect(String(record.amount)).toMatch(/^\d+(\.\d{1,8})?$/);
    expect(typeof record.usdamount).toBe('number');
    expect(record.usdamount as number).toBeGreaterThan(0);

    expect(typeof record.raw).toBe('string');
    const raw = JSON.parse(record.raw as string) as Json;
    expect(keys(raw)).toEqual(['halfSigned', 'sequenceId', 'txHex', 'user']);
    expect(raw.txHex).toBe(txHex);
    expect(raw.sequenceId).toBe(sequenceId);
    const halfSigned = raw.halfSigned as Json;
    expect(halfSigned.txBase64).toBe(body.halfSigned.txBase64);
    expect(halfSigned.txHex).toBe(txHex);
    expect(halfSigned.sequenceId).toBe(sequenceId);
    expect(typeof halfSigned.payload).toBe('string');
    const user = raw.user as Json;
    expect(keys(user)).toEqual(
      ['id', 'displayName', 'photoURL', 'lastLoginAt', 'email', 'phoneNumber', 'status', 'created_at', 'clientid', 'type'].sort(),
    );
    expect(Number.isInteger(user.id)).toBe(true);
    expect(user.displayName).toMatch(/\w+ \w+/);
    expect(new URL(user.photoURL as string).protocol).toBe('https:');
    expect(user.lastLoginAt).toMatch(ISO_MS);
    expect(user.email).toMatch(/^[a-z.]+@example\.com$/);
    expect(user.phoneNumber).toMatch(/^\+\d{11}$/);
    expect(Number.isInteger(user.status)).toBe(true);
    expect(user.created_at).toMatch(ISO_MS);
    expect(typeof user.clientid).toBe('string');
    expect(Number.isInteger(user.type)).toBe(true);
  });

  it('derives the same destination and amount from the same txHex', async () => {
    const a = (await (
      await postJson(`${ctx.sim.url}/api/wallet/310/sendTransaction`, sendBody(newSequenceId(), 'aa11'), {
        authorization: `Bearer ${ctx.bearer}`,
      })
    ).json()) as Json;
    const b = (await (
      await postJson(`${ctx.sim.url}/api/wallet/310/sendTransaction`, sendBody(newSequenceId(), 'aa11'), {
        authorization: `Bearer ${ctx.bearer}`,
      })
    ).json()) as Json;
    expect(b.destinationAddress).toBe(a.destinationAddress);
    expect(b.amount).toBe(a.amount);
    expect(b.id).not.toBe(a.id);
  });

  it.each([
    ['a wallet id that is not digits', 'abc', sendBody('s-1')],
    ['a missing txHex', '310', { halfSigned: { txBase64: 'AA==', txHex: 'aa', sequenceId: 's-2' } }],
    ['a missing halfSigned', '310', { txHex: 'aa' }],
    ['a numeric sequenceId', '310', { txHex: 'aa', halfSigned: { txBase64: 'AA==', txHex: 'aa', sequenceId: 5 } }],
    ['a missing txBase64', '310', { txHex: 'aa', halfSigned: { txHex: 'aa', sequenceId: 's-3' } }],
    ['a body that is not JSON', '310', '{"txHex":'],
  ])('answers 400 to %s and records nothing', async (_name, walletId, body) => {
    const res = await postJson(`${ctx.sim.url}/api/wallet/${walletId}/sendTransaction`, body, {
      authorization: `Bearer ${ctx.bearer}`,
    });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as Json;
    expect(answer.success).toBe(false);
    expect(typeof answer.message).toBe('string');
    expect(ctx.sim.stats().transfers).toBe(0);
  });
});

describe('get-transfer answers a list of upstream API 2.1 Transactions', () => {
  it('with a send transaction: inputs from the wallet, outputs to the destination', async () => {
    const sequenceId = newSequenceId();
    const record = (await (await send(ctx.sim, ctx.bearer, sequenceId, 310)).json()) as Json;
    const list = await transfersOf(ctx.sim, { sequenceId }, 310);
    expect(list).toHaveLength(1);
    const tx = list[0]!;
    expect(keys(tx)).toEqual(
      [
        'coin',
        'id',
        'wallet',
        'txid',
        'date',
        'value',
        'valueString',
        'baseValue',
        'baseValueString',
        'feeString',
        'usd',
        'walletType',
        'inputs',
        'outputs',
        'type',
        'DestinationTag',
      ].sort(),
    );
    expect(tx.coin).toBe('eth');
    expect(tx.id).toMatch(/^\d+$/);
    expect(tx.wallet).toBe(310);
    expect(tx.txid).toMatch(TXID);
    expect(tx.date).toMatch(ISO_MS);
    expect(tx.value).toMatch(SIGNED_8);
    expect((tx.value as string).startsWith('-')).toBe(true);
    expect(tx.valueString).toBe(tx.value);
    expect(typeof tx.baseValue).toBe('number');
    expect(tx.baseValue as number).toBeLessThan(0);
    expect(tx.baseValueString).toMatch(SIGNED_8);
    expect(tx.feeString).toMatch(UNSIGNED_8);
    expect(tx.usd).toMatch(SIGNED_5);
    expect(tx.walletType).toBe('pipeline');
    expect(tx.type).toBe('send');
    expect(tx.DestinationTag).toBeNull();

    const inputs = tx.inputs as Json[];
    expect(inputs.length).toBeGreaterThanOrEqual(1);
    for (const input of inputs) {
      expectParty22(input);
      expect(input.isMine).toBe(true);
      expectWallet23(input.wallet as Json, 310, 'eth');
    }
    const outputs = tx.outputs as Json[];
    for (const output of outputs) {
      expectParty22(output);
      if (output.isMine) expectWallet23(output.wallet as Json, 310, 'eth');
    }
    const external = outputs.filter((output) => !output.isMine);
    expect(external).toHaveLength(1);
    expect(external[0]!.address).toBe(record.destinationAddress);
    expect(Number(external[0]!.amount)).toBe(record.amount);
    expect(external[0]!.amount).toBe((record.amount as number).toFixed(8));
    // value = -(amount + fee)
    const spent = Number(external[0]!.amount) + Number(tx.feeString);
    expect(Number(tx.value)).toBeCloseTo(-spent, 8);
  });

  it('finds the same transfer by txId, echoing the requested coin', async () => {
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId, 311);
    const [bySequence] = await transfersOf(ctx.sim, { sequenceId }, 311);
    const [byTxid, ...rest] = await transfersOf(ctx.sim, { txId: bySequence!.txid as string }, 311);
    expect(rest).toEqual([]);
    expect(byTxid).toEqual(bySequence);
  });

  it('answers [] to an unknown sequenceId, txId, or a transfer of another wallet', async () => {
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId, 310);
    expect(await transfersOf(ctx.sim, { sequenceId: 'unknown' })).toEqual([]);
    expect(await transfersOf(ctx.sim, { txId: `0x${'0'.repeat(64)}` })).toEqual([]);
    expect(await transfersOf(ctx.sim, { sequenceId }, 999)).toEqual([]);
  });

  it.each([
    ['no wallet', { sequenceId: 'x' }],
    ['no lookup key', { wallet: { coin: 'eth', walletId: 310 } }],
    ['a wallet id that is not an integer', { wallet: { coin: 'eth', walletId: 'x1' }, sequenceId: 'x' }],
    ['no coin', { wallet: { walletId: 310 }, sequenceId: 'x' }],
    ['an empty sequenceId', { wallet: { coin: 'eth', walletId: 310 }, sequenceId: '' }],
    ['not JSON', 'nope'],
  ])('answers 400 to a body with %s', async (_name, body) => {
    const res = await postJson(`${ctx.sim.url}/api/wallet/get-transfer`, body, { authorization: basicOf(ctx.sim) });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as Json;
    expect(answer.success).toBe(false);
    expect(typeof answer.message).toBe('string');
  });
});

describe('get wallet transaction answers {result: upstream API 2.5}', () => {
  it('for a known txid, and 404 for an unknown one', async () => {
    const sequenceId = newSequenceId();
    const record = (await (await send(ctx.sim, ctx.bearer, sequenceId, 312)).json()) as Json;
    const [tx] = await transfersOf(ctx.sim, { sequenceId }, 312);
    const txid = tx!.txid as string;
    const res = await fetch(`${ctx.sim.url}/api/wallet/312/txid/${txid}`, {
      headers: { authorization: `Bearer ${ctx.bearer}`, accept: 'application/json' },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(keys(body)).toEqual(['result']);
    const result = body.result as Json;
    expect(keys(result)).toEqual(
      [
        'id',
        'txid',
        'raw',
        'walletid',
        'type',
        'fee',
        'effectivechange',
        'runningbalance',
        'timestamp',
        'externaladdress',
        'coin',
        'effectivechangeusd',
        'wallet',
        'explorerLink',
      ].sort(),
    );
    expect(Number.isInteger(result.id)).toBe(true);
    expect(result.txid).toBe(txid);
    expect(result.raw).toBeNull();
    expect(result.walletid).toBe(312);
    expect(typeof result.type).toBe('string');
    expect(result.fee).toMatch(UNSIGNED_8);
    expect(result.effectivechange).toMatch(SIGNED_8);
    expect(result.runningbalance).toBeNull();
    expect(result.timestamp).toMatch(ISO_MS);
    expect(result.externaladdress).toBe(record.destinationAddress);
    expect(result.coin).toBe('eth');
    expect(result.effectivechangeusd).toMatch(SIGNED_5);
    expect(new URL(result.explorerLink as string).pathname).toContain(txid);
    const wallet = result.wallet as Json;
    expect(keys(wallet)).toEqual(
      ['id', 'name', 'type', 'config', 'balance', 'address', 'coin', 'chain', 'parentchain', 'subtype', 'access', 'balanceUSD'].sort(),
    );
    expect(wallet.id).toBe(312);
    expect(wallet.config).toMatch(/^\dof\d$/);
    expect(wallet.address).toMatch(ADDRESS);
    expect(wallet.access).toBe('SIGNER');
    expect(wallet.balance).toMatch(UNSIGNED_8);
    expect(wallet.balanceUSD).toMatch(UNSIGNED_8);

    const otherWallet = await fetch(`${ctx.sim.url}/api/wallet/313/txid/${txid}`, {
      headers: { authorization: `Bearer ${ctx.bearer}` },
    });
    expect(otherWallet.status).toBe(404);
    const unknown = await fetch(`${ctx.sim.url}/api/wallet/312/txid/0x${'1'.repeat(64)}`, {
      headers: { authorization: `Bearer ${ctx.bearer}` },
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ success: false, message: expect.any(String) });
  });
});

describe('is-enabled answers {success, data: upstream API 2.6}', () => {
  it('with the configured travel-rule setting', async () => {
    const res = await postJson(`${ctx.sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(ctx.sim) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(keys(body)).toEqual(['data', 'success']);
    expect(body.success).toBe(true);
    const data = body.data as Json;
    expect(keys(data)).toEqual(
      [
        'id',
        'appId',
        'outgoingTxn',
        'outgoingTxnTimeout',
        'incomingTxn',
        'mandatory',
        'blockTxn',
        'dataJson',
        'status',
        'updatedBy',
        'orgId',
        'createdAt',
        'updatedAt',
      ].sort(),
    );
    expect(data.outgoingTxn).toBe(0);
    expect(data.mandatory).toBe(false);
    expect(data.blockTxn).toBe(false);
    expect(data.outgoingTxnTimeout).toBeNull();
    for (const field of ['id', 'appId', 'incomingTxn', 'status', 'updatedBy', 'orgId']) {
      expect(Number.isInteger(data[field]), field).toBe(true);
    }
    expect(data.createdAt).toMatch(ISO_MS);
    expect(data.updatedAt).toMatch(ISO_MS);
    const dataJson = data.dataJson as Json;
    expect(keys(dataJson)).toEqual(['address', 'identification', 'name', 'type']);
    expect(dataJson.type).toBe('natural');
    const address = dataJson.address as Json;
    expect(keys(address)).toEqual(['address1', 'address2', 'city', 'country']);
    expect(address.country).toMatch(/^[A-Z]{2}$/);
    expect(keys(dataJson.identification)).toEqual(['authority', 'country', 'number', 'type']);

    ctx.sim.updateSettings({ travelRule: { outgoingTxn: 1, mandatory: true } });
    const switched = (await (
      await postJson(`${ctx.sim.url}/api/travel-rule/is-enabled`, '', {
        authorization: basicOf(ctx.sim),
      })
    ).json()) as { data: Json };
    expect(switched.data.outgoingTxn).toBe(1);
    expect(switched.data.mandatory).toBe(true);
    expect(switched.data.appId).toBe(data.appId);
  });
});

describe('optional fields', () => {
  it('adds sequenceId to Transactions only when includeSequenceIdInTransactions is on', async () => {
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId);
    expect((await transfersOf(ctx.sim, { sequenceId }))[0]).not.toHaveProperty('sequenceId');
    ctx.sim.updateSettings({ includeSequenceIdInTransactions: true });
    expect((await transfersOf(ctx.sim, { sequenceId }))[0]!.sequenceId).toBe(sequenceId);
    const res = await getTransfer(ctx.sim, { sequenceId });
    expect(res.status).toBe(200);
  });
});
