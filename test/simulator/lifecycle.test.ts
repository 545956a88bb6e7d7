import { describe, expect, it } from 'vitest';
import { getTransfer, newSequenceId, send, sleep, transfersOf, useSimulator } from './sim-client.ts';
import { until } from '../helpers/wait.ts';

const ctx = useSimulator();

describe('a transfer moves through its life on the configured delays', () => {
  it('draws per-transfer random extra delays within the configured jitter', async () => {
    ctx.sim.updateSettings({ visibleAfterMs: 1_000, visibleJitterMs: 2_000, txidAfterMs: 500, txidJitterMs: 3_000 });
    const views = [];
    for (let i = 0; i < 20; i++) {
      const sequenceId = newSequenceId();
      expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
      views.push(ctx.sim.transfer(sequenceId)!);
    }
    const visibleDelays = views.map((v) => Date.parse(v.visibleAt) - Date.parse(v.acceptedAt));
    const txidDelays = views.map((v) => Date.parse(v.txidAt) - Date.parse(v.visibleAt));
    expect(Math.min(...visibleDelays)).toBeGreaterThanOrEqual(1_000);
    expect(Math.max(...visibleDelays)).toBeLessThanOrEqual(3_000);
    expect(Math.min(...txidDelays)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...txidDelays)).toBeLessThanOrEqual(3_500);
    // 20 draws from 2,001 and 3,001 values: all equal would mean no jitter at all.
    expect(new Set(visibleDelays).size).toBeGreaterThan(1);
    expect(new Set(txidDelays).size).toBeGreaterThan(1);
  });

  it('is invisible, then visible with txid "", then carries a txid', async () => {
    // Wide gaps between the phases, and polls rather than sleeps, so a slow machine cannot skip one.
    ctx.sim.updateSettings({ visibleAfterMs: 500, txidAfterMs: 1_500 });
    const sequenceId = newSequenceId();
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);

    expect(await transfersOf(ctx.sim, { sequenceId })).toEqual([]);
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ visible: false, txid: '' });

    const visible = await until('visible', 5_000, async () => {
      const found = await transfersOf(ctx.sim, { sequenceId });
      return found.length > 0 ? found : undefined;
    });
    expect(visible).toHaveLength(1);
    expect(visible[0]!.txid).toBe('');
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ visible: true, txid: '' });

    const done = await until('a txid', 5_000, async () => {
      const found = await transfersOf(ctx.sim, { sequenceId });
      return found[0]?.txid ? found : undefined;
    });
    expect(done[0]!.txid).toMatch(/^0x[0-9a-f]{64}$/);
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ visible: true, txid: done[0]!.txid });
    // the 2.1 id and date do not change as the transfer ages
    expect(done[0]!.id).toBe(visible[0]!.id);
    expect(done[0]!.date).toBe(visible[0]!.date);
  });

  it('keeps the delays fixed at acceptance: a later settings change does not move it', async () => {
    ctx.sim.updateSettings({ visibleAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId);
    ctx.sim.updateSettings({ visibleAfterMs: 0 });
    expect(await transfersOf(ctx.sim, { sequenceId })).toEqual([]);
  });

  it('shows a txid forced with setTxid at once, also to the txid lookups', async () => {
    ctx.sim.updateSettings({ visibleAfterMs: 60_000, txidAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId, 410);
    const txid = `0x${'ab'.repeat(32)}`;
    ctx.sim.setTxid(sequenceId, txid);
    const [tx] = await transfersOf(ctx.sim, { sequenceId }, 410);
    expect(tx!.txid).toBe(txid);
    expect(await transfersOf(ctx.sim, { txId: txid }, 410)).toEqual([tx]);
    const res = await fetch(`${ctx.sim.url}/api/wallet/410/txid/${txid}`, { headers: { authorization: `Bearer ${ctx.bearer}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { result: { txid: string } }).result.txid).toBe(txid);

    const other = newSequenceId();
    await send(ctx.sim, ctx.bearer, other, 410);
    ctx.sim.setTxid(other);
    expect((await transfersOf(ctx.sim, { sequenceId: other }, 410))[0]!.txid).toMatch(/^0x[0-9a-f]{64}$/);
    expect(() => ctx.sim.setTxid('never-sent')).toThrow(/unknown sequenceId/);
  });
});

describe('duplicate sends', () => {
  it('refuses a second send of an accepted sequenceId with 409 and counts both', async () => {
    const sequenceId = newSequenceId();
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
    const second = await send(ctx.sim, ctx.bearer, sequenceId);
    expect(second.status).toBe(409);
    const body = (await second.json()) as Record<string, unknown>;
    expect(body.success).toBe(false);
    expect(typeof body.message).toBe('string');
    expect((await send(ctx.sim, ctx.bearer, sequenceId, 311)).status).toBe(409);

    const stats = ctx.sim.stats();
    expect(stats.sends[sequenceId]).toEqual({ accepted: 1, duplicates: 2 });
    expect(stats.transfers).toBe(1);
    expect(stats.requests.sendTransaction).toEqual({ '200': 1, '409': 2 });
    expect(await transfersOf(ctx.sim, { sequenceId })).toHaveLength(1);
  });

  it('refuses all but one of concurrent sends of one sequenceId', async () => {
    const sequenceId = newSequenceId();
    const statuses = await Promise.all(Array.from({ length: 20 }, () => send(ctx.sim, ctx.bearer, sequenceId).then((r) => r.status)));
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(19);
    expect(ctx.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 19 });
  });

  it('accepts and counts every send when rejectDuplicates is off, like a provider without dedupe', async () => {
    ctx.sim.updateSettings({ rejectDuplicates: false });
    const sequenceId = newSequenceId();
    const first = (await (await send(ctx.sim, ctx.bearer, sequenceId)).json()) as { id: number };
    const second = await send(ctx.sim, ctx.bearer, sequenceId);
    expect(second.status).toBe(200);
    expect(((await second.json()) as { id: number }).id).not.toBe(first.id);
    const stats = ctx.sim.stats();
    expect(stats.sends[sequenceId]).toEqual({ accepted: 2, duplicates: 0 });
    expect(stats.transfers).toBe(2);
    // both transfers exist upstream now: a double spend a client can see
    const listed = await transfersOf(ctx.sim, { sequenceId });
    expect(listed).toHaveLength(2);
    expect(listed[0]!.txid).not.toBe(listed[1]!.txid);
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ accepted: 2 });
  });
});

describe('narrowResults', () => {
  it("off: a lookup also returns the wallet's other transfers of that coin, newest first", async () => {
    ctx.sim.updateSettings({ narrowResults: false });
    const sequenceIds: string[] = [];
    for (let index = 0; index < 3; index += 1) {
      const sequenceId = newSequenceId();
      sequenceIds.push(sequenceId);
      await send(ctx.sim, ctx.bearer, sequenceId, 520);
      await sleep(5);
    }
    await send(ctx.sim, ctx.bearer, newSequenceId(), 521);
    const [oldest] = sequenceIds;
    const listed = await transfersOf(ctx.sim, { sequenceId: oldest! }, 520);
    expect(listed).toHaveLength(3);
    const dates = listed.map((tx) => Date.parse(tx.date as string));
    expect(dates).toEqual([...dates].sort((a, b) => b - a));
    expect(dates[0]).toBeGreaterThan(dates[2]!);
    expect(listed.every((tx) => tx.wallet === 520)).toBe(true);
    const mine = ctx.sim.transfer(oldest!) as { txid: string };
    expect(listed[2]!.txid).toBe(mine.txid);

    const byTxid = await transfersOf(ctx.sim, { txId: mine.txid }, 520);
    expect(byTxid.map((tx) => tx.txid)).toEqual(listed.map((tx) => tx.txid));
    // an unknown key still answers []
    expect(await transfersOf(ctx.sim, { sequenceId: 'unknown' }, 520)).toEqual([]);
  });

  it('off with otherTransfersListed: at most that many of the newest others', async () => {
    ctx.sim.updateSettings({ narrowResults: false, otherTransfersListed: 2 });
    const sequenceIds: string[] = [];
    for (let index = 0; index < 4; index += 1) {
      const sequenceId = newSequenceId();
      sequenceIds.push(sequenceId);
      await send(ctx.sim, ctx.bearer, sequenceId, 522);
      await sleep(5);
    }
    const txidOf = (sequenceId: string) => (ctx.sim.transfer(sequenceId) as { txid: string }).txid;
    const listed = await transfersOf(ctx.sim, { sequenceId: sequenceIds[0]! }, 522);
    expect(listed.map((tx) => tx.txid)).toEqual([sequenceIds[3]!, sequenceIds[2]!, sequenceIds[0]!].map(txidOf));
    ctx.sim.updateSettings({ otherTransfersListed: 0 });
    expect((await transfersOf(ctx.sim, { sequenceId: sequenceIds[0]! }, 522)).map((tx) => tx.txid)).toEqual([txidOf(sequenceIds[0]!)]);
  });

  it('on (default): only the matching transfer', async () => {
    const first = newSequenceId();
    await send(ctx.sim, ctx.bearer, first, 530);
    await send(ctx.sim, ctx.bearer, newSequenceId(), 530);
    const listed = await transfersOf(ctx.sim, { sequenceId: first }, 530);
    expect(listed).toHaveLength(1);
  });
});

describe('mixedCaseAddresses', () => {
  it('spells get-transfer addresses in another letter case than the send record', async () => {
    const sequenceId = newSequenceId();
    const record = (await (await send(ctx.sim, ctx.bearer, sequenceId)).json()) as { destinationAddress: string };
    const plain = await transfersOf(ctx.sim, { sequenceId });
    const plainOut = (plain[0]!.outputs as Array<{ address: string; isMine: boolean }>).find((o) => !o.isMine)!;
    expect(plainOut.address).toBe(record.destinationAddress);

    ctx.sim.updateSettings({ mixedCaseAddresses: true });
    const mixed = await transfersOf(ctx.sim, { sequenceId });
    const mixedOut = (mixed[0]!.outputs as Array<{ address: string; isMine: boolean }>).find((o) => !o.isMine)!;
    expect(mixedOut.address).not.toBe(record.destinationAddress);
    expect(mixedOut.address.toLowerCase()).toBe(record.destinationAddress.toLowerCase());
    expect(mixedOut.address).toMatch(/[A-F]/);
  });
});

describe('the coin', () => {
  it('is the one the get-transfer lookup names, as sendTransaction carries none', async () => {
    const sequenceId = newSequenceId();
    await send(ctx.sim, ctx.bearer, sequenceId, 540);
    const res = await getTransfer(ctx.sim, { sequenceId }, 540, 'usdc');
    const [tx] = (await res.json()) as Array<{ coin: string; inputs: Array<{ wallet: { coin: string } }> }>;
    expect(tx!.coin).toBe('usdc');
    expect(tx!.inputs[0]!.wallet.coin).toBe('usdc');
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ coin: 'usdc' });
  });
});
