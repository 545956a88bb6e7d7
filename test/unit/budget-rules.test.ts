/**
 * The request budget's scheduler rules (src/custody/budget.ts `admit`, a pure function), one rule per
 * case: reserving classes queue, opportunistic ones only take free slots and are told when to come
 * back, a send never waits more than one slot behind them, a provider 429 stops everything and the
 * reserving classes come back first. test/integration/budget-lua.test.ts holds the Lua script to the
 * same function.
 */
import { describe, expect, it } from 'vitest';
import { admit, budgetParams, pause, WAITING_LAPSE_MS, type BudgetClass, type BudgetState } from '../../src/custody/budget.ts';

const R = 40; // requests per second: one slot every 25 ms
const params = budgetParams(R);
const T0 = 1_000_000;

function fresh(): BudgetState {
  return { tat: 0, waiting: new Map() };
}

/** Runs one request per entry at its time; returns what each was told. */
function run(state: BudgetState, requests: Array<[at: number, klass: BudgetClass, member: string]>) {
  return requests.map(([at, klass, member]) => admit(state, params, at, klass, member));
}

describe('request budget rules', () => {
  it('derives interval, burst and horizon from CUSTODY_MAX_RPS', () => {
    expect(params).toEqual({ intervalMs: 25, burst: 4, horizonMs: 5_000 });
    expect(budgetParams(0).intervalMs).toBe(0);
  });

  it('reserving classes queue: a burst at once, then one slot per interval, each told its wait', () => {
    const state = fresh();
    const answers = run(
      state,
      Array.from({ length: 8 }, (_, i) => [T0, 'send', `s${i}`] as [number, BudgetClass, string]),
    );
    expect(answers.map((a) => (a.admitted ? a.waitMs : -1))).toEqual([0, 0, 0, 0, 25, 50, 75, 100]);
  });

  it('a reserving class is refused past its horizon, with the time until it would fit', () => {
    const state = fresh();
    const count = 4 + params.horizonMs / params.intervalMs; // burst + 200 queued slots
    for (let i = 0; i < count; i++) expect(admit(state, params, T0, 'send', `s${i}`).admitted).toBe(true);
    const refused = admit(state, params, T0, 'send', 'late');
    expect(refused).toEqual({ admitted: false, retryAfterMs: 25 });
  });

  it('opportunistic classes take at most the next slot, and only when it is within one interval', () => {
    const state = fresh();
    expect(admit(state, params, T0, 'poll', 'p1')).toEqual({ admitted: true, waitMs: 0 });
    // The next slot is 15 ms away: taken. The one after it, 40 ms away: not reserved by a poll.
    expect(admit(state, params, T0 + 10, 'poll', 'p2')).toEqual({ admitted: true, waitMs: 15 });
    expect(admit(state, params, T0 + 10, 'poll', 'p3').admitted).toBe(false);
    expect(admit(state, params, T0 + 25, 'poll', 'p3')).toEqual({ admitted: true, waitMs: 25 });
  });

  it('a send arriving after any number of polls waits at most one slot', () => {
    const state = fresh();
    // 200 polls ask within one second; only free slots go to them.
    for (let i = 0; i < 200; i++) admit(state, params, T0 + i * 5, 'poll', `p${i}`);
    const send = admit(state, params, T0 + 1_000, 'send', 'now');
    expect(send.admitted).toBe(true);
    expect(send.admitted && send.waitMs).toBeLessThanOrEqual(params.intervalMs);
  });

  it('polls use every slot sends leave: with sends at half the rate, polls get the other half', () => {
    const state = fresh();
    const used: Record<string, number> = { send: 0, poll: 0 };
    const retryAt = new Map<string, number>();
    // 10 s; a send every 50 ms; 100 pollers coming back when told.
    for (let t = T0; t < T0 + 10_000; t += 1) {
      if ((t - T0) % 50 === 0) {
        const answer = admit(state, params, t, 'send', `s${t}`);
        if (answer.admitted) used.send! += 1;
      }
      for (let p = 0; p < 100; p++) {
        const member = `p${p}`;
        if ((retryAt.get(member) ?? T0) > t) continue;
        const answer = admit(state, params, t, 'poll', member);
        if (answer.admitted) {
          used.poll! += 1;
          retryAt.set(member, t + 2_000); // its next poll
        } else {
          retryAt.set(member, t + answer.retryAfterMs);
        }
      }
    }
    const capacity = (10_000 / params.intervalMs) * 1; // 400 slots
    expect(used.send).toBe(200);
    expect(used.poll! / (capacity - used.send!)).toBeGreaterThanOrEqual(0.9);
  });

  it('a refused requester is told to come back behind every waiting one of its class and the classes above', () => {
    const state = fresh();
    // Two polls take the next two slots: the schedule is 50 ms ahead.
    admit(state, params, T0, 'poll', 'first');
    admit(state, params, T0, 'poll', 'second');
    const answers = ['a', 'b', 'c'].map((member) => admit(state, params, T0 + 1, 'poll', member));
    // 49 ms until the schedule is free, then a third of a slot per poller in line up to itself.
    expect(answers).toEqual([
      { admitted: false, retryAfterMs: Math.ceil(49 + 25 / 3) },
      { admitted: false, retryAfterMs: Math.ceil(49 + 50 / 3) },
      { admitted: false, retryAfterMs: 74 },
    ]);
    // Asking again keeps its place in line (first refused, first told to come back).
    expect(admit(state, params, T0 + 1, 'poll', 'a')).toEqual({ admitted: false, retryAfterMs: Math.ceil(49 + 25 / 3) });
    // Enrichment is above polls: waiting polls do not count against it, waiting enrichment counts against polls.
    expect(admit(state, params, T0 + 1, 'enrich', 'e')).toEqual({ admitted: false, retryAfterMs: Math.ceil(49 + 25 / 3) });
    expect(admit(state, params, T0 + 1, 'poll', 'd')).toEqual({ admitted: false, retryAfterMs: Math.ceil(49 + 125 / 3) });
    // Verification is below both.
    expect(admit(state, params, T0 + 1, 'verify', 'v')).toEqual({ admitted: false, retryAfterMs: 99 });
  });

  it('waiting entries lapse, so a requester that gave up stops counting', () => {
    const state = fresh();
    admit(state, params, T0, 'poll', 'first');
    admit(state, params, T0, 'poll', 'second');
    const told = admit(state, params, T0 + 1, 'poll', 'gone');
    expect(told).toEqual({ admitted: false, retryAfterMs: 58 });
    const later = T0 + 1 + WAITING_LAPSE_MS + 1;
    admit(state, params, later, 'poll', 'taker');
    admit(state, params, later, 'poll', 'taker2');
    // Only itself waits now: `gone` lapsed.
    expect(admit(state, params, later + 1, 'poll', 'other')).toEqual({ admitted: false, retryAfterMs: 58 });
  });

  it('a provider 429 stops every class until its Retry-After; reserving classes take the first slots after it', () => {
    const state = fresh();
    pause(state, params, T0, 3_000);
    expect(admit(state, params, T0 + 10, 'poll', 'p').admitted).toBe(false);
    expect(admit(state, params, T0 + 10, 'enrich', 'e').admitted).toBe(false);
    const send = admit(state, params, T0 + 10, 'send', 's');
    // Reserved for the end of the pause, not a burst earlier.
    expect(send).toEqual({ admitted: true, waitMs: 3_000 - 10 });
    const next = admit(state, params, T0 + 20, 'send', 's2');
    expect(next).toEqual({ admitted: true, waitMs: 3_000 + 25 - 20 });
    // Right after the pause, the slots are the reserving classes' first: a poll still waits.
    expect(admit(state, params, T0 + 3_000, 'poll', 'p').admitted).toBe(false);
    expect(admit(state, params, T0 + 3_000 + 75 + 50, 'poll', 'p')).toEqual({ admitted: true, waitMs: 0 });
  });

  it('with no limit (CUSTODY_MAX_RPS=0) everything passes at once, except during a 429 pause', () => {
    const state = fresh();
    const open = budgetParams(0);
    for (let i = 0; i < 100; i++) expect(admit(state, open, T0, i % 2 ? 'poll' : 'send', `m${i}`)).toEqual({ admitted: true, waitMs: 0 });
    pause(state, open, T0, 1_000);
    expect(admit(state, open, T0 + 1, 'poll', 'p').admitted).toBe(false);
    expect(admit(state, open, T0 + 1, 'send', 's')).toEqual({ admitted: true, waitMs: 999 });
    expect(admit(state, open, T0 + 1_000, 'poll', 'p')).toEqual({ admitted: true, waitMs: 0 });
  });
});
