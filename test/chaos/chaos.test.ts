/**
 * The chaos run (`npm run test:chaos`): the whole machine at once, as production could see it on a bad
 * day. Three real worker processes share one AOF Redis and one faulty custody simulator; every few
 * seconds one worker is SIGKILLed and replaced, Redis itself is killed and restarted once, tokens are
 * expired under the workers' feet, and every endpoint answers 5xx, 429, garbage or nothing at random.
 * 2,000 valid transfers go through all of it. What must come out is exactly what docs/contract.md section 4
 * promises: each sequenceId accepted upstream once, one `transfer.submitted` then one
 * `transfer.broadcast`, versions 1 and 2, and, from the same run, no secret and no person's data in any
 * log line, event or Redis value. The machinery is run-chaos.ts, shared with the scenarios aimed at sends
 * of unknown outcome, a slow upstream and a skewed clock (send-outcome.test.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { SimEndpoint } from '../../src/simulator/index.ts';
import { countBy } from '../helpers/harness.ts';
import { findNeedles } from './leak-scan.ts';
import { chaosSeed, cleanupChaos, expectChaos, expectGuarantees, MAX_OUTPUT_CHARS, runChaos, type FaultMix } from './run-chaos.ts';

const TRANSFERS = 2_000;

/**
 * Moderate rates: enough that every kind hits every stage many times, low enough that the run settles.
 * 429 stays rare on sendTransaction: each one pauses the whole submit queue for Retry-After (1 s).
 * 'timeout' on the token endpoint goes through the token recorder as well: it drops its upstream
 * request when the worker gives up after CUSTODY_TIMEOUT.
 */
const FAULTS: Record<SimEndpoint, FaultMix> = {
  sendTransaction: { probability: 0.06, weights: { '5xx': 3, timeout: 3, malformed: 2, '429': 1 } },
  getTransfer: { probability: 0.05, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  getWalletTransaction: { probability: 0.05, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  // Few requests (the travel-rule answer is cached, tokens live seconds): higher rates to hit them at all.
  isEnabled: { probability: 0.15, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  token: { probability: 0.15, weights: { '5xx': 3, timeout: 1, malformed: 2, '429': 1 } },
};

afterAll(cleanupChaos);

describe('chaos: 3 workers, SIGKILLs, a Redis crash, expired tokens and upstream faults', () => {
  it('every transfer is accepted once, submitted once and broadcast once, and nothing secret leaks', async () => {
    const run = await runChaos({
      name: 'classic',
      title: 'SIGKILLs, a Redis crash, expired tokens, 5xx/429/timeout/malformed on every endpoint',
      seed: chaosSeed(),
      transfers: TRANSFERS,
      workers: 3,
      enqueueBatch: 50,
      enqueueEveryMs: 1_500,
      killEveryMs: 3_000,
      expireTokensEveryMs: 3_000,
      // Crashed once 30 % of the transfers have ended (mid-run), or after a minute.
      redisCrash: { atShare: 0.3, latestMs: 60_000 },
      faults: FAULTS,
      latencyMs: { sendTransaction: [0, 40], getTransfer: [0, 40] },
      redrawLatencyEveryMs: 500,
      sim: {
        // Each transfer becomes visible, then gets its txid, after its own random delays.
        visibleAfterMs: 0,
        visibleJitterMs: 1_500,
        txidAfterMs: 0,
        txidJitterMs: 1_500,
        // Short-lived tokens: renewals happen throughout the run, besides the forced expiries.
        tokenLifetimeSec: 5,
      },
      // Faults must never exhaust the attempts (the default SUBMIT_ATTEMPTS 1000): every transfer here must end broadcast.
      env: {},
      settleTimeoutMs: 300_000,
    });
    console.log(run.summary);
    const { sequenceIds, bySequenceId, stats, sample } = run;

    // ---- the run really was chaotic (else it proves little)
    expectChaos(run);
    for (const kind of ['5xx', 'timeout', '429', 'malformed'] as const)
      expect(run.faultsPerKind[kind] ?? 0, `${kind} faults injected`).toBeGreaterThan(0);
    const unauthorized = (stats.requests.sendTransaction['401'] ?? 0) + (stats.requests.getWalletTransaction['401'] ?? 0);
    expect(unauthorized, 'expired tokens were met with 401').toBeGreaterThan(0);

    // ---- docs/contract.md section 4 guarantees, and what this scenario adds: no refusal is injected, so every
    // transfer is accepted once, then submitted, then broadcast
    expectGuarantees(run);
    const transferEvents = run.events.filter((e) => e.event !== 'reconcile.completed');
    const submittedCounts = countBy(transferEvents, 'transfer.submitted');
    const notSubmittedOnce = sequenceIds.filter((id) => submittedCounts.get(id) !== 1);
    const notBroadcastOnce = sequenceIds.filter((id) => {
      const list = bySequenceId.get(id) ?? [];
      return !(list.length === 2 && list[0]!.event === 'transfer.submitted' && list[1]!.event === 'transfer.broadcast');
    });
    const neverAccepted = sequenceIds.filter((id) => (stats.sends[id]?.accepted ?? 0) === 0);
    expect(sample(notSubmittedOnce), 'sequenceIds without exactly one transfer.submitted').toEqual([]);
    expect(sample(notBroadcastOnce), 'sequenceIds whose events are not exactly submitted then broadcast').toEqual([]);
    expect(sample(neverAccepted), 'sequenceIds never accepted by the simulator').toEqual([]);

    // ---- security: the checks can fail (what they search for is real and where it is searched is full)
    const { leak } = run;
    expect(leak.tokens, 'tokens were issued, renewed and recorded').toBeGreaterThanOrEqual(2);
    for (const needle of leak.needles) expect(needle.value.length, `${needle.label} is a real search string`).toBeGreaterThanOrEqual(8);
    for (const field of ['displayName', 'email', 'phoneNumber'] as const) {
      expect(leak.firstRecordRaw, `the simulator's sendTransaction answer carries raw.user.${field}`).toContain(String(leak.user[field]));
    }
    for (const worker of run.workerOutputs) {
      expect(worker.text.length, `${worker.name} output kept whole`).toBeLessThan(MAX_OUTPUT_CHARS);
      expect(worker.text, `${worker.name} logged`).toContain('worker started');
    }
    expect(leak.logs.map((log) => log.text).join('')).toContain('"msg":"transfer submitted"');
    expect(findNeedles(leak.logs, [{ label: 'control', value: 'worker started' }])).toHaveLength(run.workersSpawned);
    expect(leak.streamEntries.length).toBe(run.events.length);
    expect(findNeedles(leak.streamEntries, [{ label: 'control', value: sequenceIds[0]! }]).length).toBe(2);
    expect(leak.stored.length).toBeGreaterThan(TRANSFERS);
  });
});
