/**
 * The one place a custody provider is built: the adapter CUSTODY_PROVIDER names (wallet-service from
 * the CUSTODY_* configuration, bitgo from BITGO_*), decorated with the request budget, the metrics and
 * the tracing (decorators.ts). The worker (src/app.ts) and the CLI (src/cli/custody.ts) get their
 * CustodyPort here; a provider is one more case here.
 * Domain code never imports this file: it is given a CustodyPort (ESLint).
 */
import type { Config } from '../config/config.ts';
import { decorate, type Decorations } from './decorators.ts';
import type { CustodyPort } from './port.ts';
import { basicAuthorization } from './http/auth.ts';
import { CustodyClient, type CustodyClientOptions } from './wallet-service/client.ts';
import { BitgoClient } from './bitgo/client.ts';

export type { SkippedRecord } from './wallet-service/schemas.ts';

export type CustodyConfig = Config['custody'];

export interface CustodyPortOptions extends Decorations {
  /** wallet-service: records of a list answer that fail the schema were skipped (client.ts). */
  onSkippedRecords?: CustodyClientOptions['onSkippedRecords'];
}

/** The configured provider behind the port, with those of the budget, metrics and tracing given. */
export function createCustodyPort(config: CustodyConfig, options: CustodyPortOptions = {}): CustodyPort {
  return decorate(createAdapter(config, options), options);
}

/** The adapter CUSTODY_PROVIDER names, undecorated. */
function createAdapter(config: CustodyConfig, options: CustodyPortOptions): CustodyPort {
  switch (config.provider) {
    case 'wallet-service':
      return new CustodyClient({ ...config, onSkippedRecords: options.onSkippedRecords });
    case 'bitgo':
      return new BitgoClient({ ...config, ...config.bitgo! });
  }
}

/** What the provider's configuration holds that must never be printed, as it could appear (the CLI redacts these). */
export function custodySecrets(config: CustodyConfig): Array<string | undefined> {
  switch (config.provider) {
    case 'wallet-service':
      return [config.clientSecret, config.accessToken, basicAuthorization(config.clientId, config.clientSecret).replace(/^Basic /, '')];
    case 'bitgo':
      return [config.bitgo?.accessToken];
  }
}
