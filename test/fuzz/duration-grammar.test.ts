/**
 * One duration grammar for the worker and the simulator (docs/contract.md section 2): random texts, near
 * misses included, read through the worker's config (RECONCILE_GRACE, whose range starts at 0) and
 * through the simulator's environment (SIM_TXID_JITTER, a timer delay): both accept exactly the same
 * texts and read the same milliseconds, except that the simulator also refuses what a timer cannot
 * wait (MAX_DELAY_MS), saying so by name.
 */
import fc from 'fast-check';
import './fc-seed.ts';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.ts';
import { parseDuration } from '../../src/config/duration.ts';
import { MAX_DELAY_MS, readSimulatorEnv } from '../../src/simulator/env.ts';

const BASE = {
  CUSTODY_SDK_URL: 'https://sdk.example.com/v1',
  CUSTODY_BASE_URL: 'https://api.example.com/v1',
  CUSTODY_CLIENT_ID: 'client',
  CUSTODY_CLIENT_SECRET: 'secret',
  CUSTODY_ACCESS_TOKEN: 'token',
};

function worker(text: string): number | undefined {
  try {
    return loadConfig({ ...BASE, RECONCILE_GRACE: text }).reconcile.graceMs;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    expect(error.problems.join('\n')).toMatch(/^RECONCILE_GRACE: must be a duration/m);
    return undefined;
  }
}

function simulator(text: string): number | undefined | 'too long' {
  const read = readSimulatorEnv({ SIM_TXID_JITTER: text });
  if (read.ok) return read.options.settings?.txidJitterMs;
  expect(read.problems).toHaveLength(1);
  expect(read.problems[0]).toMatch(/^SIM_TXID_JITTER: must be a duration/);
  return parseDuration(text) !== undefined ? 'too long' : undefined;
}

const unit = fc.constantFrom('', 'ms', 's', 'm', 'h', 'd', 'S', 'H', 'sec', 'min', 'us', 'w');
const number = fc.oneof(
  fc.nat({ max: 10_000_000 }).map(String),
  fc.tuple(fc.nat({ max: 1_000 }), fc.nat({ max: 999 })).map(([whole, fraction]) => `${whole}.${fraction}`),
  fc.constantFrom('-1', '+5', '1e3', '.5', '5.', '0x10', '', ' ', '99999999999999999999', '2147483647', '2147483648', '24.9'),
);
const text = fc.oneof(
  fc
    .tuple(fc.constantFrom('', ' '), number, fc.constantFrom('', ' ', '  '), unit, fc.constantFrom('', ' ', '\t'))
    .map((parts) => parts.join('')),
  fc.string({ maxLength: 8 }),
);

describe('duration grammar', () => {
  it('the worker and the simulator accept the same texts and read the same milliseconds', () => {
    fc.assert(
      fc.property(text, (value) => {
        if (value.trim() === '') return; // unset: each has its own default
        const ms = worker(value);
        const sim = simulator(value);
        if (ms === undefined) expect(sim, value).toBeUndefined();
        else if (ms > MAX_DELAY_MS) expect(sim, value).toBe('too long');
        else expect(sim, value).toBe(ms);
      }),
      { numRuns: 3_000 },
    );
  });

  it('reads the documented examples', () => {
    for (const [value, ms] of [
      ['1500', 1500],
      ['1500ms', 1500],
      ['30s', 30_000],
      ['1.5m', 90_000],
      ['24h', 86_400_000],
      ['2d', 172_800_000],
      [' 10 s ', 10_000],
    ] as const) {
      expect(worker(value), value).toBe(ms);
      expect(simulator(value), value).toBe(ms);
    }
    for (const value of ['1.5', '-1s', '1e3', '30S', '5 min', 'h']) {
      expect(worker(value), value).toBeUndefined();
      expect(simulator(value), value).toBeUndefined();
    }
  });
});
