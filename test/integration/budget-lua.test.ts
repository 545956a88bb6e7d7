/**
 * The request budget's Lua script on a real Redis says exactly what the pure rules say
 * (src/custody/budget.ts `admit` and `pause`), over random sequences of requests of every class,
 * members, clock steps and 429 pauses (fast-check; replay with FUZZ_SEED). Also: a call is counted on
 * the transfer's ledger record when admitted, and never creates a record.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  admit,
  BUDGET_CLASSES,
  pause,
  RequestBudget,
  type Admission,
  type BudgetClass,
  type BudgetState,
} from '../../src/custody/budget.ts';
import '../fuzz/fc-seed.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';

type Step = { kind: 'ask'; klass: BudgetClass; member: string; advance: number } | { kind: 'pause'; ms: number; advance: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.record({
      kind: fc.constant('ask' as const),
      klass: fc.constantFrom(...BUDGET_CLASSES),
      member: fc.constantFrom('a', 'b', 'c', 'd', 'e'),
      advance: fc.integer({ min: 0, max: 60 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('pause' as const),
      ms: fc.integer({ min: 0, max: 3_000 }),
      advance: fc.integer({ min: 0, max: 60 }),
    }),
  },
);

afterAll(closeAllRedis);

describe('request budget: the Lua script against the pure rules', () => {
  it('answers every request of a random sequence as admit() does', async () => {
    const redis = newRedis();
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(0, 7, 40, 100, 333), fc.array(step, { minLength: 1, maxLength: 80 }), async (rps, steps) => {
        let now = 1_700_000_000_000;
        const budget = new RequestBudget(redis, `${uniquePrefix('budget')}:rate`, rps, {}, () => now);
        const model: BudgetState = { tat: 0, waiting: new Map() };
        for (const s of steps) {
          now += s.advance;
          if (s.kind === 'pause') {
            await budget.pause(s.ms);
            pause(model, budget.params, now, s.ms);
            continue;
          }
          const got: Admission = await budget.ask(s.klass, s.member);
          const want = admit(model, budget.params, now, s.klass, s.member);
          expect(got, `${s.klass} ${s.member} at +${now - 1_700_000_000_000} ms, ${rps}/s`).toEqual(want);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('with no limit, a 429 seen by one process stops the others too (polls refused, sends wait), and calls are still counted', async () => {
    const prefix = uniquePrefix('budget-open');
    const [a, b] = [new RequestBudget(newRedis(), `${prefix}:rate`, 0), new RequestBudget(newRedis(), `${prefix}:rate`, 0)];
    const record = `${prefix}:transfer:seq-1`;
    const redis = newRedis();
    await redis.hset(record, 'state', 'submitted');
    await b.take('lookup', 'poll', 'seq-1', undefined, { key: record, field: 'calls' });
    await a.pause(1_500);
    // b read the pause state at its first call: it learns of a's 429 at its next read, 250 ms on.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const refused = await b.take('lookup', 'poll', 'seq-1').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ code: 'CUSTODY_RATE_LIMITED', budgetRefused: true, maybeProcessed: false });
    expect((refused as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    // A send waits for the end of the pause instead of being refused.
    await b.take('send', 'send', 'seq-1', undefined, { key: record, field: 'calls' });
    await until('both calls counted', 2_000, async () => ((await redis.hget(record, 'calls')) === '2' ? true : undefined));
  });

  it('a pause ends where the longest 429 put it, and every process reads the same end from Redis', async () => {
    const prefix = uniquePrefix('budget-paused-until');
    const [a, b] = [new RequestBudget(newRedis(), `${prefix}:rate`, 0), new RequestBudget(newRedis(), `${prefix}:rate`, 10)];
    expect(await b.pausedUntil()).toBe(0);
    const [seconds] = await newRedis().time();
    const ends = await a.pause(60_000);
    expect(ends).toBeGreaterThanOrEqual(Number(seconds) * 1000 + 60_000);
    expect(ends).toBeLessThan(Number(seconds) * 1000 + 62_000);
    // A shorter pause later, from a process with a limit, keeps the longer one.
    expect(await b.pause(1_000)).toBe(ends);
    expect(await a.pausedUntil()).toBe(ends);
    expect(await b.pausedUntil()).toBe(ends);
    // It ends by itself.
    const short = uniquePrefix('budget-paused-short');
    const c = new RequestBudget(newRedis(), `${short}:rate`, 0);
    await c.pause(50);
    await until('the pause over', 2_000, async () => ((await c.pausedUntil()) === 0 ? true : undefined));
  });

  it('counts an admitted call on the transfer record, and never creates one', async () => {
    const redis = newRedis();
    const prefix = uniquePrefix('budget-count');
    const budget = new RequestBudget(redis, `${prefix}:rate`, 0);
    const record = `${prefix}:transfer:seq-1`;
    await redis.hset(record, 'state', 'submitted');
    await budget.ask('poll', 'seq-1', { key: record, field: 'calls' });
    await budget.ask('enrich', 'seq-1', { key: record, field: 'calls' });
    expect(await redis.hget(record, 'calls')).toBe('2');
    await budget.ask('poll', 'seq-2', { key: `${prefix}:transfer:seq-2`, field: 'calls' });
    expect(await redis.exists(`${prefix}:transfer:seq-2`)).toBe(0);
  });
});
