/**
 * Runs a suite once per simulator profile (src/simulator/realistic.ts): `spec` answers exactly as
 * docs/upstream-api.md documents, `realistic` varies everything the spec leaves open (nulls, absent and
 * extra keys, numbers as text, address case, 404 for "not found", unrelated records in a list). A file's
 * body is written once and proves its behaviour against both; the two suites run side by side in the
 * same file process, each with its own harness.
 *
 * SIM_PROFILES=realistic (or spec) narrows a run to one profile while debugging.
 */
import { describe, expect } from 'vitest';
import { SIM_PROFILES, type SimProfile, type SimulatorOptions } from '../../src/simulator/index.ts';

function selectedProfiles(): SimProfile[] {
  const only = process.env.SIM_PROFILES?.split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  if (!only || only.length === 0) return [...SIM_PROFILES];
  const unknown = only.filter((name) => !(SIM_PROFILES as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`SIM_PROFILES: unknown profile ${unknown.join(', ')} (known: ${SIM_PROFILES.join(', ')})`);
  return SIM_PROFILES.filter((profile) => only.includes(profile));
}

/** `describe('<profile> profile' > name, …)` once per profile; `body` declares its harness from `profile`. */
export function describeProfiles(name: string, body: (profile: SimProfile) => void): void {
  // The profiles' suites run side by side (each has its own simulator, Redis prefix and worker); the
  // tests within one run in order, as they change their simulator's settings between them.
  describe.concurrent.each(selectedProfiles())('%s profile', (profile) => {
    describe(name, { concurrent: false }, () => body(profile));
  });
}

/** Simulator options for a harness under `profile`, other settings as given. */
export function simFor(profile: SimProfile, settings: SimulatorOptions['settings'] = {}): SimulatorOptions {
  return { settings: { ...settings, profile } };
}

/**
 * An address the worker passed on, against the simulator's own (spec) view of it. Its letter case is
 * the provider's (upstream API 2.2: it may differ between records) and the realistic profile respells addresses
 * per record, so the comparison is exact under `spec` and without regard to case under `realistic`.
 * Matching itself compares addresses without regard to case under either profile.
 */
export function expectAddress(profile: SimProfile, actual: unknown, expected: string, what = 'address'): void {
  expect(typeof actual, what).toBe('string');
  if (profile === 'spec') expect(actual, what).toBe(expected);
  else expect((actual as string).toLowerCase(), what).toBe(expected.toLowerCase());
}
