/**
 * The `realistic` profile: every kind of variation shows up over a few dozen transfers, while what
 * decides money and tracking keeps its documented type. Fixed sequenceIds make the answers fixed too
 * (the variation is drawn per sequenceId), so nothing here depends on luck.
 */
import { describe, expect, it } from 'vitest';
import { readSimulatorEnv } from '../../src/simulator/env.ts';
import { basicOf, getTransfer, postJson, send, token, transfersOf, useSimulator } from './sim-client.ts';

type Json = Record<string, unknown>;

const TRANSFERS = 40;
const TXID = /^0x[0-9a-f]{64}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UNSIGNED_8 = /^\d+\.\d{8}$/;

const ctx = useSimulator({ settings: { profile: 'realistic' } });

function sequenceIds(prefix: string, count = TRANSFERS): string[] {
  return Array.from({ length: count }, (_, index) => `${prefix}-${String(index).padStart(4, '0')}`);
}

/** Sends each sequenceId once to the wallet; returns the 2.4 bodies. */
async function sendAll(ids: string[], walletId = 310): Promise<Json[]> {
  const records: Json[] = [];
  for (const sequenceId of ids) {
    const res = await send(ctx.sim, ctx.bearer, sequenceId, walletId);
    expect(res.status).toBe(200);
    records.push((await res.json()) as Json);
  }
  return records;
}

/** The transfer's own record in a get-transfer answer: the send paying its destination. */
function ownRecord(list: Json[], sequenceId: string): Json {
  const view = ctx.sim.transfer(sequenceId)!;
  const own = list.filter((tx) =>
    ((tx.outputs as Json[] | undefined) ?? []).some(
      (out) => String(out.address).toLowerCase() === view.destinationAddress && out.amount === view.amount,
    ),
  );
  expect(own).toHaveLength(1);
  return own[0]!;
}

/** How many of the values satisfy the test; the expectations below want some, not all or none. */
function count<T>(values: T[], test: (value: T) => boolean): number {
  return values.filter(test).length;
}

function expectSome<T>(values: T[], what: string, test: (value: T) => boolean): void {
  expect(count(values, test), what).toBeGreaterThan(0);
}

function expectVaries<T>(values: T[], what: string, test: (value: T) => boolean): void {
  const n = count(values, test);
  expect(n, `${what}: in some answers`).toBeGreaterThan(0);
  expect(n, `${what}: not in all answers`).toBeLessThan(values.length);
}

function hasKey(value: unknown, key: string): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, key);
}

describe('sendTransaction under the realistic profile (2.4)', () => {
  it('varies the person, numeric text, extra keys and address case, keeping id, sequenceId, destinationAddress and amount typed', async () => {
    const ids = sequenceIds('send');
    const records = await sendAll(ids);
    records.forEach((record, index) => {
      const view = ctx.sim.transfer(ids[index]!)!;
      expect(Number.isInteger(record.id)).toBe(true);
      expect(record.sequenceId).toBe(ids[index]);
      expect(record.destinationAddress).toMatch(ADDRESS);
      expect((record.destinationAddress as string).toLowerCase()).toBe(view.destinationAddress);
      expect(typeof record.amount).toBe('number');
      expect(record.amount).toBe(Number(view.amount));
      expect(typeof record.raw).toBe('string');
      const raw = JSON.parse(record.raw as string) as Json;
      expect(raw.sequenceId).toBe(ids[index]);
      expect((raw.halfSigned as Json).sequenceId).toBe(ids[index]);
    });
    const users = records.map((record) => (JSON.parse(record.raw as string) as { user: Json }).user);
    expectVaries(users, 'raw.user.photoURL null', (user) => user.photoURL === null);
    expectVaries(users, 'raw.user.lastLoginAt null', (user) => user.lastLoginAt === null);
    expectVaries(users, 'raw.user extra keys', (user) => hasKey(user, 'settings'));
    expectVaries(records, 'raw extra keys', (record) => hasKey(JSON.parse(record.raw as string), 'meta'));
    expectVaries(records, 'usdamount as text', (record) => typeof record.usdamount === 'string');
    expectVaries(records, 'userid as text', (record) => typeof record.userid === 'string');
    expectVaries(records, 'status as text', (record) => typeof record.status === 'string');
    expectVaries(records, 'type as text', (record) => typeof record.type === 'string');
    expectVaries(records, 'transactionSequenceId as text', (record) => typeof record.transactionSequenceId === 'string');
    expectVaries(records, 'createdBy', (record) => hasKey(record, 'createdBy'));
    expectVaries(records, 'nested meta', (record) => typeof (record.meta as Json | undefined)?.flags === 'object');
    expectVaries(records, '_links', (record) => hasKey(record, '_links'));
    expectVaries(records, 'destinationAddress not in lower case', (record) => /[A-F]/.test(record.destinationAddress as string));
  });
});

describe('get-transfer under the realistic profile (2.1)', () => {
  it('shows a txid not yet set as null or absent, never ""', async () => {
    ctx.sim.updateSettings({ txidAfterMs: 60_000 });
    const ids = sequenceIds('pending');
    await sendAll(ids);
    const records = [];
    for (const sequenceId of ids) {
      const list = await transfersOf(ctx.sim, { sequenceId });
      expect(list).toHaveLength(1);
      records.push(list[0]!);
    }
    expect(count(records, (tx) => tx.txid === '')).toBe(0);
    expectVaries(records, 'txid null', (tx) => tx.txid === null);
    expectVaries(records, 'txid absent', (tx) => !hasKey(tx, 'txid'));
    expect(count(records, (tx) => tx.txid === null || !hasKey(tx, 'txid'))).toBe(ids.length);
  });

  it('varies optional fields, numeric text, the embedded wallet, extra keys and address case, keeping the match fields typed', async () => {
    const ids = sequenceIds('record');
    const sent = await sendAll(ids);
    const records: Json[] = [];
    for (const [index, sequenceId] of ids.entries()) {
      const view = ctx.sim.transfer(sequenceId)!;
      const list = await transfersOf(ctx.sim, { sequenceId });
      expect(list).toHaveLength(1);
      const tx = ownRecord(list, sequenceId);
      expect(tx.id).toMatch(/^\d+$/);
      expect(tx.txid).toBe(view.txid);
      expect(tx.txid).toMatch(TXID);
      expect(tx.type).toBe('send');
      expect(tx).not.toHaveProperty('sequenceId');
      for (const party of [...(tx.inputs as Json[]), ...(tx.outputs as Json[])]) {
        expect(party.address).toMatch(ADDRESS);
        expect(party.amount).toMatch(UNSIGNED_8);
        expect(typeof party.isMine).toBe('boolean');
      }
      // the same transfer looks the same from poll to poll
      expect(await transfersOf(ctx.sim, { sequenceId })).toEqual(list);
      records.push({ ...tx, sentDestination: sent[index]!.destinationAddress });
    }
    expectVaries(records, 'DestinationTag absent', (tx) => !hasKey(tx, 'DestinationTag'));
    expectVaries(records, 'usd null', (tx) => tx.usd === null);
    expectVaries(records, 'feeString absent', (tx) => !hasKey(tx, 'feeString'));
    expectVaries(records, 'walletType absent', (tx) => !hasKey(tx, 'walletType'));
    expectVaries(records, 'wallet as text', (tx) => tx.wallet === '310');
    expectVaries(records, 'baseValue as text', (tx) => typeof tx.baseValue === 'string');
    expectVaries(records, 'createdBy', (tx) => hasKey(tx, 'createdBy'));
    expectVaries(records, 'nested meta', (tx) => typeof (tx.meta as Json | undefined)?.flags === 'object');
    expectVaries(records, '_links', (tx) => hasKey(tx, '_links'));
    const parties = records.flatMap((tx) => [...(tx.inputs as Json[]), ...(tx.outputs as Json[])]);
    expectVaries(parties, 'party extra keys', (party) => hasKey(party, 'label') || hasKey(party, 'meta'));

    const wallets = parties.filter((party) => party.isMine).map((party) => party.wallet as Json);
    expect(wallets.length).toBeGreaterThanOrEqual(records.length);
    expectVaries(wallets, '2.3 balance null', (wallet) => wallet.balance === null);
    expectVaries(wallets, '2.3 name null', (wallet) => wallet.name === null);
    expectVaries(wallets, '2.3 teamId, walletpath, raw absent', (wallet) => !hasKey(wallet, 'teamId') && !hasKey(wallet, 'raw'));
    expectVaries(wallets, '2.3 version as text', (wallet) => typeof wallet.version === 'string');
    expectVaries(wallets, '2.3 nested extra keys', (wallet) => typeof (wallet.meta as Json | undefined)?.policy === 'object');

    const external = (tx: Json) => (tx.outputs as Json[]).find((out) => !out.isMine)!.address as string;
    expectSome(records, 'destination spelled differently in 2.1 and 2.4', (tx) => external(tx) !== tx.sentDestination);
    expectSome(records, 'destination spelled alike in 2.1 and 2.4', (tx) => external(tx) === tx.sentDestination);
    expectSome(records, 'own address spelled differently in one record', (tx) => {
      const own = [...(tx.inputs as Json[]), ...(tx.outputs as Json[])].filter((party) => party.isMine).map((party) => party.address);
      return new Set(own).size > 1;
    });
  });

  it('answers 404 {success: false, message: "no transfer found"} to an unknown transfer', async () => {
    const sequenceId = 'found-0001';
    await send(ctx.sim, ctx.bearer, sequenceId, 310);
    for (const [lookup, walletId] of [
      [{ sequenceId: 'never-sent' }, 310],
      [{ txId: `0x${'0'.repeat(64)}` }, 310],
      [{ sequenceId }, 999],
    ] as const) {
      const res = await getTransfer(ctx.sim, lookup, walletId);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ success: false, message: 'no transfer found' });
    }
    expect(await transfersOf(ctx.sim, { sequenceId })).toHaveLength(1);
  });

  it('mixes receive and older-format records into an answer that is not narrowed, none matching a transfer', async () => {
    const ids = sequenceIds('mixed');
    await sendAll(ids, 320);
    const views = ids.map((sequenceId) => ctx.sim.transfer(sequenceId)!);
    // narrowed (the default): the transfer alone, whose record id is noted
    const transferIds = new Set<string>();
    for (const sequenceId of ids) {
      const list = await transfersOf(ctx.sim, { sequenceId }, 320);
      expect(list).toHaveLength(1);
      transferIds.add(ownRecord(list, sequenceId).id as string);
    }

    ctx.sim.updateSettings({ narrowResults: false });
    const others: Json[] = [];
    let answersWithOthers = 0;
    for (const sequenceId of ids) {
      const list = await transfersOf(ctx.sim, { sequenceId }, 320);
      ownRecord(list, sequenceId);
      const recordIds = list.map((tx) => tx.id);
      expect(new Set(recordIds).size, 'record ids in one answer are distinct').toBe(recordIds.length);
      const dates = list.map((tx) => Date.parse(tx.date as string));
      expect(dates, 'newest first').toEqual([...dates].sort((a, b) => b - a));
      const mixedIn = list.filter((tx) => !transferIds.has(tx.id as string));
      if (mixedIn.length > 0) answersWithOthers += 1;
      others.push(...mixedIn);
      expect(await transfersOf(ctx.sim, { sequenceId }, 320), 'the same answer from poll to poll').toEqual(list);
    }
    expect(answersWithOthers).toBeGreaterThan(0);
    expect(answersWithOthers).toBeLessThan(ids.length);
    expectSome(others, 'receive records', (tx) => tx.type === 'receive');
    expectSome(others, 'older-format records: no inputs, value a number', (tx) => !hasKey(tx, 'inputs') && typeof tx.value === 'number');
    for (const tx of others) {
      expect(tx.id).toMatch(/^\d+$/);
      expect(tx).not.toHaveProperty('sequenceId');
      for (const out of (tx.outputs as Json[]) ?? []) {
        for (const view of views) {
          const sameAddress = String(out.address).toLowerCase() === view.destinationAddress;
          expect(sameAddress && Number(out.amount) === Number(view.amount)).toBe(false);
        }
      }
    }
  });
});

describe('get wallet transaction under the realistic profile (2.5)', () => {
  it('varies runningbalance, explorerLink, numeric text, the counterparty and extra keys, keeping txid', async () => {
    const ids = sequenceIds('wallet-tx');
    await sendAll(ids, 312);
    const results: Json[] = [];
    for (const sequenceId of ids) {
      const { txid } = ctx.sim.transfer(sequenceId)!;
      const res = await fetch(`${ctx.sim.url}/api/wallet/312/txid/${txid}`, { headers: { authorization: `Bearer ${ctx.bearer}` } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { result: Json };
      expect(Object.keys(body)).toEqual(['result']);
      expect(body.result.txid).toBe(txid);
      expect(Number.isInteger(body.result.id)).toBe(true);
      results.push(body.result);
    }
    expectVaries(results, 'runningbalance absent', (result) => !hasKey(result, 'runningbalance'));
    expectVaries(results, 'explorerLink null', (result) => result.explorerLink === null);
    expectVaries(results, 'walletid as text', (result) => result.walletid === '312');
    expectVaries(results, 'externaladdress a marker word', (result) => result.externaladdress === 'external');
    expectVaries(results, 'wallet balanceUSD null', (result) => (result.wallet as Json).balanceUSD === null);
    expectVaries(results, 'nested extra keys', (result) => hasKey(result.wallet, 'meta') || hasKey(result, 'meta'));

    const unknown = await fetch(`${ctx.sim.url}/api/wallet/312/txid/0x${'1'.repeat(64)}`, {
      headers: { authorization: `Bearer ${ctx.bearer}` },
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ success: false, message: 'transaction not found' });
  });
});

describe('is-enabled and the token under the realistic profile', () => {
  async function isEnabled(): Promise<Json> {
    const res = await postJson(`${ctx.sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(ctx.sim) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Json;
    expect(body.success).toBe(true);
    return body.data as Json;
  }

  it('varies 2.6 (dataJson null, updatedBy null, outgoingTxnTimeout absent, numeric text, extra keys), keeping the gate typed', async () => {
    const answers: Json[] = [];
    for (let i = 0; i < TRANSFERS; i++) answers.push(await isEnabled());
    for (const data of answers) {
      expect(data.outgoingTxn).toBe(0);
      expect(data.mandatory).toBe(false);
      expect(data.blockTxn).toBe(false);
    }
    expectVaries(answers, 'dataJson null', (data) => data.dataJson === null);
    expectVaries(answers, 'dataJson with extra keys', (data) => hasKey(data.dataJson, 'dateOfBirth'));
    expectVaries(answers, 'updatedBy null', (data) => data.updatedBy === null);
    expectVaries(answers, 'outgoingTxnTimeout absent', (data) => !hasKey(data, 'outgoingTxnTimeout'));
    expectVaries(answers, 'appId as text', (data) => data.appId === '1187');
    expectVaries(answers, 'extra keys', (data) => hasKey(data, 'createdBy') || hasKey(data, 'meta') || hasKey(data, '_links'));

    ctx.sim.updateSettings({ travelRule: { outgoingTxn: 1, mandatory: true, blockTxn: true } });
    for (let i = 0; i < 10; i++) {
      expect(await isEnabled()).toMatchObject({ outgoingTxn: 1, mandatory: true, blockTxn: true });
    }
  });

  it('varies the token answer (expires_in as text, token_type "bearer"), every token usable', async () => {
    const answers: Json[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await postJson(`${ctx.sim.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: ctx.sim.clientId,
        client_secret: ctx.sim.clientSecret,
      });
      expect(res.status).toBe(200);
      answers.push((await res.json()) as Json);
    }
    expectVaries(answers, 'expires_in "3600"', (body) => body.expires_in === '3600');
    expectVaries(answers, 'token_type "bearer"', (body) => body.token_type === 'bearer');
    expectVaries(answers, 'extra keys', (body) => hasKey(body, 'scope'));
    for (const [index, body] of answers.entries()) {
      expect(typeof body.access_token).toBe('string');
      expect(['3600', 3600]).toContain(body.expires_in);
      expect((await send(ctx.sim, body.access_token as string, `token-${index}`)).status).toBe(200);
    }
  });
});

describe('a fixed amount (large amounts)', () => {
  it.each(['spec', 'realistic'] as const)(
    'is written into the %s 2.4 body as its exact digits and into 2.1 as decimal text',
    async (profile) => {
      ctx.sim.updateSettings({ profile, fixedAmount: '12345678901234.567891' });
      const sequenceId = `big-${profile}`;
      const res = await send(ctx.sim, ctx.bearer, sequenceId);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toMatch(/"amount":12345678901234\.567891[,}]/);
      expect(typeof (JSON.parse(text) as Json).amount).toBe('number');

      const view = ctx.sim.transfer(sequenceId)!;
      expect(view.amount).toBe('12345678901234.56789100');
      const tx = ownRecord(await transfersOf(ctx.sim, { sequenceId }), sequenceId);
      const external = (tx.outputs as Json[]).find((out) => !out.isMine)!;
      expect(external.amount).toBe('12345678901234.56789100');
      if (profile === 'spec') {
        // value = -(amount + fee), exactly
        const units = (decimal: string) => BigInt(decimal.replace('.', ''));
        expect(units(tx.value as string)).toBe(-(units(external.amount as string) + units(tx.feeString as string)));
      }
    },
  );

  it('keeps more than 8 fractional digits where the amount has them', async () => {
    ctx.sim.updateSettings({ fixedAmount: '12.345678901234567891' });
    const sequenceId = 'big-fraction';
    const text = await (await send(ctx.sim, ctx.bearer, sequenceId)).text();
    expect(text).toMatch(/"amount":12\.345678901234567891[,}]/);
    const tx = (await transfersOf(ctx.sim, { sequenceId }))[0]!;
    expect((tx.outputs as Json[]).find((out) => !out.isMine)!.amount).toBe('12.345678901234567891');
    expect(tx.feeString).toMatch(/^\d+\.\d{18}$/);

    // back to amounts derived from txHex
    ctx.sim.updateSettings({ fixedAmount: null });
    expect((await send(ctx.sim, ctx.bearer, 'big-off')).status).toBe(200);
    expect(ctx.sim.transfer('big-off')!.amount).toMatch(UNSIGNED_8);
    expect(ctx.sim.transfer(sequenceId)!.amount).toBe('12.345678901234567891');
  });

  it.each([['1e5'], ['-1'], ['0'], ['0.000'], ['01.5'], ['1.'], [1.5], ['12345678901234567.1'], ['1.1234567890123456789']])(
    'refuses fixedAmount %j',
    (value) => {
      expect(() => ctx.sim.updateSettings({ fixedAmount: value as string })).toThrow(/fixedAmount/);
    },
  );
});

describe('choosing the profile', () => {
  it('is taken from the start options, switched at runtime by PATCH or PUT /_sim/settings, and reset to the start option', async () => {
    const settings = async () => (await (await fetch(`${ctx.sim.url}/_sim/settings`)).json()) as Json;
    expect((await settings()).profile).toBe('realistic');
    for (const method of ['PATCH', 'PUT']) {
      const res = await fetch(`${ctx.sim.url}/_sim/settings`, {
        method,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ profile: 'spec' }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).profile).toBe('spec');
      expect((await settings()).profile).toBe('spec');
      ctx.sim.updateSettings({ profile: 'realistic' });
    }
    const bad = await fetch(`${ctx.sim.url}/_sim/settings`, { method: 'PATCH', body: JSON.stringify({ profile: 'lenient' }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as Json).message).toMatch(/^profile: must be spec or realistic/);

    ctx.sim.updateSettings({ profile: 'spec' });
    await fetch(`${ctx.sim.url}/_sim/reset`, { method: 'POST' });
    expect(ctx.sim.settings().profile).toBe('realistic');
  });

  it('spec at runtime answers as documented again', async () => {
    ctx.sim.updateSettings({ profile: 'spec' });
    const sequenceId = 'spec-again';
    expect((await getTransfer(ctx.sim, { sequenceId })).status).toBe(200);
    expect(await transfersOf(ctx.sim, { sequenceId })).toEqual([]);
    const record = (await (await send(ctx.sim, ctx.bearer, sequenceId)).json()) as Json;
    expect(Object.keys(record)).toHaveLength(14);
    const [tx] = await transfersOf(ctx.sim, { sequenceId });
    expect(Object.keys(tx!)).toHaveLength(16);
    expect(tx!.DestinationTag).toBeNull();
    expect(tx!.wallet).toBe(310);
    const answer = (await (
      await postJson(`${ctx.sim.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: ctx.sim.clientId,
        client_secret: ctx.sim.clientSecret,
      })
    ).json()) as Json;
    expect(answer).toEqual({ access_token: expect.any(String), expires_in: 3600, token_type: 'Bearer' });
    expect(await token(ctx.sim)).toEqual(expect.any(String));
  });

  it('SIM_PROFILE sets it for npm run simulator, refusing other values by name', () => {
    expect(readSimulatorEnv({})).toMatchObject({ ok: true, options: { settings: {} } });
    expect(readSimulatorEnv({ SIM_PROFILE: 'realistic' })).toMatchObject({ ok: true, options: { settings: { profile: 'realistic' } } });
    expect(readSimulatorEnv({ SIM_PROFILE: 'spec' })).toMatchObject({ ok: true, options: { settings: { profile: 'spec' } } });
    expect(readSimulatorEnv({ SIM_PROFILE: 'chaotic' })).toEqual({
      ok: false,
      problems: ['SIM_PROFILE: must be spec or realistic (got "chaotic")'],
    });
  });
});
