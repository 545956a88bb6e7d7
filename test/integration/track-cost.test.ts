/**
 * What tracking costs under a saturated budget: 2,000 transfers wait for txids that do not come, the
 * provider allows R requests/s (429 past it) and the worker is told the same (CUSTODY_MAX_RPS). A
 * poll the budget has no slot for must not be fetched, refused and re-delayed one after another: the
 * tracking queue hands out jobs at the budget's pace. Counted over a window, in operations: tracking
 * job runs (every fetch is one) per get-transfer request that reached the provider. Never timed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { sleep, until } from '../helpers/wait.ts';

const TRACKED = 2_000;
const RPS = 50;
/** Tracking job runs per upstream call allowed: 1 each, plus a turn-away now and then. */
const MAX_RUNS_PER_CALL = 1.5;

async function trackRuns(app: App): Promise<number> {
  const text = await app.metrics.registry.getSingleMetricAsString('custody_worker_jobs_total');
  let runs = 0;
  for (const [, labels, value] of text.matchAll(/^custody_worker_jobs_total\{([^}]*)\} (\S+)$/gm)) {
    if (labels!.includes(`queue="${QueueName.TRACK}"`)) runs += Number(value);
  }
  return runs;
}

describe('tracking under a saturated budget', () => {
  let h: Harness;
  let app: App | undefined;

  beforeAll(async () => {
    h = await startHarness({
      name: 'track-cost',
      sim: { settings: { txidAfterMs: 24 * 3_600_000 } },
      // Seeding: no limit, so the sends go fast; polls are due again within a second.
      env: { CUSTODY_MAX_RPS: '0', SUBMIT_CONCURRENCY: '64', TRACK_POLL_MIN: '1s', TRACK_POLL_MAX: '1s' },
    });
    const payloads = Array.from({ length: TRACKED }, () => samplePayload());
    for (let i = 0; i < payloads.length; i += 100) await Promise.all(payloads.slice(i, i + 100).map((p) => h.producer.submit(p)));
    await until(
      `${TRACKED} transfers submitted`,
      120_000,
      async () => ((await h.redis.xlen(h.config.queue.eventsStream)) >= TRACKED ? true : undefined),
      250,
    );
    await h.app!.close();
    h.app = undefined;
  }, 180_000);

  afterAll(async () => {
    await app?.close();
    await h?.close();
  });

  it(`fetches at most ${MAX_RUNS_PER_CALL} tracking jobs per get-transfer request, and the provider never answers 429`, async () => {
    h.sim.updateSettings({ maxRps: RPS });
    const config = loadConfig({ ...h.env, CUSTODY_MAX_RPS: String(RPS), TRACK_POLL_MIN: '200ms', TRACK_POLL_MAX: '1s' });
    app = await createApp(config, createLogger({ level: 'silent' }));
    const polls = () => Object.values(h.sim.stats().requests.getTransfer).reduce((sum, n) => sum + n, 0);
    // Warm up until the budget is spent by polls, then count a window of them.
    const warm = polls();
    await until('polls at the budget', 30_000, async () => (polls() - warm >= RPS * 2 ? true : undefined), 50);
    const runsBefore = await trackRuns(app);
    const pollsBefore = polls();
    const windowStart = Date.now();
    while (polls() - pollsBefore < RPS * 5) await sleep(50);
    const runs = (await trackRuns(app)) - runsBefore;
    const calls = polls() - pollsBefore;
    const perCall = runs / calls;
    console.info(`[track-cost] ${((calls * 1000) / (Date.now() - windowStart)).toFixed(1)} calls/s of ${RPS}`);
    console.info(`[track-cost] ${runs} tracking job runs for ${calls} get-transfer requests: ${perCall.toFixed(2)} per call`);
    expect(perCall, `tracking job runs per upstream call (${runs} / ${calls})`).toBeLessThanOrEqual(MAX_RUNS_PER_CALL);
    expect(h.sim.stats().requests.getTransfer['429'] ?? 0).toBe(0);
  }, 120_000);
});
