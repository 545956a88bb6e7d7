/**
 * Redis failovers under load (test/chaos/failover.ts): a primary with two replicas behind three
 * Sentinels, five forced failovers, a simulator that deduplicates nothing. Run with
 * REDIS_MIN_REPLICAS 2 (every replica Sentinel may promote acknowledges each send in flight), 1 and 0,
 * side by side. Asserted: with 2, no sequenceId is accepted twice and no transfer gets two terminal
 * events of different types. Reported, not asserted: the same figures with 1 and 0 (what operators
 * choose between; README "Highly available Redis"), and transfers left unsettled. In
 * `npm run test:chaos`, or alone: `npx vitest run --config vitest.chaos.config.ts test/chaos/failover.test.ts`
 * (FAILOVER_TRANSFERS, CHAOS_SEED).
 */
import { describe, expect, it } from 'vitest';
import { chaosSeed } from './run-chaos.ts';
import { describeFigures, runFailover } from './failover.ts';

const SEED = chaosSeed();
const TRANSFERS = Number(process.env.FAILOVER_TRANSFERS ?? 300);
const SETTLE_MS = 60_000;

describe('Redis failovers under load, through Sentinel', () => {
  it('REDIS_MIN_REPLICAS=2 (every replica): no sequenceId accepted twice, no second terminal event of another type', async () => {
    const figures = await runFailover({ minReplicas: 2, transfers: TRANSFERS, failovers: 5, seed: SEED, settleTimeoutMs: SETTLE_MS });
    console.log(describeFigures(figures));
    expect(figures.failovers.length).toBe(5);
    expect(figures.unexpectedExits).toEqual([]);
    expect(figures.acceptedTwice).toEqual([]);
    expect(figures.twoTerminalDifferentTypes).toBe(0);
  });

  for (const minReplicas of [1, 0]) {
    it(`REDIS_MIN_REPLICAS=${minReplicas}: the same run, figures reported`, async () => {
      const figures = await runFailover({ minReplicas, transfers: TRANSFERS, failovers: 5, seed: SEED, settleTimeoutMs: SETTLE_MS });
      console.log(describeFigures(figures));
      expect(figures.failovers.length).toBe(5);
    });
  }
});
