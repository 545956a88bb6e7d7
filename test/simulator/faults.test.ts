import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import type { Simulator } from '../../src/simulator/index.ts';
import { basicOf, getTransfer, newSequenceId, postJson, send, token, transfersOf } from './sim-client.ts';

let sim: Simulator;
let bearer: string;

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
  bearer = await token(sim);
});
afterAll(async () => {
  await sim.close();
});
beforeEach(() => {
  sim.reset();
});

function isEnabled(): Promise<Response> {
  return postJson(`${sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(sim) });
}

describe('fault kinds', () => {
  it('5xx answers 503 {success:false} and a send hit by it is not recorded', async () => {
    sim.setFault('sendTransaction', { sequence: ['5xx'] });
    const sequenceId = newSequenceId();
    const res = await send(sim, bearer, sequenceId);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ success: false, message: expect.any(String) });
    expect(sim.transfer(sequenceId)).toBeUndefined();
    expect(sim.stats().sends[sequenceId]).toBeUndefined();
    // the sequence is used up: the retry goes through
    expect((await send(sim, bearer, sequenceId)).status).toBe(200);
    expect(sim.stats().requests.sendTransaction).toEqual({ '200': 1, '503': 1 });
  });

  it('429 answers with Retry-After from retryAfterSec', async () => {
    sim.updateSettings({ retryAfterSec: 7 });
    sim.setFault('isEnabled', { sequence: ['429'] });
    const res = await isEnabled();
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(((await res.json()) as { success: boolean }).success).toBe(false);
  });

  it('timeout processes the send but never answers', async () => {
    sim.setFault('sendTransaction', { sequence: ['timeout'] });
    const sequenceId = newSequenceId();
    const started = Date.now();
    const error = await send(sim, bearer, sequenceId, 310, AbortSignal.timeout(300)).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe('TimeoutError');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(sim.transfer(sequenceId)).toMatchObject({ sequenceId, walletId: 310 });
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect(sim.stats().requests.sendTransaction).toEqual({ timeout: 1 });
    // the client's retry meets the duplicate check
    expect((await send(sim, bearer, sequenceId)).status).toBe(409);
  });

  it('reset destroys the socket and does not process the send', async () => {
    sim.setFault('sendTransaction', { sequence: ['reset'] });
    const sequenceId = newSequenceId();
    await expect(send(sim, bearer, sequenceId)).rejects.toThrow();
    expect(sim.transfer(sequenceId)).toBeUndefined();
    expect(sim.stats().requests.sendTransaction).toEqual({ reset: 1 });
    expect((await send(sim, bearer, sequenceId)).status).toBe(200);
  });

  it('malformed answers 200 with a body that is not JSON', async () => {
    sim.setFault('getTransfer', { sequence: ['malformed'] });
    const res = await getTransfer(sim, { sequenceId: 'x' });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(0);
    expect(() => JSON.parse(text)).toThrow();
  });

  it('schema answers 200 JSON that breaks spec section 2', async () => {
    sim.setFault('getTransfer', { sequence: ['schema'] });
    const res = await getTransfer(sim, { sequenceId: 'x' });
    expect(res.status).toBe(200);
    const [tx] = (await res.json()) as Array<Record<string, unknown>>;
    expect(typeof tx!.value).toBe('number'); // spec: string
    expect(typeof tx!.id).toBe('number'); // spec: numeric text

    sim.setFault('sendTransaction', { sequence: ['schema'] });
    const sequenceId = newSequenceId();
    const sent = (await (await send(sim, bearer, sequenceId)).json()) as Record<string, unknown>;
    expect(typeof sent.amount).toBe('string'); // spec: number
    expect(sent.sequenceId).not.toBe(sequenceId);
    expect(sim.transfer(sequenceId)).toBeUndefined();
  });

  it('401 answers 401 even to a valid credential', async () => {
    sim.setFault('getWalletTransaction', { sequence: ['401'] });
    const res = await fetch(`${sim.url}/api/wallet/310/txid/0xabc`, { headers: { authorization: `Bearer ${bearer}` } });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ success: false, message: 'unauthorized' });
    sim.setFault('token', { sequence: ['401'] });
    await expect(token(sim)).rejects.toThrow(/401/);
  });

  it('success-false answers 200 {success:false} and does not process the send', async () => {
    sim.setFault('sendTransaction', { sequence: ['success-false'] });
    const sequenceId = newSequenceId();
    const res = await send(sim, bearer, sequenceId);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: false, message: expect.any(String) });
    expect(sim.transfer(sequenceId)).toBeUndefined();
  });
});

describe('fault plans', () => {
  it('consume a sequence one entry per request, "ok" answering normally, then answer normally', async () => {
    sim.setFault('isEnabled', { sequence: ['5xx', 'ok', '429'] });
    const statuses: number[] = [];
    for (let index = 0; index < 5; index += 1) statuses.push((await isEnabled()).status);
    expect(statuses).toEqual([503, 200, 429, 200, 200]);
  });

  it('fail every request at probability 1 and none at probability 0', async () => {
    sim.setFault('token', { probability: 1, kinds: ['5xx', '429'] });
    const statuses = new Set<number>();
    for (let index = 0; index < 20; index += 1) {
      const res = await postJson(`${sim.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: sim.clientId,
        client_secret: sim.clientSecret,
      });
      statuses.add(res.status);
    }
    expect([...statuses].sort()).toEqual([429, 503]);
    sim.setFault('token', { probability: 0, kinds: ['5xx'] });
    expect(await token(sim)).toEqual(expect.any(String));
  });

  it('are per endpoint, and null clears one', async () => {
    sim.setFault('getTransfer', { probability: 1, kinds: ['5xx'] });
    expect((await isEnabled()).status).toBe(200);
    expect((await getTransfer(sim, { sequenceId: 'x' })).status).toBe(503);
    sim.setFault('getTransfer', null);
    expect(await transfersOf(sim, { sequenceId: 'x' })).toEqual([]);
  });

  it('refuse bad plans', () => {
    expect(() => sim.setFault('token', { probability: 2, kinds: ['5xx'] })).toThrow(/probability/);
    expect(() => sim.setFault('token', { kinds: ['boom' as never] })).toThrow(/kinds/);
    expect(() => sim.setFault('token', { sequence: ['later' as never] })).toThrow(/sequence/);
    expect(() => sim.setFault('nope' as never, null)).toThrow(/endpoint/);
  });
});

describe('latency', () => {
  it('delays the answers of one endpoint only', async () => {
    sim.updateSettings({ latencyMs: { isEnabled: 150 } });
    let started = Date.now();
    expect((await isEnabled()).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    started = Date.now();
    await getTransfer(sim, { sequenceId: 'x' });
    expect(Date.now() - started).toBeLessThan(140);
  });

  it('has the send recorded before the answer, so a client giving up early still sent it', async () => {
    sim.updateSettings({ latencyMs: { sendTransaction: 1_000 } });
    const sequenceId = newSequenceId();
    await expect(send(sim, bearer, sequenceId, 310, AbortSignal.timeout(100))).rejects.toThrow();
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});

describe('close', () => {
  it('destroys sockets held by timeout faults and resolves', async () => {
    const own = await startSimulator({ port: 0 });
    own.setFault('isEnabled', { sequence: ['timeout'] });
    const hanging = postJson(`${own.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(own) });
    const settled = hanging.then(
      () => 'answered',
      () => 'failed',
    );
    while (own.stats().requests.isEnabled.timeout !== 1) await new Promise((resolve) => setTimeout(resolve, 5));
    const started = Date.now();
    await own.close();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await settled).toBe('failed');
  });
});
