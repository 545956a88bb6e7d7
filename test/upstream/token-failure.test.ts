/**
 * A bearer call whose token request fails never reached its endpoint: whatever the token endpoint did
 * (no answer, a dropped connection, an unreadable body), the error must not say "maybe processed", or a
 * sendTransaction that never left would be handled as a send that may have gone out.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type FaultKind, type Simulator } from '../../src/simulator/index.ts';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { CustodyErrorCode } from '../../src/custody/errors.ts';
import { newSequenceId, sampleSend } from '../../tools/sample-payloads.ts';
import { failure } from '../helpers/custody-error.ts';

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

function client(): CustodyClient {
  const c = new CustodyClient({
    sdkUrl: sim.url,
    baseUrl: sim.url,
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    tokenUrl: `${sim.url}/oauth/token`,
    timeoutMs: 300,
    connectTimeoutMs: 1_000,
    connections: 4,
  });
  clients.push(c);
  return c;
}

describe('a send whose token request fails', () => {
  const cases: Array<[FaultKind, string]> = [
    ['timeout', CustodyErrorCode.TIMEOUT],
    ['reset', CustodyErrorCode.UNAVAILABLE],
    ['malformed', CustodyErrorCode.BAD_RESPONSE],
    ['schema', CustodyErrorCode.BAD_RESPONSE],
  ];
  for (const [kind, code] of cases) {
    it(`token ${kind} → ${code} from the token endpoint, not "maybe processed", and nothing sent`, async () => {
      sim.setFault('token', { sequence: [kind] });
      const error = await failure(client().sendTransaction(310, sampleSend(newSequenceId())));
      expect(error.code).toBe(code);
      expect(error.endpoint).toBe('token');
      expect(error.retryable).toBe(true);
      expect(error.maybeProcessed).toBe(false);
      expect(sim.stats().requests.sendTransaction).toEqual({});
    });
  }

  it('is sent normally once the token endpoint answers again', async () => {
    sim.setFault('token', { sequence: ['malformed'] });
    const c = client();
    await failure(c.sendTransaction(310, sampleSend(newSequenceId())));
    const sequenceId = newSequenceId();
    expect((await c.sendTransaction(310, sampleSend(sequenceId))).sequenceId).toBe(sequenceId);
    expect(sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
  });
});
