import { loadConfig } from '../config/config.ts';
import { SEQUENCE_ID } from '../../packages/producer/src/payload.ts';
import { RequestBudget } from '../custody/budget.ts';
import { LookupNarrowing } from '../custody/lookup-narrowing.ts';
import type { CustodyPort } from '../custody/port.ts';
import { createCustodyPort, custodySecrets } from '../custody/provider.ts';
import { createKeys } from '../ledger/keys.ts';
import type { OperationsCustody } from '../operations/operations.ts';
import type { RedisClient } from '../redis.ts';
import { sendDeadlineMs, sendLeaseMs } from '../timing.ts';
import { stringOption, type OptionValues } from './command.ts';
import { usageError } from './errors.ts';
import type { Output } from './output.ts';

/*
 * Argument rules of the custody commands. The client refuses the same values before any request
 * (CUSTODY_INVALID_REQUEST); checking them here makes a malformed argument a usage error (exit 2)
 * that names the option, and no configuration or connection is needed to say so.
 */
const WALLET_ID = /^\d{1,20}$/;
/** BitGo's wallet ids (its adapter checks the form again, for the provider configured). */
const BITGO_WALLET_ID = /^(?=[0-9]*[a-f])[0-9a-f]{32}$/;
const COIN = /^[a-z0-9._-]{1,32}$/;
/** The client's txid rule: one plain token, starting alphanumeric (never `.`, `..`, a slash or a percent). */
const TXID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$/;

export const custodyOptions = {
  wallet: { type: 'string' },
  coin: { type: 'string' },
  'sequence-id': { type: 'string' },
  txid: { type: 'string' },
} as const;

function required(values: OptionValues, name: string): string {
  const value = stringOption(values, name);
  if (value === undefined) throw usageError(`--${name} is required`);
  return value;
}

export function walletArgument(values: OptionValues): string {
  const wallet = required(values, 'wallet');
  if (BITGO_WALLET_ID.test(wallet)) return wallet;
  if (!WALLET_ID.test(wallet) || !Number.isSafeInteger(Number(wallet))) {
    throw usageError('--wallet must be a wallet id: digits (CUSTODY_PROVIDER=wallet-service) or 32 lowercase hex (bitgo)');
  }
  return wallet;
}

export function coinArgument(values: OptionValues): string {
  const coin = required(values, 'coin');
  if (!COIN.test(coin)) throw usageError('--coin must be a lowercase asset code: 1-32 of a-z 0-9 . _ -');
  return coin;
}

export function txidArgument(values: OptionValues, name = 'txid'): string {
  const txid = required(values, name);
  if (!TXID.test(txid)) throw usageError(`--${name} must be one token of letters, digits and . _ : - starting with a letter or digit`);
  return txid;
}

export function sequenceIdArgument(values: OptionValues): string {
  const sequenceId = required(values, 'sequence-id');
  if (!SEQUENCE_ID.test(sequenceId)) throw usageError('--sequence-id must be 1-128 of A-Z a-z 0-9 _ -');
  return sequenceId;
}

/**
 * Runs `work` with the custody port built from the worker's configuration (loadConfig: the CUSTODY_*
 * variables) by the worker's own factory (custody/provider.ts), and closes its connections afterwards.
 * The secrets are registered with the output first, so not even an unexpected message can print them.
 */
export async function withCustody<T>(env: NodeJS.ProcessEnv, out: Output, work: (client: CustodyPort) => Promise<T>): Promise<T> {
  const { custody } = loadConfig(env);
  out.addSecrets(...custodySecrets(custody));
  // No shared rate limiter (CUSTODY_MAX_RPS): an operator's single lookup should not need Redis.
  const client = createCustodyPort(custody);
  try {
    return await work(client);
  } finally {
    await client.close();
  }
}

/**
 * Runs `work` with the custody provider as an operator action's provider check uses it (Operations:
 * resolve), built as the worker builds its own: behind the worker's request budget in Redis
 * (CUSTODY_MAX_RPS, and the pause a provider's 429 imposed), so an operator's lookup never spends
 * more than the workers leave, and with the worker's record of whether the provider narrows its
 * lookups (LookupNarrowing); and the worker's send timing (CUSTODY_TIMEOUT).
 */
export async function withOperatorCustody<T>(
  env: NodeJS.ProcessEnv,
  out: Output,
  redis: RedisClient,
  work: (custody: OperationsCustody) => Promise<T>,
): Promise<T> {
  const config = loadConfig(env);
  out.addSecrets(...custodySecrets(config.custody));
  const keys = createKeys(config.queue.prefix, config.queue.eventsStream);
  const budget = new RequestBudget(redis, keys.rateLimit, config.custody.maxRps);
  const port = createCustodyPort(config.custody, {
    budget: { budget },
    narrowing: new LookupNarrowing(redis, (wallet) => keys.lookupNarrowing(wallet.walletId, wallet.coin)),
  });
  try {
    return await work({ port, leaseMs: sendLeaseMs(config.custody.timeoutMs), deadlineMs: sendDeadlineMs(config.custody.timeoutMs) });
  } finally {
    await port.close();
  }
}
