import { CustodyClient, type CustodyClientOptions } from '../../src/custody/wallet-service/client.ts';
import type { SimulatorAddress } from '../../src/simulator/worker-env.ts';

/** A CustodyClient for the simulator's one origin with its credentials (token endpoint included). */
export function simulatorClient(sim: SimulatorAddress, overrides: Partial<CustodyClientOptions> = {}): CustodyClient {
  return new CustodyClient({
    sdkUrl: sim.url,
    baseUrl: sim.url,
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    tokenUrl: `${sim.url}/oauth/token`,
    timeoutMs: 2_000,
    connectTimeoutMs: 1_000,
    connections: 2,
    ...overrides,
  });
}
