/**
 * `beforeWrite` (custody/port.ts, custody/http/transport.ts): a send's last check that its lease may still be live
 * runs where undici starts writing the request, not where the call was made. What it throws stops the
 * request unwritten and reaches the caller as it was thrown; the simulator, a real HTTP server, counts
 * what reached it.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';

let sim: Simulator;
const clients: CustodyClient[] = [];

beforeAll(async () => {
  sim = await startSimulator({ port: 0 });
});
afterEach(async () => {
  sim.reset();
  await Promise.all(clients.splice(0).map((c) => c.close()));
});
afterAll(async () => {
  await sim.close();
});

function client(connections: number): CustodyClient {
  const c = new CustodyClient({
    sdkUrl: sim.url,
    baseUrl: sim.url,
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    tokenUrl: `${sim.url}/oauth/token`,
    timeoutMs: 5_000,
    connectTimeoutMs: 1_000,
    connections,
  });
  clients.push(c);
  return c;
}

class Refused extends Error {}

describe('a send whose write guard refuses', () => {
  it('is not written: the call rejects with exactly what the guard threw, and upstream saw no send', async () => {
    const sequenceId = newSequenceId();
    const refusal = new Refused('lease may have ended');
    let written = 0;
    const call = client(4).sendTransaction(310, sampleSend(sequenceId), {
      onRequest: () => written++,
      beforeWrite: () => {
        throw refusal;
      },
    });
    await expect(call).rejects.toBe(refusal);
    expect(written).toBe(0);
    expect(sim.stats().sends[sequenceId]).toBeUndefined();
    expect(sim.stats().requests.sendTransaction).toEqual({});
  });

  it('is judged when its turn to be written comes, not when it was called (a busy connection)', async () => {
    sim.updateSettings({ latencyMs: { sendTransaction: 300 } });
    const c = client(1);
    const first = newSequenceId();
    const second = newSequenceId();
    // The token first, so that both sends queue on the one connection.
    await c.sendTransaction(310, sampleSend(newSequenceId()));
    let shut = false;
    const checks: boolean[] = [];
    const slow = c.sendTransaction(310, sampleSend(first));
    const queued = c.sendTransaction(310, sampleSend(second), {
      beforeWrite: () => {
        checks.push(shut);
        if (shut) throw new Refused('shut while queued');
      },
    });
    // Shut after the call was made, while the request waits for the connection.
    await new Promise((resolve) => setTimeout(resolve, 50));
    shut = true;
    await expect(slow).resolves.toMatchObject({ sequenceId: first });
    await expect(queued).rejects.toBeInstanceOf(Refused);
    expect(checks).toEqual([true]);
    expect(sim.stats().sends[second]).toBeUndefined();
    expect(sim.stats().sends[first]).toEqual({ accepted: 1, duplicates: 0 });
  });

  it('a guard that passes changes nothing: the send is written once and accepted', async () => {
    const sequenceId = newSequenceId();
    let checked = 0;
    await expect(client(4).sendTransaction(310, sampleSend(sequenceId), { beforeWrite: () => void checked++ })).resolves.toMatchObject({
      sequenceId,
    });
    expect(checked).toBe(1);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});
