/**
 * src/custody/provider.ts as CUSTODY_PROVIDER chooses: wallet-service builds its client (which gates on the
 * travel rule), bitgo builds the BitGo adapter (which does not), and the secrets the CLI redacts are the
 * chosen provider's.
 */
import { describe, expect, it } from 'vitest';
import { CONFIG_DOCS, CONFIG_VARIABLES, CUSTODY_PROVIDERS, loadConfig } from '../../src/config/config.ts';
import { createCustodyPort, custodySecrets } from '../../src/custody/provider.ts';
import { PROVIDERS } from '../../src/custody/providers.ts';

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
  it('builds the wallet-service client for wallet-service: it gates, and takes integer wallet ids', async () => {
    const port = createCustodyPort(walletService.custody);
    expect(typeof port.getTravelRuleSetting).toBe('function');
    expect(port.walletProblem({ walletId: 310, coin: 'eth' })).toBeUndefined();
    expect(port.walletProblem({ walletId: '0123456789abcdef0123456789abcdef', coin: 'eth' })).toMatch(/positive integer/);
    await port.close();
  });

  it('builds the BitGo adapter for bitgo: no gate, 32-hex wallet ids', async () => {
    const port = createCustodyPort(bitgo.custody, { metrics: () => undefined });
    expect(port.getTravelRuleSetting).toBeUndefined();
    expect(port.walletProblem({ walletId: '0123456789abcdef0123456789abcdef', coin: 'tbtc' })).toBeUndefined();
    expect(port.walletProblem({ walletId: 310, coin: 'tbtc' })).toMatch(/32 lowercase hex/);
    await port.close();
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

describe('the provider registry (src/custody/providers.ts)', () => {
  it('names each provider once, wallet-service first (the default)', () => {
    expect(CUSTODY_PROVIDERS).toEqual(['wallet-service', 'bitgo']);
    expect(new Set(PROVIDERS.map((provider) => provider.name)).size).toBe(PROVIDERS.length);
  });

  it('gives each provider variables of its own, every one read and documented by config.ts', () => {
    const variables = PROVIDERS.flatMap((provider) => Object.keys(provider.env.shape));
    expect(new Set(variables).size).toBe(variables.length);
    for (const provider of PROVIDERS) expect(Object.keys(provider.docs).sort()).toEqual(Object.keys(provider.env.shape).sort());
    expect(CONFIG_VARIABLES).toEqual(expect.arrayContaining(variables));
    for (const name of variables) expect(CONFIG_DOCS[name as keyof typeof CONFIG_DOCS]).toBeDefined();
  });
});
