/**
 * The BitGo provider (docs/bitgo-api.md): CUSTODY_PROVIDER=bitgo. Its variables are BITGO_BASE_URL and
 * BITGO_ACCESS_TOKEN (and BITGO_WEBHOOK_SECRET for its webhook, webhook.ts); the shared tuning (CUSTODY_TIMEOUT, …) is config.ts's.
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
    BITGO_WEBHOOK_SECRET: z.preprocess((v) => (v === '' ? undefined : v), z.string().min(16, 'must be at least 16 characters').optional()),
  }),
  docs: {
    BITGO_BASE_URL: {
      default: 'required with `bitgo`',
      meaning:
        "BitGo's origin (http(s), no query string; a trailing `/` is dropped); requests go to `<BITGO_BASE_URL>/api/v2/<coin>/wallet/<walletId>/…`",
    },
    BITGO_ACCESS_TOKEN: { default: 'required with `bitgo`', meaning: "BitGo's access token, sent as a bearer token" },
    BITGO_WEBHOOK_SECRET: {
      default: 'unset: no webhook route',
      meaning:
        "the secret of BitGo's `transfer` webhook: with it, `POST /providers/bitgo/webhook` takes calls whose `x-signature-sha256` is the hex HMAC-SHA256 of the body with it, and polls the transfer they name now (a wake-up, never the truth; docs/providers.md)",
    },
  },
  // The origin, without a trailing slash, so that `${baseUrl}/api/v2/...` has one.
  settings: (env) => ({
    baseUrl: env.BITGO_BASE_URL.replace(/\/+$/, ''),
    accessToken: env.BITGO_ACCESS_TOKEN,
    // Absent unless set: the settings hold only what was configured.
    ...(env.BITGO_WEBHOOK_SECRET === undefined ? {} : { webhookSecret: env.BITGO_WEBHOOK_SECRET }),
  }),
  secrets: (settings) => [settings.accessToken, ...(settings.webhookSecret === undefined ? [] : [settings.webhookSecret])],
  wakeups: true,
  haltedStates: BITGO_HALTED_STATES,
  create: (settings, shared, options) => new BitgoClient({ ...shared, ...settings, onSkippedRecords: options.onSkippedRecords }),
});
