/**
 * The environment of `npm run simulator`, parsed once. Every problem is reported (one line each,
 * naming the variable) rather than the first only; secrets are never echoed.
 */
import { DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, DEFAULT_HOST, DEFAULT_PORT, SIM_PROFILES } from './settings.ts';
import type { DeepPartial, SimProfile, SimulatorOptions, SimulatorSettings } from './settings.ts';

export type SimulatorEnv = { ok: true; options: SimulatorOptions } | { ok: false; problems: string[] };

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/;
const MAX_DELAY_MS = 2_147_483_647;

function durationMs(text: string): number | undefined {
  const match = DURATION.exec(text);
  if (!match) return undefined;
  const [, amount = '', unit] = match;
  if (unit === undefined && amount.includes('.')) return undefined;
  const ms = Math.round(Number(amount) * (UNIT_MS[unit ?? 'ms'] ?? 1));
  return ms <= MAX_DELAY_MS ? ms : undefined;
}

function bool(text: string): boolean | undefined {
  const lower = text.toLowerCase();
  if (lower === 'true' || lower === '1' || lower === 'yes') return true;
  if (lower === 'false' || lower === '0' || lower === 'no') return false;
  return undefined;
}

export function readSimulatorEnv(env: NodeJS.ProcessEnv): SimulatorEnv {
  const problems: string[] = [];
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
  const visibleAfterMs = check('SIM_VISIBLE_AFTER', durationMs, 'a duration in ms (e.g. 1500, 2s)');
  if (visibleAfterMs !== undefined) settings.visibleAfterMs = visibleAfterMs;
  const txidAfterMs = check('SIM_TXID_AFTER', durationMs, 'a duration in ms (e.g. 1500, 2s)');
  if (txidAfterMs !== undefined) settings.txidAfterMs = txidAfterMs;
  const visibleJitterMs = check('SIM_VISIBLE_JITTER', durationMs, 'a duration in ms (e.g. 500, 1s)');
  if (visibleJitterMs !== undefined) settings.visibleJitterMs = visibleJitterMs;
  const txidJitterMs = check('SIM_TXID_JITTER', durationMs, 'a duration in ms (e.g. 500, 1s)');
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
  const profile = check(
    'SIM_PROFILE',
    (text) => SIM_PROFILES.find((name) => name === text.toLowerCase()),
    SIM_PROFILES.join(' or '),
  );
  if (profile !== undefined) settings.profile = profile satisfies SimProfile;
  const outgoingTxn = check(
    'SIM_TRAVEL_RULE_OUTGOING',
    (text) => (text === '0' || text === '1' ? Number(text) : undefined),
    '0 or 1',
  );
  const mandatory = check('SIM_TRAVEL_RULE_MANDATORY', bool, 'true or false');
  if (outgoingTxn !== undefined || mandatory !== undefined) {
    settings.travelRule = {};
    if (outgoingTxn !== undefined) settings.travelRule.outgoingTxn = outgoingTxn;
    if (mandatory !== undefined) settings.travelRule.mandatory = mandatory;
  }

  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
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
