/**
 * Redis failovers under load (test/chaos/failover.ts), a simulator that deduplicates nothing, five
 * forced failovers per run:
 * - Sentinel: a primary with two replicas behind three Sentinels; the master SIGKILLed or SIGSTOPped
 *   (a stale master when it runs again). REDIS_MIN_REPLICAS 2, 1 and 0.
 * - Cluster: three masters with a replica each; the master of the worker's shard SIGKILLed, replaced
 *   by `CLUSTER FAILOVER FORCE` while it runs, or SIGSTOPped. REDIS_MIN_REPLICAS 1 and 0.
 * Asserted with REDIS_MIN_REPLICAS of 1 or more (every replica the master lists online acknowledges
 * each send in flight, and at least that many): no sequenceId is accepted twice and no transfer gets
 * two terminal events of different types. Reported, not asserted: the same figures with 0 (what
 * operators choose between; README "Highly available Redis"), and transfers left unsettled.
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

const cases: Array<{ topology: Topology; waited: number[] }> = [
  { topology: 'sentinel', waited: [2, 1] },
  { topology: 'cluster', waited: [1] },
];

for (const { topology, waited } of cases) {
  describe(`Redis failovers under load, through ${topology === 'sentinel' ? 'Sentinel' : 'a Redis cluster'}`, () => {
    for (const minReplicas of waited) {
      it(`REDIS_MIN_REPLICAS=${minReplicas}: no sequenceId accepted twice, no second terminal event of another type`, async () => {
        const figures = await run(topology, minReplicas);
        console.log(describeFigures(figures));
        expect(figures.failovers.length).toBe(5);
        expect(figures.unexpectedExits).toEqual([]);
        expect(figures.acceptedTwice).toEqual([]);
        expect(figures.twoTerminalDifferentTypes).toBe(0);
      });
    }

    it('REDIS_MIN_REPLICAS=0: the same run, figures reported', async () => {
      const figures = await run(topology, 0);
      console.log(describeFigures(figures));
      expect(figures.failovers.length).toBe(5);
    });
  });
}
