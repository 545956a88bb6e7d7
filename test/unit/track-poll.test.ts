/**
 * The tracking poll's schedule (src/timing.ts trackPollDelay): from the transfer's age, not from a
 * count of runs, so nothing but time moves it.
 */
import { describe, expect, it } from 'vitest';
import { trackPollDelay, trackPollProfile } from '../../src/timing.ts';

describe('trackPollDelay', () => {
  const profile = trackPollProfile(2_000, 60_000);
  const nominal = () => 1;

  it('polls at about min, 3 min, 7 min, 15 min … after submission, then every TRACK_POLL_MAX', () => {
    const polls: number[] = [];
    let age = 0;
    for (let i = 0; i < 8; i++) {
      age += trackPollDelay(profile, age, nominal);
      polls.push(age);
    }
    expect(polls).toEqual([2_000, 6_000, 14_000, 30_000, 62_000, 122_000, 182_000, 242_000]);
  });

  it('jitters between half and all of the nominal delay', () => {
    expect(trackPollDelay(profile, 10_000, () => 0)).toBe(6_000);
    expect(trackPollDelay(profile, 10_000, () => 1)).toBe(12_000);
    expect(trackPollDelay(profile, 10_000_000, () => 1)).toBe(60_000);
  });

  it("reads an age below zero (a process clock behind the ledger's) as a new transfer", () => {
    expect(trackPollDelay(profile, -30_000, nominal)).toBe(2_000);
  });

  it('never goes below TRACK_POLL_MIN nominal, and a max below min is raised to min', () => {
    expect(trackPollDelay(trackPollProfile(5_000, 1_000), 0, nominal)).toBe(5_000);
  });
});
