/** Where a simulator can be reached and the client credentials it accepts. */
export interface SimulatorAddress {
  url: string;
  clientId: string;
  clientSecret: string;
}

/**
 * The worker's custody settings for a simulator (docs/contract.md section 6): both base URLs and the token
 * endpoint on its one origin, with the credentials it accepts. Nothing else is needed.
 */
export function workerCustodyEnv(sim: SimulatorAddress): Record<string, string> {
  return {
    CUSTODY_SDK_URL: sim.url,
    CUSTODY_BASE_URL: sim.url,
    CUSTODY_TOKEN_URL: `${sim.url}/oauth/token`,
    CUSTODY_CLIENT_ID: sim.clientId,
    CUSTODY_CLIENT_SECRET: sim.clientSecret,
  };
}

/** The worker's custody settings for the BitGo simulator: CUSTODY_PROVIDER=bitgo, its origin and its token. */
export function workerBitgoEnv(sim: { url: string; accessToken: string }): Record<string, string> {
  return { CUSTODY_PROVIDER: 'bitgo', BITGO_BASE_URL: sim.url, BITGO_ACCESS_TOKEN: sim.accessToken };
}
