/**
 * A provider's 429 pauses every request class of every process for its Retry-After, at most
 * CUSTODY_MAX_PAUSE: here the simulator asks for an hour and the worker, with CUSTODY_MAX_PAUSE=2s,
 * pauses 2 s and then sends. The pause is visible: custody_upstream_paused_until_seconds shows its end
 * (read from Redis at the scrape, so every replica reports the same), and one warn line names the
 * endpoint, the Retry-After asked and the pause applied. Before, the cap was a fixed 10 minutes, the
 * transfer waited for it, and nothing showed the pause but a counter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestBudget } from '../../src/custody/budget.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { refreshScrapeGauges } from '../../src/metrics-scrape.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';

const MAX_PAUSE_MS = 2_000;
const ASKED_SEC = 3_600;

describe('a provider 429 with a long Retry-After', () => {
  let h: Harness;
  const lines: string[] = [];
  beforeAll(async () => {
    h = await startHarness({
      name: 'upstream-pause',
      env: { CUSTODY_MAX_PAUSE: '2s', LOG_LEVEL: 'info' },
      logTo: { write: (line: string) => void lines.push(line) },
    });
  });
  afterAll(async () => {
    await h.close();
  });

  /** The gauge as a scrape of /metrics sets it (Unix seconds). */
  async function pausedUntilGauge(): Promise<number> {
    await refreshScrapeGauges(h.app!, h.app!.metrics);
    const metric = await h.app!.metrics.registry.getSingleMetric('custody_upstream_paused_until_seconds')?.get();
    expect(metric, 'custody_upstream_paused_until_seconds is exported').toBeDefined();
    return metric!.values[0]!.value;
  }

  function pauseLines(): Array<Record<string, unknown>> {
    return lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => String(line.msg).startsWith('provider answered 429'));
  }

  it('pauses every class for CUSTODY_MAX_PAUSE, shows when the pause ends, and says so once', { timeout: 30_000 }, async () => {
    expect(await pausedUntilGauge()).toBe(0);
    h.sim.updateSettings({ retryAfterSec: ASKED_SEC });
    h.sim.setFault('sendTransaction', { sequence: ['429'] });
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);

    const [line] = await until('the pause logged', 10_000, async () => (pauseLines().length > 0 ? pauseLines() : undefined));
    const pausedAt = await h.app!.ledger.now(); // Redis's clock, as the pause's end is
    const gauge = await pausedUntilGauge();
    // Capped: it ends at most CUSTODY_MAX_PAUSE after the 429, not an hour (nor 10 minutes) later.
    expect(gauge * 1000).toBeGreaterThan(pausedAt);
    expect(gauge * 1000).toBeLessThanOrEqual(pausedAt + MAX_PAUSE_MS);
    // Read from Redis: another process's budget on its own connection sees the same end.
    const elsewhere = new RequestBudget(h.redis, createKeys(h.prefix, h.config.queue.eventsStream).rateLimit, 0);
    expect(await elsewhere.pausedUntil()).toBe(gauge * 1000);

    expect(line).toMatchObject({
      level: 'warn',
      endpoint: 'send',
      retryAfter: String(ASKED_SEC),
      askedMs: ASKED_SEC * 1000,
      pauseMs: MAX_PAUSE_MS,
      capped: true,
      pausedUntil: new Date(gauge * 1000).toISOString(),
    });

    // Sent once the pause is over: seconds, not the hour asked.
    const outcome = await h.producer.waitForTerminal(sequenceId, 15_000, new Set(['transfer.submitted']));
    expect(outcome.event).toBe('transfer.submitted');
    expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
    expect(Date.parse(outcome.at)).toBeGreaterThanOrEqual(gauge * 1000);

    await until('the pause over', 5_000, async () => ((await pausedUntilGauge()) === 0 ? true : undefined), 100);
    // One 429, one line; no secret in it.
    expect(pauseLines()).toHaveLength(1);
    expect(JSON.stringify(pauseLines())).not.toContain(h.sim.clientSecret);
  });
});
