/**
 * The custody providers the worker can talk to (CUSTODY_PROVIDER); the first is the default. Adding one
 * is a folder src/custody/<provider>/ whose provider.ts exports its descriptor (provider-kind.ts), plus
 * its import and its entry here: config.ts, the factory (provider.ts) and the docs take it from this list.
 */
import type { AnyCustodyProvider } from './provider-kind.ts';
import { walletServiceProvider } from './wallet-service/provider.ts';
import { bitgoProvider } from './bitgo/provider.ts';

export const PROVIDERS = [
  walletServiceProvider, // the default
  bitgoProvider,
] as const;

/**
 * Every state any provider's adapter can report a transfer halted in (ListedTransfer.halted), whichever
 * runs: the halted-transfer counter has a series at 0 for each from start-up.
 */
export function haltedStates(): string[] {
  return [...new Set(PROVIDERS.flatMap((provider: AnyCustodyProvider) => provider.haltedStates ?? []))];
}

/** The providers whose adapter can be woken by a webhook (port.ts, Wakeups): the webhook counter's series at 0 from start-up. */
export function wakeupProviders(): string[] {
  return PROVIDERS.filter((provider: AnyCustodyProvider) => provider.wakeups === true).map((provider) => provider.name);
}
