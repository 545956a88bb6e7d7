/**
 * The upstream calls made for one transfer (custody_upstream_calls_per_transfer, observed at its
 * broadcast) are counted exactly, with and without a request budget: without one (CUSTODY_MAX_RPS=0)
 * each poll is counted by the tracker's ledger read (Ledger.readCounting), with one by the budget's
 * admission script. The count is compared with the requests the simulator received.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

function requestsFor(h: Harness): number {
  const { requests } = h.sim.stats();
  const sum = (byStatus: Record<string, number> | undefined) => Object.values(byStatus ?? {}).reduce((total, n) => total + n, 0);
  return sum(requests.sendTransaction) + sum(requests.getTransfer) + sum(requests.getWalletTransaction);
}

async function observedCalls(h: Harness): Promise<{ count: number; sum: number }> {
  const text = await h.app!.metrics.registry.getSingleMetricAsString('custody_upstream_calls_per_transfer');
  const value = (name: string) => Number(new RegExp(`^custody_upstream_calls_per_transfer_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
  return { count: value('count'), sum: value('sum') };
}

describe('upstream calls per transfer', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  for (const maxRps of ['0', '50']) {
    it(`counts every send, poll and lookup of a transfer (CUSTODY_MAX_RPS=${maxRps})`, async () => {
      h = await startHarness({
        name: `calls-${maxRps}`,
        sim: { settings: { txidAfterMs: 1_500 } },
        env: { CUSTODY_MAX_RPS: maxRps, TRACK_POLL_MIN: '100ms', TRACK_POLL_MAX: '200ms' },
      });
      await h.producer.submit(samplePayload());
      await until('broadcast observed', 20_000, async () => ((await observedCalls(h!)).count === 1 ? true : undefined), 50);
      const { sum } = await observedCalls(h);
      // At least a send, a few polls and the wallet-transaction lookup.
      expect(sum).toBeGreaterThanOrEqual(4);
      expect(sum).toBe(requestsFor(h));
    }, 60_000);
  }
});
