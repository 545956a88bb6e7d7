import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { SIM_ENDPOINTS } from '../../src/simulator/settings.ts';
import { basicOf, newSequenceId, postJson, send, token, transfersOf } from './sim-client.ts';

let sim: Simulator;
let bearer: string;

beforeAll(async () => {
  sim = await startSimulator({ port: 0, settings: { visibleAfterMs: 0, latencyMs: { token: 0 } } });
});
afterAll(async () => {
  await sim.close();
});
beforeEach(async () => {
  sim.reset();
  // a test below expires every token
  bearer = await token(sim);
  sim.reset();
});

// The control API answers JSON of many shapes; each test reads the fields it checks.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function control(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  const res = await fetch(`${sim.url}/_sim/${path}`, init);
  return { status: res.status, body: await res.json() };
}

describe('/_sim control API', () => {
  it('GET stats reports requests by endpoint and status, sends and transfers', async () => {
    const sequenceId = newSequenceId();
    await send(sim, bearer, sequenceId);
    await send(sim, bearer, sequenceId);
    const { status, body } = await control('GET', 'stats');
    expect(status).toBe(200);
    expect(body).toEqual({
      requests: {
        token: {},
        getTransfer: {},
        sendTransaction: { '200': 1, '409': 1 },
        getWalletTransaction: {},
        isEnabled: {},
      },
      sends: { [sequenceId]: { accepted: 1, duplicates: 1 } },
      transfers: 1,
    });
    expect(sim.requestCount()).toBe(2);
  });

  it('GET and PATCH settings deep-merge a partial, refusing bad input with 400', async () => {
    const before = await control('GET', 'settings');
    expect(before.body).toEqual(sim.settings());
    expect(before.body.narrowResults).toBe(true);

    const patched = await control('PATCH', 'settings', { travelRule: { outgoingTxn: 1 }, latencyMs: { getTransfer: 5 } });
    expect(patched.status).toBe(200);
    expect(patched.body.travelRule.outgoingTxn).toBe(1);
    expect(patched.body.travelRule.mandatory).toBe(false);
    expect(patched.body.travelRule.dataJson.type).toBe('natural');
    expect(patched.body.latencyMs).toEqual({ token: 0, getTransfer: 5, sendTransaction: 0, getWalletTransaction: 0, isEnabled: 0 });
    expect(sim.settings().travelRule.outgoingTxn).toBe(1);

    for (const [bad, field] of [
      [{ visibleAfterMs: -1 }, 'visibleAfterMs'],
      [{ narrowResults: 'no' }, 'narrowResults'],
      [{ otherTransfersListed: -1 }, 'otherTransfersListed'],
      [{ otherTransfersListed: 1.5 }, 'otherTransfersListed'],
      [{ travelRule: { outgoingTxn: 1.5 } }, 'travelRule.outgoingTxn'],
      [{ unknownThing: 1 }, 'unknownThing'],
      [{ latencyMs: { nope: 1 } }, 'latencyMs.nope'],
      ['[1,2]', 'settings'],
      ['{oops', 'JSON'],
    ] as const) {
      const res = await control('PATCH', 'settings', bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body.message).toContain(field);
    }
    // a refused patch changed nothing
    expect(sim.settings().visibleAfterMs).toBe(0);
    expect(sim.settings().narrowResults).toBe(true);
  });

  it('PUT faults/:endpoint sets a plan, null clears it, DELETE faults clears all', async () => {
    const set = await control('PUT', 'faults/isEnabled', { sequence: ['5xx', '5xx'] });
    expect(set).toEqual({ status: 200, body: { endpoint: 'isEnabled', plan: { sequence: ['5xx', '5xx'] } } });
    const isEnabled = () => postJson(`${sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(sim) });
    expect((await isEnabled()).status).toBe(503);
    expect((await control('PUT', 'faults/isEnabled', 'null')).status).toBe(200);
    expect((await isEnabled()).status).toBe(200);

    await control('PUT', 'faults/isEnabled', { probability: 1, kinds: ['429'] });
    await control('PUT', 'faults/token', { probability: 1, kinds: ['5xx'] });
    expect((await isEnabled()).status).toBe(429);
    expect((await control('DELETE', 'faults')).status).toBe(200);
    expect((await isEnabled()).status).toBe(200);
    expect(await token(sim)).toEqual(expect.any(String));

    expect((await control('PUT', 'faults/bogus', { sequence: ['5xx'] })).status).toBe(400);
    expect((await control('PUT', 'faults/token', { sequence: ['fire'] })).status).toBe(400);
    expect((await control('PUT', 'faults/token', { probability: 'high' })).status).toBe(400);
    expect((await control('PUT', 'faults/token')).status).toBe(400);
  });

  it('PUT and DELETE faults/<unknown> answer 400 naming every valid endpoint', async () => {
    for (const method of ['PUT', 'DELETE']) {
      const answer = await control(method, 'faults/bogus', { sequence: ['5xx'] });
      expect(answer.status).toBe(400);
      expect(answer.body.message).toContain('unknown endpoint: bogus');
      const missing = SIM_ENDPOINTS.filter((endpoint) => !new RegExp(`\\b${endpoint}\\b`).test(answer.body.message as string));
      expect(missing, answer.body.message as string).toEqual([]);
    }
    expect(await control('GET', 'faults')).toEqual({ status: 200, body: {} });
  });

  it("GET transfers/:sequenceId shows the simulator's view, 404 when unknown", async () => {
    sim.updateSettings({ visibleAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    const record = (await (await send(sim, bearer, sequenceId, 777)).json()) as Record<string, unknown>;
    const view = await control('GET', `transfers/${encodeURIComponent(sequenceId)}`);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ sequenceId, walletId: 777, visible: false, txid: '', accepted: 1, record });
    expect((await control('GET', 'transfers/never-sent')).status).toBe(404);
  });

  it('POST transfers/:sequenceId/txid forces the txid, optionally a given one', async () => {
    sim.updateSettings({ visibleAfterMs: 60_000, txidAfterMs: 60_000 });
    const sequenceId = newSequenceId();
    await send(sim, bearer, sequenceId);
    const drawn = await control('POST', `transfers/${sequenceId}/txid`);
    expect(drawn.status).toBe(200);
    expect(drawn.body.txid).toMatch(/^0x[0-9a-f]{64}$/);
    expect((await transfersOf(sim, { sequenceId }))[0]!.txid).toBe(drawn.body.txid);

    const txid = `0x${'cd'.repeat(32)}`;
    const given = await control('POST', `transfers/${sequenceId}/txid`, { txid });
    expect(given.body.txid).toBe(txid);
    expect((await transfersOf(sim, { sequenceId }))[0]!.txid).toBe(txid);

    expect((await control('POST', `transfers/${sequenceId}/txid`, { txid: 5 })).status).toBe(400);
    expect((await control('POST', 'transfers/never-sent/txid', {})).status).toBe(404);
  });

  it('POST tokens/expire makes the next bearer call 401', async () => {
    const own = await token(sim);
    expect((await control('POST', 'tokens/expire')).status).toBe(200);
    expect((await send(sim, own, newSequenceId())).status).toBe(401);
  });

  it('POST reset clears transfers, counters, faults and settings back to the start options', async () => {
    const sequenceId = newSequenceId();
    await send(sim, bearer, sequenceId);
    await control('PATCH', 'settings', { mixedCaseAddresses: true });
    await control('PUT', 'faults/getTransfer', { probability: 1, kinds: ['5xx'] });
    expect((await control('POST', 'reset')).status).toBe(200);
    expect(sim.transfer(sequenceId)).toBeUndefined();
    expect(sim.stats().transfers).toBe(0);
    expect(sim.stats().sends).toEqual({});
    expect(sim.requestCount()).toBe(0);
    expect(sim.settings().mixedCaseAddresses).toBe(false);
    expect(await transfersOf(sim, { sequenceId })).toEqual([]);
    // the same sequenceId is new again
    expect((await send(sim, bearer, sequenceId)).status).toBe(200);
  });

  it('answers 404 to an unknown control route and is not counted as upstream traffic', async () => {
    expect((await control('GET', 'nothing-here')).status).toBe(404);
    expect(sim.requestCount()).toBe(0);
  });
});
