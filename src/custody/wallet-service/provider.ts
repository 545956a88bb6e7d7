/**
 * The wallet-service provider (docs/upstream-api.md): CUSTODY_PROVIDER=wallet-service, the default.
 * Its variables are the CUSTODY_* ones below; the shared tuning (CUSTODY_TIMEOUT, …) is config.ts's.
 */
import { z } from 'zod';
import { httpUrl, optionalHttpUrl, requiredSecret, text } from '../../config/validators.ts';
import { basicAuthorization } from '../http/auth.ts';
import { defineCustodyProvider } from '../provider-kind.ts';
import { CustodyClient } from './client.ts';

export const walletServiceProvider = defineCustodyProvider({
  name: 'wallet-service',
  env: z.object({
    CUSTODY_SDK_URL: httpUrl('an http(s) URL'),
    CUSTODY_BASE_URL: httpUrl('an http(s) URL'),
    CUSTODY_CLIENT_ID: requiredSecret(),
    CUSTODY_CLIENT_SECRET: requiredSecret(),
    CUSTODY_TOKEN_URL: optionalHttpUrl(),
    CUSTODY_TOKEN_AUDIENCE: text(),
    CUSTODY_ACCESS_TOKEN: text(),
  }),
  docs: {
    CUSTODY_SDK_URL: { default: 'required with `wallet-service`', meaning: 'base of get-transfer and is-enabled (Basic auth)' },
    CUSTODY_BASE_URL: {
      default: 'required with `wallet-service`',
      meaning: 'base of sendTransaction and get-wallet-transaction (Bearer auth)',
    },
    CUSTODY_CLIENT_ID: { default: 'required with `wallet-service`', meaning: 'client credentials' },
    CUSTODY_CLIENT_SECRET: { default: 'required with `wallet-service`', meaning: 'client credentials' },
    CUSTODY_TOKEN_URL: { default: 'unset', meaning: 'OAuth2 client-credentials token endpoint' },
    CUSTODY_TOKEN_AUDIENCE: { default: 'unset', meaning: '`audience` of the token request' },
    CUSTODY_ACCESS_TOKEN: {
      default: 'unset',
      meaning: 'fixed bearer token instead of `CUSTODY_TOKEN_URL` (with `wallet-service`, one of the two is required)',
    },
  },
  check(env) {
    const set = (name: string) => env[name] !== undefined && env[name] !== '';
    return set('CUSTODY_TOKEN_URL') || set('CUSTODY_ACCESS_TOKEN')
      ? []
      : ['CUSTODY_TOKEN_URL: one of CUSTODY_TOKEN_URL or CUSTODY_ACCESS_TOKEN is required'];
  },
  settings: (env) => ({
    sdkUrl: env.CUSTODY_SDK_URL,
    baseUrl: env.CUSTODY_BASE_URL,
    clientId: env.CUSTODY_CLIENT_ID,
    clientSecret: env.CUSTODY_CLIENT_SECRET,
    tokenUrl: env.CUSTODY_TOKEN_URL,
    tokenAudience: env.CUSTODY_TOKEN_AUDIENCE,
    accessToken: env.CUSTODY_ACCESS_TOKEN,
  }),
  secrets: (settings) => [
    settings.clientSecret,
    settings.accessToken,
    basicAuthorization(settings.clientId, settings.clientSecret).replace(/^Basic /, ''),
  ],
  create: (settings, shared, options) =>
    new CustodyClient({ ...settings, ...shared, onSkippedRecords: options.onSkippedRecords, narrowing: options.narrowing }),
});
