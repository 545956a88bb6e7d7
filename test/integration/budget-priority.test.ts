/**
 * The request budget across processes: two real worker processes share CUSTODY_MAX_RPS with a
 * provider (the simulator) that answers 429 past the same rate, behind a real gateway that records
 * every request in order. Sixty transfers wait for txids that never come, so their polls want far more
 * than the budget; then one new transfer is enqueued. Its send must overtake the polls: between the
 * moment it was enqueued and its sendTransaction, only the polls already in flight and at most a slot
 * or two more may reach the provider (with one first-come queue, it waited behind seconds of queued
 * polls: about 5 s × 30/s). And the provider never answers 429: the two processes together keep to it.
 * Counted in requests, never timed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startGateway, type Gateway } from '../helpers/gateway.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const RPS = 30;
const WAITING = 60;
/** Polls allowed between the enqueue and the send: those in flight, the job's pick-up, one slot. */
const MAX_POLLS_BEFORE_SEND = 25;

describe('request budget: a send overtakes queued polls across two worker processes', () => {
  let sim: Simulator;
  let gateway: Gateway;
  let h: Harness;

  beforeAll(async () => {
    sim = await startSimulator({ port: 0, settings: { txidAfterMs: 24 * 3_600_000, maxRps: RPS } });
    gateway = await startGateway(sim.url);
    h = await startHarness({
      name: 'budget-priority',
      simulator: sim,
      worker: false,
      env: {
        CUSTODY_SDK_URL: gateway.url,
        CUSTODY_BASE_URL: gateway.url,
        CUSTODY_TOKEN_URL: `${gateway.url}/oauth/token`,
        CUSTODY_MAX_RPS: String(RPS),
        CUSTODY_TIMEOUT: '5s',
        TRACK_POLL_MIN: '100ms',
        TRACK_POLL_MAX: '200ms',
        LOG_LEVEL: 'info',
      },
    });
    const workers = [spawnWorker(h.env, { name: 'budget-1' }), spawnWorker(h.env, { name: 'budget-2' })];
    await Promise.all(workers.map((w) => w.waitForLog('worker started', PROCESS_MS)));
  }, processesTimeout(1));

  afterAll(async () => {
    await killAllWorkers();
    await h?.close();
    await gateway?.close();
    await sim?.close();
  });

  it('sends first, polls with what is left, no 429 from the provider', async () => {
    const waiting = Array.from({ length: WAITING }, (_, i) => samplePayload({ metadata: { n: String(i) } }));
    for (const payload of waiting) await h.producer.submit(payload);
    await until(
      `${WAITING} transfers submitted`,
      45_000,
      async () => {
        const submitted = (await h.events()).filter((e) => e.event === 'transfer.submitted').length;
        return submitted >= WAITING ? true : undefined;
      },
      200,
    );

    // Polling saturates the budget: 60 transfers polling every 100–200 ms want 300–600 requests/s.
    const pollsBefore = gateway.log.filter((e) => e.endpoint === 'getTransfer').length;
    await until(
      'polls at the budget for a while',
      20_000,
      async () => {
        const polls = gateway.log.filter((e) => e.endpoint === 'getTransfer').length - pollsBefore;
        return polls >= RPS * 2 ? true : undefined;
      },
      100,
    );

    const fresh = samplePayload({ metadata: { n: 'fresh' } });
    const mark = gateway.log.length;
    await h.producer.submit(fresh);
    const sequenceId = fresh.halfSigned.sequenceId;
    await until(
      'the fresh transfer submitted',
      20_000,
      async () => {
        const events = await h.events();
        return events.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.submitted') ? true : undefined;
      },
      50,
    );

    const after = gateway.log.slice(mark);
    const sendAt = after.findIndex((e) => e.endpoint === 'sendTransaction' && e.sequenceId === sequenceId);
    expect(sendAt, 'the fresh transfer was sent through the gateway').toBeGreaterThanOrEqual(0);
    const pollsFirst = after.slice(0, sendAt).filter((e) => e.endpoint === 'getTransfer').length;
    expect(pollsFirst, `polls that reached the provider between the enqueue and the send`).toBeLessThanOrEqual(MAX_POLLS_BEFORE_SEND);

    console.info(`[budget-priority] polls between the enqueue and the send: ${pollsFirst} (at most ${MAX_POLLS_BEFORE_SEND})`);
    // Two processes, one budget: the provider never had to refuse.
    expect(gateway.log.filter((e) => e.status === 429)).toEqual([]);
  }, 120_000);
});
