import { describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.ts';
import { basicOf, getTransfer, newSequenceId, postJson, send, token, transfersOf, useSimulator } from './sim-client.ts';

const ctx = useSimulator();

function isEnabled(): Promise<Response> {
  return postJson(`${ctx.sim.url}/api/travel-rule/is-enabled`, '', { authorization: basicOf(ctx.sim) });
}

describe('fault kinds', () => {
  it('5xx answers 503 {success:false} and a send hit by it is not recorded', async () => {
    ctx.sim.setFault('sendTransaction', { sequence: ['5xx'] });
    const sequenceId = newSequenceId();
    const res = await send(ctx.sim, ctx.bearer, sequenceId);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ success: false, message: expect.any(String) });
    expect(ctx.sim.transfer(sequenceId)).toBeUndefined();
    expect(ctx.sim.stats().sends[sequenceId]).toBeUndefined();
    // the sequence is used up: the retry goes through
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
    expect(ctx.sim.stats().requests.sendTransaction).toEqual({ '200': 1, '503': 1 });
  });

  it('429 answers with Retry-After from retryAfterSec', async () => {
    ctx.sim.updateSettings({ retryAfterSec: 7 });
    ctx.sim.setFault('isEnabled', { sequence: ['429'] });
    const res = await isEnabled();
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(((await res.json()) as { success: boolean }).success).toBe(false);
  });

  it('timeout processes the send but never answers', async () => {
    ctx.sim.setFault('sendTransaction', { sequence: ['timeout'] });
    const sequenceId = newSequenceId();
    const started = Date.now();
    const error = await send(ctx.sim, ctx.bearer, sequenceId, 310, AbortSignal.timeout(300)).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe('TimeoutError');
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(ctx.sim.transfer(sequenceId)).toMatchObject({ sequenceId, walletId: 310 });
    expect(ctx.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect(ctx.sim.stats().requests.sendTransaction).toEqual({ timeout: 1 });
    // the client's retry meets the duplicate check
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(409);
  });

  it('reset destroys the socket and does not process the send', async () => {
    ctx.sim.setFault('sendTransaction', { sequence: ['reset'] });
    const sequenceId = newSequenceId();
    await expect(send(ctx.sim, ctx.bearer, sequenceId)).rejects.toThrow();
    expect(ctx.sim.transfer(sequenceId)).toBeUndefined();
    expect(ctx.sim.stats().requests.sendTransaction).toEqual({ reset: 1 });
    expect((await send(ctx.sim, ctx.bearer, sequenceId)).status).toBe(200);
  });

  it('malformed answers 200 with a body that is not JSON', async () => {
    ctx.sim.setFault('getTransfer', { sequence: ['malformed'] });
    const res = await getTransfer(ctx.sim, { sequenceId: 'x' });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text.length).toBeGreaterThan(0);
    expect(() => JSON.parse(text)).toThrow();
  });

  it('schema answers 200 JSON that breaks docs/upstream-api.md section 2', async () => {
    ctx.sim.setFault('getTransfer', { sequence: ['schema'] });
    const res = await getTransfer(ctx.sim, { sequenceId: 'x' });
    expect(res.status).toBe(200);
    const [tx] = (await res.json()) as Array<Record<string, unknown>>;
    expect(typeof tx!.value).toBe('number'); // spec: string
    expect(typeof tx!.id).toBe('number'); // spec: numeric text

    ctx.sim.setFault('sendTransaction', { sequence: ['schema'] });
    const sequenceId = newSequenceId();
    const sent = (await (await send(ctx.sim, ctx.bearer, sequenceId)).json()) as Record<string, unknown>;
    expect(typeof sent.amount).toBe('string'); // spec: number
    expect(sent.sequenceId).not.toBe(sequenceId);
    expect(ctx.sim.transfer(sequenceId)).toBeUndefined();
  });

  it('401 answers 401 even to a valid credential', async () => {
    ctx.sim.setFault('getWalletTransaction', { sequence: ['401'] });
    const res = await fetch(`${ctx.sim.url}/api/wallet/310/txid/0xabc`, { headers: { authorization: `Bearer ${ctx.bearer}` } });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ success: false, message: 'unauthorized' });
    ctx.sim.setFault('token', { sequence: ['401'] });
    await expect(token(ctx.sim)).rejects.toThrow(/401/);
  });

  it('success-false answers 200 {success:false} and does not process the send', async () => {
    ctx.sim.setFault('sendTransaction', { sequence: ['success-false'] });
    const sequenceId = newSequenceId();
    const res = await send(ctx.sim, ctx.bearer, sequenceId);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ success: false, message: expect.any(String) });
    expect(ctx.sim.transfer(sequenceId)).toBeUndefined();
  });
});

describe('fault plans', () => {
  it('consume a sequence one entry per request, "ok" answering normally, then answer normally', async () => {
    ctx.sim.setFault('isEnabled', { sequence: ['5xx', 'ok', '429'] });
    const statuses: number[] = [];
    for (let index = 0; index < 5; index += 1) statuses.push((await isEnabled()).status);
    expect(statuses).toEqual([503, 200, 429, 200, 200]);
  });

  it('fail every request at probability 1 and none at probability 0', async () => {
    ctx.sim.setFault('token', { probability: 1, kinds: ['5xx', '429'] });
    const statuses = new Set<number>();
    for (let index = 0; index < 20; index += 1) {
      const res = await postJson(`${ctx.sim.url}/oauth/token`, {
        grant_type: 'client_credentials',
        client_id: ctx.sim.clientId,
        client_secret: ctx.sim.clientSecret,
      });
      statuses.add(res.status);
    }
    expect([...statuses].sort()).toEqual([429, 503]);
    ctx.sim.setFault('token', { probability: 0, kinds: ['5xx'] });
    expect(await token(ctx.sim)).toEqual(expect.any(String));
  });

  it('are per endpoint, and null clears one', async () => {
    ctx.sim.setFault('getTransfer', { probability: 1, kinds: ['5xx'] });
    expect((await isEnabled()).status).toBe(200);
    expect((await getTransfer(ctx.sim, { sequenceId: 'x' })).status).toBe(503);
    ctx.sim.setFault('getTransfer', null);
    expect(await transfersOf(ctx.sim, { sequenceId: 'x' })).toEqual([]);
  });

  it('refuse bad plans', () => {
    expect(() => ctx.sim.setFault('token', { probability: 2, kinds: ['5xx'] })).toThrow(/probability/);
    expect(() => ctx.sim.setFault('token', { kinds: ['boom' as never] })).toThrow(/kinds/);
    expect(() => ctx.sim.setFault('token', { sequence: ['later' as never] })).toThrow(/sequence/);
    expect(() => ctx.sim.setFault('nope' as never, null)).toThrow(/endpoint/);
  });
});

describe('latency', () => {
  it('delays the answers of one endpoint only', async () => {
    ctx.sim.updateSettings({ latencyMs: { isEnabled: 1_000 } });
    const started = Date.now();
    // Both at once: the undelayed one answers first, whatever the machine's load.
    const order: string[] = [];
    await Promise.all([
      isEnabled().then((res) => order.push(`isEnabled ${res.status}`)),
      getTransfer(ctx.sim, { sequenceId: 'x' }).then(() => order.push('getTransfer')),
    ]);
    expect(order).toEqual(['getTransfer', 'isEnabled 200']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
  });

  it('has the send recorded before the answer, so a client giving up early still sent it', async () => {
    ctx.sim.updateSettings({ latencyMs: { sendTransaction: 1_000 } });
    const sequenceId = newSequenceId();
    await expect(send(ctx.sim, ctx.bearer, sequenceId, 310, AbortSignal.timeout(100))).rejects.toThrow();
    expect(ctx.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
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
