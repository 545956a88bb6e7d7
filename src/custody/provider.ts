/**
 * The one place a custody provider is built: its adapter from the CUSTODY_* configuration, decorated
 * with the request budget, the metrics and the tracing (decorators.ts). The worker (src/app.ts) and the
 * CLI (src/cli/custody.ts) get their CustodyPort here; a second provider is one more line here.
 * Domain code never imports this file: it is given a CustodyPort (ESLint).
 */
import type { Config } from '../config/config.ts';
import { decorate, type Decorations } from './decorators.ts';
import type { CustodyPort } from './port.ts';
import { basicAuthorization } from './http/auth.ts';
import { CustodyClient, type CustodyClientOptions } from './wallet-service/client.ts';

export type { SkippedRecord } from './wallet-service/schemas.ts';

export type CustodyConfig = Config['custody'];

export interface CustodyPortOptions extends Decorations {
  /** wallet-service: records of a list answer that fail the schema were skipped (client.ts). */
  onSkippedRecords?: CustodyClientOptions['onSkippedRecords'];
}

/** The configured provider behind the port, with those of the budget, metrics and tracing given. */
export function createCustodyPort(config: CustodyConfig, options: CustodyPortOptions = {}): CustodyPort {
  const adapter = new CustodyClient({ ...config, onSkippedRecords: options.onSkippedRecords });
  return decorate(adapter, options);
}

/** What the provider's configuration holds that must never be printed, as it could appear (the CLI redacts these). */
export function custodySecrets(config: CustodyConfig): Array<string | undefined> {
  return [config.clientSecret, config.accessToken, basicAuthorization(config.clientId, config.clientSecret).replace(/^Basic /, '')];
}
