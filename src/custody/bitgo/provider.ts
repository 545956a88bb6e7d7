/**
 * The BitGo provider (docs/bitgo-api.md): CUSTODY_PROVIDER=bitgo. Its variables are BITGO_BASE_URL and
 * BITGO_ACCESS_TOKEN; the shared tuning (CUSTODY_TIMEOUT, …) is config.ts's.
 */
import { z } from 'zod';
import { httpUrl, requiredSecret } from '../../config/validators.ts';
import { defineCustodyProvider } from '../provider-kind.ts';
import { BITGO_HALTED_STATES, BitgoClient } from './client.ts';

export const bitgoProvider = defineCustodyProvider({
  name: 'bitgo',
  env: z.object({
    BITGO_BASE_URL: httpUrl('an http(s) URL'),
    BITGO_ACCESS_TOKEN: requiredSecret(),
  }),
  docs: {
    BITGO_BASE_URL: {
      default: 'required with `bitgo`',
      meaning:
        "BitGo's origin (http(s), no query string; a trailing `/` is dropped); requests go to `<BITGO_BASE_URL>/api/v2/<coin>/wallet/<walletId>/…`",
    },
    BITGO_ACCESS_TOKEN: { default: 'required with `bitgo`', meaning: "BitGo's access token, sent as a bearer token" },
  },
  // The origin, without a trailing slash, so that `${baseUrl}/api/v2/...` has one.
  settings: (env) => ({ baseUrl: env.BITGO_BASE_URL.replace(/\/+$/, ''), accessToken: env.BITGO_ACCESS_TOKEN }),
  secrets: (settings) => [settings.accessToken],
  haltedStates: BITGO_HALTED_STATES,
  create: (settings, shared, options) => new BitgoClient({ ...shared, ...settings, onSkippedRecords: options.onSkippedRecords }),
});
