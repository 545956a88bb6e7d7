/**
 * The one place a custody provider is built: the adapter CUSTODY_PROVIDER names, looked up in
 * src/custody/providers.ts and made from its own settings (Config['custody'].settings), decorated with
 * the request budget, the metrics and the tracing (decorators.ts). The worker (src/app.ts) and the CLI
 * (src/cli/custody.ts) get their CustodyPort here; a provider is one more entry in providers.ts.
 * Domain code never imports this file: it is given a CustodyPort (ESLint).
 */
import type { Config } from '../config/config.ts';
import { decorate, type Decorations } from './decorators.ts';
import type { CustodyPort } from './port.ts';
import type { AdapterOptions, AnyCustodyProvider } from './provider-kind.ts';
import { PROVIDERS } from './providers.ts';

export type { SkippedRecord } from './port.ts';

export type CustodyConfig = Config['custody'];

export interface CustodyPortOptions extends Decorations, AdapterOptions {}

/** The configured provider behind the port, with those of the budget, metrics and tracing given. */
export function createCustodyPort(config: CustodyConfig, options: CustodyPortOptions = {}): CustodyPort {
  return decorate(createAdapter(config, options), options);
}

/** The descriptor of the provider the config was made for (loadConfig accepts no other name). */
function providerOf(config: CustodyConfig): AnyCustodyProvider {
  const provider = (PROVIDERS as readonly AnyCustodyProvider[]).find((candidate) => candidate.name === config.provider);
  if (!provider) throw new Error(`no custody provider named ${JSON.stringify(config.provider)} in src/custody/providers.ts`);
  return provider;
}

/** The adapter CUSTODY_PROVIDER names, undecorated. */
function createAdapter(config: CustodyConfig, options: CustodyPortOptions): CustodyPort {
  const { timeoutMs, connectTimeoutMs, connections, maxPauseMs } = config;
  return providerOf(config).create(
    config.settings as never,
    { timeoutMs, connectTimeoutMs, connections, maxPauseMs },
    { onSkippedRecords: options.onSkippedRecords, narrowing: options.narrowing },
  );
}

/** What the provider's configuration holds that must never be printed, as it could appear (the CLI redacts these). */
export function custodySecrets(config: CustodyConfig): Array<string | undefined> {
  return providerOf(config).secrets(config.settings as never);
}
