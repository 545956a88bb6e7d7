/**
 * Redis failovers under load (test/chaos/failover.ts), a simulator that deduplicates nothing, five
 * forced failovers per run:
 * - Sentinel: a primary with two replicas behind three Sentinels; the master SIGKILLed or SIGSTOPped
 *   (a stale master when it runs again). REDIS_MIN_REPLICAS 2 (every replica Sentinel may promote
 *   acknowledges each send in flight), 1 and 0.
 * - Cluster: three masters with a replica each; the master of the worker's shard SIGKILLed, replaced
 *   by `CLUSTER FAILOVER FORCE` while it runs, or SIGSTOPped. REDIS_MIN_REPLICAS 1 (the shard's
 *   replica) and 0.
 * Asserted, with every promotable replica acknowledging: no sequenceId is accepted twice and no
 * transfer gets two terminal events of different types. Reported, not asserted: the same figures with
 * fewer (what operators choose between; README "Highly available Redis"), and transfers left unsettled.
 * In `npm run test:chaos`, or alone: `npx vitest run --config vitest.chaos.config.ts test/chaos/failover.test.ts`
 * (FAILOVER_TRANSFERS, CHAOS_SEED; `-t cluster` or `-t Sentinel` for one topology).
 */
import { describe, expect, it } from 'vitest';
import { chaosSeed } from './run-chaos.ts';
import { describeFigures, runFailover, type Topology } from './failover.ts';

const SEED = chaosSeed();
const TRANSFERS = Number(process.env.FAILOVER_TRANSFERS ?? 300);
const SETTLE_MS = 60_000;

const run = (topology: Topology, minReplicas: number) =>
  runFailover({ topology, minReplicas, transfers: TRANSFERS, failovers: 5, seed: SEED, settleTimeoutMs: SETTLE_MS });

const cases: Array<{ topology: Topology; every: number; fewer: number[] }> = [
  { topology: 'sentinel', every: 2, fewer: [1, 0] },
  { topology: 'cluster', every: 1, fewer: [0] },
];

for (const { topology, every, fewer } of cases) {
  describe(`Redis failovers under load, through ${topology === 'sentinel' ? 'Sentinel' : 'a Redis cluster'}`, () => {
    it(`REDIS_MIN_REPLICAS=${every} (every replica): no sequenceId accepted twice, no second terminal event of another type`, async () => {
      const figures = await run(topology, every);
      console.log(describeFigures(figures));
      expect(figures.failovers.length).toBe(5);
      expect(figures.unexpectedExits).toEqual([]);
      expect(figures.acceptedTwice).toEqual([]);
      expect(figures.twoTerminalDifferentTypes).toBe(0);
    });

    for (const minReplicas of fewer) {
      it(`REDIS_MIN_REPLICAS=${minReplicas}: the same run, figures reported`, async () => {
        const figures = await run(topology, minReplicas);
        console.log(describeFigures(figures));
        expect(figures.failovers.length).toBe(5);
      });
    }
  });
}
