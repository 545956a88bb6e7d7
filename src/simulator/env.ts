/**
 * The environment of `npm run simulator`, parsed once. Every problem is reported (one line each,
 * naming the variable) rather than the first only; secrets are never echoed.
 */
import { DURATION_GRAMMAR, parseDuration } from '../config/duration.ts';
import { DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, DEFAULT_HOST, DEFAULT_PORT, SIM_PROFILES } from './settings.ts';
import type { DeepPartial, SimProfile, SimulatorOptions, SimulatorSettings } from './settings.ts';
import { DEFAULT_BITGO_ACCESS_TOKEN } from './bitgo/settings.ts';
import { DEFAULT_BITGO_WEBHOOK_SECRET } from './bitgo/webhooks.ts';
import type { BitgoSettings, BitgoSimulatorOptions } from './bitgo/settings.ts';

/** Which provider the simulator plays: the wallet-service API (docs/upstream-api.md) or BitGo's (docs/bitgo-api.md). */
export type SimProvider = 'wallet-service' | 'bitgo';
export const SIM_PROVIDERS: readonly SimProvider[] = ['wallet-service', 'bitgo'];

export type SimulatorEnv =
  { ok: true; provider: SimProvider; options: SimulatorOptions; bitgo: BitgoSimulatorOptions } | { ok: false; problems: string[] };

/** The simulator's durations are timer delays: at most what setTimeout can wait (about 24.8 days). */
export const MAX_DELAY_MS = 2_147_483_647;
const DELAY = `a duration (${DURATION_GRAMMAR}) of at most ${MAX_DELAY_MS} ms`;

/** The worker's duration grammar (src/config/duration.ts), within a timer's range. */
function durationMs(text: string): number | undefined {
  const ms = parseDuration(text);
  return ms !== undefined && ms <= MAX_DELAY_MS ? ms : undefined;
}

function bool(text: string): boolean | undefined {
  const lower = text.toLowerCase();
  if (lower === 'true' || lower === '1' || lower === 'yes') return true;
  if (lower === 'false' || lower === '0' || lower === 'no') return false;
  return undefined;
}

/** The provider named by `--provider <name>` (or `--provider=<name>`), else by SIMULATOR_PROVIDER. */
function providerText(argv: readonly string[], env: NodeJS.ProcessEnv): { name: string; text: string } | undefined {
  for (const [index, arg] of argv.entries()) {
    if (arg === '--provider') return { name: '--provider', text: argv[index + 1] ?? '' };
    if (arg.startsWith('--provider=')) return { name: '--provider', text: arg.slice('--provider='.length) };
  }
  const text = env.SIMULATOR_PROVIDER?.trim();
  return text ? { name: 'SIMULATOR_PROVIDER', text } : undefined;
}

/** `argv`: the arguments after the script (only `--provider` is read). */
export function readSimulatorEnv(env: NodeJS.ProcessEnv, argv: readonly string[] = []): SimulatorEnv {
  const problems: string[] = [];
  const named = providerText(argv, env);
  const provider = named === undefined ? 'wallet-service' : SIM_PROVIDERS.find((name) => name === named.text.toLowerCase());
  if (named !== undefined && provider === undefined) {
    problems.push(`${named.name}: must be ${SIM_PROVIDERS.join(' or ')} (got ${JSON.stringify(named.text)})`);
  }
  const value = (name: string): string | undefined => {
    const text = env[name]?.trim();
    return text === undefined || text === '' ? undefined : text;
  };
  const check = <T>(name: string, parse: (text: string) => T | undefined, what: string): T | undefined => {
    const text = value(name);
    if (text === undefined) return undefined;
    const parsed = parse(text);
    if (parsed === undefined) problems.push(`${name}: must be ${what} (got ${JSON.stringify(text)})`);
    return parsed;
  };

  const port = check(
    'SIMULATOR_PORT',
    (text) => (/^\d+$/.test(text) && Number(text) <= 65_535 ? Number(text) : undefined),
    'an integer from 0 to 65535',
  );
  const settings: DeepPartial<SimulatorSettings> = {};
  const visibleAfterMs = check('SIM_VISIBLE_AFTER', durationMs, DELAY);
  if (visibleAfterMs !== undefined) settings.visibleAfterMs = visibleAfterMs;
  const txidAfterMs = check('SIM_TXID_AFTER', durationMs, DELAY);
  if (txidAfterMs !== undefined) settings.txidAfterMs = txidAfterMs;
  const visibleJitterMs = check('SIM_VISIBLE_JITTER', durationMs, DELAY);
  if (visibleJitterMs !== undefined) settings.visibleJitterMs = visibleJitterMs;
  const txidJitterMs = check('SIM_TXID_JITTER', durationMs, DELAY);
  if (txidJitterMs !== undefined) settings.txidJitterMs = txidJitterMs;
  const tokenLifetimeSec = check(
    'SIM_TOKEN_LIFETIME',
    (text) => (/^\d+$/.test(text) && Number(text) <= 2_000_000 ? Number(text) : undefined),
    'a whole number of seconds',
  );
  if (tokenLifetimeSec !== undefined) settings.tokenLifetimeSec = tokenLifetimeSec;
  const narrowResults = check('SIM_NARROW_RESULTS', bool, 'true or false');
  if (narrowResults !== undefined) settings.narrowResults = narrowResults;
  const mixedCase = check('SIM_MIXED_CASE', bool, 'true or false');
  if (mixedCase !== undefined) settings.mixedCaseAddresses = mixedCase;
  const profile = check('SIM_PROFILE', (text) => SIM_PROFILES.find((name) => name === text.toLowerCase()), SIM_PROFILES.join(' or '));
  if (profile !== undefined) settings.profile = profile satisfies SimProfile;
  const outgoingTxn = check('SIM_TRAVEL_RULE_OUTGOING', (text) => (text === '0' || text === '1' ? Number(text) : undefined), '0 or 1');
  const mandatory = check('SIM_TRAVEL_RULE_MANDATORY', bool, 'true or false');
  if (outgoingTxn !== undefined || mandatory !== undefined) {
    settings.travelRule = {};
    if (outgoingTxn !== undefined) settings.travelRule.outgoingTxn = outgoingTxn;
    if (mandatory !== undefined) settings.travelRule.mandatory = mandatory;
  }

  const bitgo: Partial<BitgoSettings> = {};
  const approvalAfterMs = check('SIM_APPROVAL_AFTER', durationMs, DELAY);
  if (approvalAfterMs !== undefined) bitgo.approvalAfterMs = approvalAfterMs;
  if (txidAfterMs !== undefined) bitgo.txidAfterMs = txidAfterMs;

  if (problems.length > 0 || provider === undefined) return { ok: false, problems };
  return {
    ok: true,
    provider,
    bitgo: {
      host: value('SIMULATOR_HOST') ?? DEFAULT_HOST,
      port: port ?? DEFAULT_PORT,
      // taken as given (not trimmed), as the credentials below
      accessToken: env.SIM_BITGO_ACCESS_TOKEN || DEFAULT_BITGO_ACCESS_TOKEN,
      webhookSecret: env.SIM_BITGO_WEBHOOK_SECRET || DEFAULT_BITGO_WEBHOOK_SECRET,
      settings: bitgo,
    },
    options: {
      host: value('SIMULATOR_HOST') ?? DEFAULT_HOST,
      port: port ?? DEFAULT_PORT,
      // credentials are taken as given (not trimmed): they must match the worker's byte for byte
      clientId: env.CUSTODY_CLIENT_ID || DEFAULT_CLIENT_ID,
      clientSecret: env.CUSTODY_CLIENT_SECRET || DEFAULT_CLIENT_SECRET,
      settings,
    },
  };
}
