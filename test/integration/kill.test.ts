/**
 * The exactly-once guarantee against the crash that matters: the worker process SIGKILLed while
 * hundreds of sends are in flight, restarted, killed again, restarted. Whatever was cut off (a job
 * before its send, a send accepted upstream but not yet recorded, a job done but not yet completed in
 * BullMQ) must end with every transfer accepted upstream exactly once and published exactly once.
 */
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { QueueName } from '../../src/queues/names.ts';
import type { DeepPartial, FaultPlan, SimulatorSettings } from '../../src/simulator/index.ts';
import { countBy, startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { until } from '../helpers/wait.ts';
import { killMidSend } from '../helpers/kill-mid-send.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const TRANSFERS = 500;
const LOCK_MS = 2_000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await killAllWorkers();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

interface Scenario {
  name: string;
  sim: DeepPartial<SimulatorSettings>;
  /** Fault plan on sendTransaction for the whole run. */
  sendFault?: FaultPlan;
  /** Kill the running worker once this many transfer.submitted events exist, one kill per entry. */
  killAt: number[];
}

interface KillFigures {
  submittedAtKill: number;
  /** Sends accepted upstream while their answers were held: certainly unanswered when the kill hit. */
  sendsInFlightAtKill: number;
  /**
   * Right after the kill: transfers accepted by the simulator but not published, and not already in
   * that state after an earlier kill. This kill's crash window.
   */
  acceptedUnrecorded: number;
  /**
   * Jobs BullMQ holds as active right after the kill: the dead worker's, plus an earlier dead worker's
   * not yet recovered by the stalled check. Only that check can bring them back.
   */
  strandedActive: number;
}

/** The simulator's sendTransaction latency outside the kill's hold. */
const SEND_LATENCY_MS = 40;

interface ScenarioResult {
  h: Harness;
  sequenceIds: string[];
  events: TransferEvent[];
  kills: KillFigures[];
  settleMs: number;
  workers: WorkerProcess[];
}

async function runKillScenario(scenario: Scenario): Promise<ScenarioResult> {
  const h = await startHarness({
    name: scenario.name,
    worker: false,
    sim: { settings: scenario.sim },
    env: {
      SUBMIT_CONCURRENCY: '32',
      JOB_LOCK_DURATION: `${LOCK_MS}ms`,
      SUBMIT_RETRY_BASE: '20ms',
      SUBMIT_RETRY_MAX: '200ms',
      // Tracking is not under test: its first poll comes after the test is over.
      TRACK_POLL_MIN: '60s',
      TRACK_POLL_MAX: '60s',
      SHUTDOWN_TIMEOUT: '10s',
      // 'worker started' is an info line.
      LOG_LEVEL: 'info',
    },
  });
  cleanups.push(() => h.close());
  if (scenario.sendFault) h.sim.setFault('sendTransaction', scenario.sendFault);
  const queue = new Queue(QueueName.SUBMIT, { connection: h.redis, prefix: h.prefix });
  cleanups.push(() => queue.close());

  /** Events first, then the simulator: a send accepted in between counts as unrecorded, as it is. */
  const snapshot = async () => {
    const published = new Set((await h.events()).filter((e) => e.event === 'transfer.submitted').map((e) => e.sequenceId));
    const sends = h.sim.stats().sends;
    const unrecorded = Object.keys(sends).filter((id) => (sends[id]?.accepted ?? 0) > 0 && !published.has(id));
    return { published: published.size, unrecorded };
  };

  const payloads = Array.from({ length: TRANSFERS }, () => samplePayload());
  const sequenceIds = payloads.map((p) => p.halfSigned.sequenceId);
  const started = Date.now();
  await Promise.all(payloads.map((p) => h.producer.submit(p)));

  const workers: WorkerProcess[] = [];
  const start = async () => {
    const worker = spawnWorker(h.env, { name: `${scenario.name}-worker-${workers.length + 1}` });
    workers.push(worker);
    await worker.waitForLog('worker started', PROCESS_MS);
    return worker;
  };

  const kills: KillFigures[] = [];
  let stranded = new Set<string>();
  let worker = await start();
  for (const threshold of scenario.killAt) {
    // Kill once `threshold` transfers are published, with sends mid-request: held by the simulator
    // (test/helpers/kill-mid-send.ts), so their answers cannot have reached the worker.
    const published = await until(
      `${threshold} submitted events`,
      20_000,
      async () => {
        const { published } = await snapshot();
        return published >= threshold ? published : undefined;
      },
      20,
    );
    const { inFlight, exit } = await killMidSend(worker, {
      setSendLatency: (ms) => h.sim.updateSettings({ latencyMs: { sendTransaction: ms } }),
      normalMs: SEND_LATENCY_MS,
      acceptedAts: () => sequenceIds.flatMap((id) => h.sim.transfer(id)?.acceptedAt ?? []),
    });
    expect(exit.signal, `${worker.name} should have died of SIGKILL`).toBe('SIGKILL');
    const after = await snapshot();
    kills.push({
      submittedAtKill: after.published,
      sendsInFlightAtKill: inFlight,
      acceptedUnrecorded: after.unrecorded.filter((id) => !stranded.has(id)).length,
      strandedActive: (await queue.getJobCounts('active')).active ?? 0,
    });
    stranded = new Set(after.unrecorded);
    expect(published, 'the kill must come while transfers are still in flight').toBeLessThan(TRANSFERS);
    worker = await start();
  }

  // Until every transfer has an outcome (whatever it is: the assertions below say what it must be).
  let lastSeen: TransferEvent[] = [];
  try {
    await until(
      `an outcome for all ${TRANSFERS} transfers`,
      45_000,
      async () => {
        lastSeen = (await h.events()).filter((e) => e.event !== 'reconcile.completed');
        return new Set(lastSeen.map((e) => e.sequenceId)).size >= TRANSFERS ? true : undefined;
      },
      50,
    );
  } catch (error) {
    const byType = [...new Set(lastSeen.map((e) => e.event))].map((type) => `${type}: ${countBy(lastSeen, type).size}`);
    throw new Error(
      `${(error as Error).message}; transfers with events: ${byType.join(', ') || 'none'}; sendTransaction answers: ${JSON.stringify(h.sim.stats().requests.sendTransaction)}`,
      { cause: error },
    );
  }
  const settleMs = Date.now() - started;
  // Submitted is not the end: a recovered copy of a job may still run (and must send nothing). Wait until
  // no submit job is left anywhere, then look.
  await until(
    'an idle submit-transaction queue',
    15_000,
    async () => {
      const counts = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'waiting-children');
      return Object.values(counts).every((n) => n === 0) ? true : undefined;
    },
    100,
  );

  const last = await worker.stop(10_000);
  expect(last, `${worker.name} should exit 0 on SIGTERM`).toEqual({ code: 0, signal: null });
  return { h, sequenceIds, events: await h.events(), kills, settleMs, workers };
}

/** The assertions every kill scenario must pass; returns the figures worth printing. */
function checkExactlyOnce({ h, sequenceIds, events }: ScenarioResult) {
  const transferEvents = events.filter((e) => e.event !== 'reconcile.completed');

  // Nothing but transfer.submitted, and only for the transfers we enqueued.
  expect(transferEvents.filter((e) => e.event !== 'transfer.submitted').map((e) => `${e.event}@${e.sequenceId}`)).toEqual([]);
  const known = new Set(sequenceIds);
  expect(transferEvents.filter((e) => !known.has(e.sequenceId)).map((e) => e.sequenceId)).toEqual([]);

  // Exactly one transfer.submitted per sequenceId.
  const submitted = countBy(transferEvents, 'transfer.submitted');
  const notOnce = sequenceIds.filter((id) => submitted.get(id) !== 1).map((id) => `${id}: ${submitted.get(id) ?? 0}`);
  expect(notOnce, 'sequenceIds without exactly one transfer.submitted').toEqual([]);

  // Accepted upstream exactly once: a second accept would be a double spend, none a lost transfer.
  const sends = h.sim.stats().sends;
  const notAcceptedOnce = sequenceIds.filter((id) => sends[id]?.accepted !== 1).map((id) => `${id}: accepted ${sends[id]?.accepted ?? 0}`);
  expect(notAcceptedOnce, 'sequenceIds not accepted exactly once by the simulator').toEqual([]);

  expect(versionProblems(events)).toEqual([]);
  expect(transferEvents.every((e) => e.version === 1)).toBe(true);

  const duplicates409 = sequenceIds.reduce((sum, id) => sum + (sends[id]?.duplicates ?? 0), 0);
  const recoveredBy = { send: 0, 'get-transfer': 0, duplicate: 0, operator: 0 };
  for (const event of transferEvents) {
    if (event.event !== 'transfer.submitted') continue;
    recoveredBy[event.data.transfer === null ? event.data.recoveredBy : 'send'] += 1;
  }
  return { duplicates409, recoveredBy };
}

function report(title: string, result: ScenarioResult, figures: ReturnType<typeof checkExactlyOnce>): void {
  const requests = result.h.sim.stats().requests.sendTransaction;
  console.log(
    [
      `[${title}]`,
      `  transfers: ${result.sequenceIds.length}, worker processes: ${result.workers.length}, SIGKILLs: ${result.kills.length}`,
      ...result.kills.map(
        (k, i) =>
          `  kill ${i + 1}: at ${k.submittedAtKill} submitted, ${k.sendsInFlightAtKill} sends mid-request; accepted upstream but unrecorded: ${k.acceptedUnrecorded}; jobs stuck active: ${k.strandedActive}`,
      ),
      `  sendTransaction answers: ${JSON.stringify(requests)}`,
      `  409 duplicates: ${figures.duplicates409}; submitted via: ${JSON.stringify(figures.recoveredBy)}`,
      `  time to settle (enqueue → all submitted): ${result.settleMs} ms`,
    ].join('\n'),
  );
}

/** Three worker starts, and the waits in between: two kills (20 s, then 5 s for a held send, each), every outcome (45 s), an idle queue (15 s), a stop (10 s). */
const TEST_TIMEOUT_MS = processesTimeout(3, 120_000);

describe('a worker killed with SIGKILL while 500 transfers are in flight, then restarted', { timeout: TEST_TIMEOUT_MS }, () => {
  it('every transfer is accepted upstream once and published once', async () => {
    const result = await runKillScenario({
      name: 'kill-9',
      sim: { latencyMs: { sendTransaction: SEND_LATENCY_MS }, visibleAfterMs: 300, txidAfterMs: 3_600_000 },
      killAt: [100, 300],
    });
    const figures = checkExactlyOnce(result);
    report('SIGKILL ×2, upstream visible after 300 ms', result, figures);
    // The kills really cut into work in progress (else this test proves nothing).
    expect(result.kills.every((k) => k.strandedActive > 0 && k.acceptedUnrecorded > 0)).toBe(true);
    // A transfer cut off in `submitting` is resolved only once its send lease (> 10 s) has run out, long
    // after it became visible upstream (300 ms): looking first must find it, so not one send of an
    // already accepted sequenceId may reach upstream. Each 409 here is a second send that would be a
    // double spend at a provider without duplicate protection.
    expect(figures.duplicates409).toBe(0);
    expect(figures.recoveredBy['get-transfer']).toBeGreaterThan(0);
  });

  it('with sends timing out (processed, unanswered) and transfers not yet visible upstream, recovery goes through 409 and still sends once', async () => {
    const result = await runKillScenario({
      name: 'kill-9-timeouts',
      // Not visible for a minute: every uncertain send (cut off by the kill or by a time-out) can only be
      // resolved by resending and reading the 409.
      sim: { latencyMs: { sendTransaction: SEND_LATENCY_MS }, visibleAfterMs: 60_000, txidAfterMs: 3_600_000 },
      sendFault: { probability: 0.05, kinds: ['timeout'] },
      killAt: [100, 300],
    });
    const figures = checkExactlyOnce(result);
    report('SIGKILL ×2 with 5% send time-outs, upstream visible after 60 s', result, figures);
    expect(result.kills.every((k) => k.strandedActive > 0 && k.acceptedUnrecorded > 0)).toBe(true);
    expect(figures.duplicates409).toBeGreaterThan(0);
    expect(figures.recoveredBy.duplicate).toBeGreaterThan(0);
    expect(figures.recoveredBy['get-transfer']).toBe(0);
  });
});
