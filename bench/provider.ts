/**
 * Which custody provider a benchmark measures (`SCALE_PROVIDER`, `BUDGET_PROVIDER`): the first one
 * (wallet-service, the default) or BitGo. What differs for the load generator: the simulator started
 * (bench/processes.ts), the payloads' wallet and coin, and the name under which the simulator counts
 * the tracking polls.
 */
import type { CustodyProviderName } from '../src/config/config.ts';
import { samplePayload, type ValidSamplePayload } from '../tools/sample-payloads.ts';

export const BENCH_PROVIDERS = ['wallet-service', 'bitgo'] as const satisfies readonly CustodyProviderName[];
export type BenchProvider = (typeof BENCH_PROVIDERS)[number];

/** `env[variable]`: unset or empty is wallet-service; anything but a provider's name throws, naming the variable. */
export function readBenchProvider(variable: string, env: NodeJS.ProcessEnv = process.env): BenchProvider {
  const text = env[variable]?.trim() ?? '';
  if (text === '') return 'wallet-service';
  const provider = BENCH_PROVIDERS.find((name) => name === text.toLowerCase());
  if (provider === undefined) throw new Error(`${variable}: must be ${BENCH_PROVIDERS.join(' or ')}, got ${JSON.stringify(text)}`);
  return provider;
}

/**
 * The wallet every benchmark transfer goes to. BitGo's is 32 lowercase hex with at least one letter
 * (a text of digits only would be read as the first provider's integer form).
 */
export const BENCH_WALLET: Record<BenchProvider, { walletId: number | string; coin: string }> = {
  'wallet-service': { walletId: 310, coin: 'eth' },
  bitgo: { walletId: 'beec0de5'.repeat(4), coin: 'tbtc' },
};

/** The simulator's name (`/_sim/stats`) for a tracking poll: get-transfer, or BitGo's get-transfer-by-sequenceId. */
export const POLL_ENDPOINT: Record<BenchProvider, string> = {
  'wallet-service': 'getTransfer',
  bitgo: 'transferBySequenceId',
};

/** A valid `submit-transaction` payload for `provider` (wallet-service: exactly `samplePayload()`). */
export function benchPayload(provider: BenchProvider, sequenceId?: string): ValidSamplePayload {
  const ids = sequenceId === undefined ? {} : { sequenceId };
  if (provider === 'wallet-service') return samplePayload(ids);
  const { walletId, coin } = BENCH_WALLET.bitgo;
  return samplePayload({ ...ids, walletId, coin });
}
