/**
 * src/custody/provider.ts as CUSTODY_PROVIDER chooses: wallet-service builds the existing client, bitgo
 * is not wired yet (a clear error until its adapter lands), and the secrets the CLI redacts are the
 * chosen provider's.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { createCustodyPort, custodySecrets } from '../../src/custody/provider.ts';

const walletService = loadConfig({
  CUSTODY_SDK_URL: 'https://sdk.example.com',
  CUSTODY_BASE_URL: 'https://api.example.com',
  CUSTODY_CLIENT_ID: 'client-1',
  CUSTODY_CLIENT_SECRET: 'client-secret-value',
  CUSTODY_ACCESS_TOKEN: 'fixed-token-value',
});
const bitgo = loadConfig({
  CUSTODY_PROVIDER: 'bitgo',
  BITGO_BASE_URL: 'https://app.bitgo-test.com',
  BITGO_ACCESS_TOKEN: 'v2x-bitgo-token-value',
});

describe('createCustodyPort', () => {
  it('builds the wallet-service client for wallet-service', async () => {
    const port = createCustodyPort(walletService.custody);
    expect(typeof port.sendTransaction).toBe('function');
    await port.close();
  });

  it('refuses bitgo until its adapter is wired', () => {
    expect(() => createCustodyPort(bitgo.custody)).toThrow('CUSTODY_PROVIDER=bitgo: adapter not wired yet');
  });
});

describe('custodySecrets', () => {
  it("lists the chosen provider's secrets", () => {
    const secrets = custodySecrets(walletService.custody);
    expect(secrets).toContain('client-secret-value');
    expect(secrets).toContain('fixed-token-value');
    expect(custodySecrets(bitgo.custody)).toEqual(['v2x-bitgo-token-value']);
  });
});
