/**
 * One chaos run, as every scenario of the suite makes it: real worker processes sharing one AOF Redis and
 * one faulty custody simulator, SIGKILLed and replaced every few seconds, Redis crashed and restarted,
 * tokens expired, latencies redrawn, valid transfers enqueued in batches throughout. A scenario says how
 * much of each (ChaosScenario); the run returns everything that came out (ChaosRun), already checked
 * against the guarantees of docs/contract.md section 4 that hold whatever the faults (`problems`), so that each
 * test adds only what its scenario promises on top (e.g. "every transfer is broadcast").
 *
 * The random draws of the plan (fault sequences, latencies, which worker dies) come from the scenario's
 * seed, printed in the summary. Timing is real, so a seed does not replay a run step by step; it replays
 * the faults each endpoint answers, in order.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from '../../packages/producer/src/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { QueueName } from '../../src/queues/names.ts';
import {
  startSimulator,
  type DeepPartial,
  type FaultKind,
  type SimEndpoint,
  type Simulator,
  type SimulatorSettings,
  type SimulatorStats,
} from '../../src/simulator/index.ts';
import { buildUser } from '../../src/simulator/records.ts';
import { basicAuthorization } from '../../src/custody/http/auth.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { versionProblems, workerEnv } from '../helpers/harness.ts';
import { samplePayload, sampleSend, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { sleep, until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type ExitInfo, type WorkerProcess } from '../helpers/worker-process.ts';
import { consumedPerEndpoint, countInjected, randomFaultSequence, type FaultEntry } from './fault-plan.ts';
import { findNeedles, keyspaceHaystacks, streamHaystacks, type Haystack, type Needle } from './leak-scan.ts';
import { startTokenRecorder, type TokenRecorder } from './token-recorder.ts';
import { startGateway, type Gateway } from '../helpers/gateway.ts';
import type { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { simulatorClient } from '../helpers/sim-client.ts';

/** A fault rate per endpoint and the relative weight of each kind. */
export interface FaultMix {
  probability: number;
  weights: Partial<Record<FaultKind, number>>;
}

export interface ChaosScenario {
  /** Short, file-name safe: worker names, the summary, the evidence directory. */
  name: string;
  /** One line for the summary. */
  title: string;
  seed: number;
  transfers: number;
  workers: number;
  /** Enqueued in batches while the workers run, so kills and the Redis crash hit every stage of a transfer. */
  enqueueBatch: number;
  enqueueEveryMs: number;
  killEveryMs: number;
  /** Every issued token made invalid this often (0: never). */
  expireTokensEveryMs: number;
  /** Redis is SIGKILLed and restarted once this share of the transfers has ended, or after latestMs. */
  redisCrash: { atShare: number; latestMs: number } | undefined;
  /** Drawn up front into one sequence per endpoint, so the faults injected can be counted exactly. */
  faults: Record<SimEndpoint, FaultMix>;
  /** Latency is one setting per endpoint: redrawn in [min, max] every redrawLatencyEveryMs. */
  latencyMs: Partial<Record<SimEndpoint, readonly [number, number]>>;
  redrawLatencyEveryMs: number;
  /** Over the suite's defaults (the travel rule applies, Retry-After 1 s). */
  sim: DeepPartial<SimulatorSettings>;
  /** Worker environment over the suite's defaults (below). */
  env: Record<string, string>;
  /** The first `workers` pool slots run with their process clock `skewMs` ahead (clock-skew.ts), respawns included. */
  clockSkew?: { workers: number; skewMs: number };
  /** From the first enqueue until every transfer has its terminal event. */
  settleTimeoutMs: number;
  /**
   * A real HTTP gateway between the workers and the simulator (test/helpers/gateway.ts): this share of
   * the sends the simulator accepted (2xx) reach the worker as one of `statuses` instead, the send
   * recorded upstream all the same.
   */
  gateway?: { probability: number; statuses: readonly number[] };
  /**
   * This share of the transfers has its sequenceId used first by another client of the same provider
   * account, for a transaction of its own: no event of ours may claim it (submitted, broadcast).
   */
  foreignShare?: number;
}

/** Worker settings of every scenario: fast retries and polls, debug logs for the leak scan. */
export const BASE_WORKER_ENV: Record<string, string> = {
  CUSTODY_TIMEOUT: '1s',
  CUSTODY_CONNECT_TIMEOUT: '1s',
  JOB_LOCK_DURATION: '2s',
  SUBMIT_RETRY_BASE: '50ms',
  SUBMIT_RETRY_MAX: '500ms',
  SUBMIT_ATTEMPTS: '1000',
  TRACK_POLL_MIN: '200ms',
  TRACK_POLL_MAX: '1s',
  TRAVEL_RULE_CACHE_TTL: '1s',
  RECONCILE_EVERY: '5s',
  RECONCILE_GRACE: '5s',
  SHUTDOWN_TIMEOUT: '15s',
  // debug: the most log lines (and data in them) for the leak check; 'worker started' is info.
  LOG_LEVEL: 'debug',
};

const WORKER_START_TIMEOUT_MS = 60_000;
const SHUTDOWN_GRACE_MS = 20_000;
/** Worker output kept per process: far above what a run logs, so the leak check sees every line. */
export const MAX_OUTPUT_CHARS = 64 * 1024 * 1024;
/** More entries than any endpoint gets requests in a run, so faults last to the end. */
export const FAULT_SEQUENCE_LENGTH = 200_000;
/** Set to a directory to keep every worker's output there (for digging into a failed run). */
const LOG_DIR = process.env.CHAOS_LOG_DIR;
const CLOCK_SKEW_PRELOAD = new URL('./clock-skew.ts', import.meta.url).href;

/** The base seed of a test file: CHAOS_SEED to replay a run's fault plans, else random. */
export function chaosSeed(): number {
  const given = process.env.CHAOS_SEED;
  return given !== undefined && given !== '' ? Number(given) >>> 0 : randomBytes(4).readUInt32LE(0);
}

interface Kill {
  atMs: number;
  victim: string;
  exit: ExitInfo;
  terminalAtKill: number;
}

/** One line of `send outcome unknown` from a worker's log: what the failed send answered. */
interface UnknownSendLog {
  code: string;
  httpStatus: number | undefined;
  /** false: the send got a definite answer (a refusal) and is "unknown" only because an earlier one was. */
  maybeProcessed: boolean | undefined;
}

export interface ChaosRun {
  scenario: ChaosScenario;
  runMs: number;
  settleMs: number;
  sequenceIds: string[];
  /** Every entry of the stream, reconcile.completed included, in stream order. */
  events: TransferEvent[];
  /** Transfer events per sequenceId, in stream order. */
  bySequenceId: Map<string, TransferEvent[]>;
  eventTypes: Record<string, number>;
  stats: SimulatorStats;
  kills: Kill[];
  workersSpawned: number;
  workerOutputs: Array<{ name: string; skewed: boolean; text: string }>;
  unexpectedExits: string[];
  redisCrash: { atMs: number; downMs: number; terminalAtCrash: number } | undefined;
  tokenExpiries: number;
  tokensIssued: number;
  faultsPerKind: Partial<Record<FaultKind, number>>;
  faultsPerEndpoint: Record<string, Partial<Record<FaultKind, number>>>;
  exits: Array<{ name: string; exit: ExitInfo }>;
  /** Terminal outcome per transfer, e.g. `transfer.broadcast`, `transfer.failed CUSTODY_REJECTED`. */
  outcomes: Record<string, number>;
  unresolved: { total: number; thenBroadcast: number; thenExpired: number };
  recoveredBy: Record<string, number>;
  /** From the workers' logs: transfers with a send of unknown outcome, and those with a later send refused. */
  unknownSends: { transfers: number; refusedAfterUnknown: string[]; refusedAfterAccepted: string[] };
  /** Transfers accepted upstream that ended `expired` SEND_OUTCOME_UNKNOWN (allowed, but lookups missed them). */
  expiredButAccepted: string[];
  /** sequenceIds a foreign holder used first (scenario.foreignShare). */
  foreign: string[];
  /** Accepted sends the gateway answered with its own status, per status. */
  gatewayReplaced: Record<string, number>;
  skew: SkewFigures | undefined;
  leak: {
    needles: Needle[];
    tokens: number;
    logs: Haystack[];
    streamEntries: Haystack[];
    stored: Haystack[];
    hits: string[];
    /** raw of the first transfer's sendTransaction record, as the simulator answers it (for the control checks). */
    firstRecordRaw: string;
    user: ReturnType<typeof buildUser>;
  };
  /** Guarantee violations, by name: every list must be empty (expectGuarantees). */
  problems: Record<string, string[]>;
  /** Where the evidence of a violation was written, if any. */
  evidenceDir: string | undefined;
  summary: string;
  /** `id: events and simulator sends` for up to 10 of `ids`, for assertion messages. */
  sample(ids: string[]): string[];
}

export interface SkewFigures {
  skewMs: number;
  /** Process clock minus the test's clock when each worker logged 'worker started'. */
  startOffsets: Array<{ name: string; skewed: boolean; offsetMs: number }>;
  /**
   * Events whose `at` runs at least skewMs/2 ahead of their stream id (Redis's clock): none, since `at`
   * is Redis's TIME (it was the publisher's clock before).
   */
  eventsAhead: number;
  /** Transfers one of whose events has an `at` earlier than the event before it: none may. */
  atBackwards: number;
  /** The largest |at - stream id| among the other transfer events. */
  maxOtherOffsetMs: number;
  /** `send lease held` delays logged by skewed workers: they waited for another runner's lease. */
  leaseWaitsBySkewed: number;
  /** Sends answered "accepted" to skewed workers: they held send leases too. */
  submittedBySkewed: number;
}

/** Everything a run starts, stopped by cleanupChaos in this order whatever happened (call it in afterAll too). */
interface Resources {
  stopChaos?: () => void;
  queues: Queue[];
  producer?: TransferProducer;
  redis?: Redis;
  recorder?: TokenRecorder;
  sim?: Simulator;
  gateway?: Gateway;
  foreignClient?: CustodyClient;
  redisServer?: RedisServerHandle;
}
let resources: Resources = { queues: [] };

export async function cleanupChaos(): Promise<void> {
  const r = resources;
  resources = { queues: [] };
  r.stopChaos?.();
  await killAllWorkers();
  for (const queue of r.queues) await queue.close().catch(() => {});
  await r.producer?.close().catch(() => {});
  r.redis?.disconnect();
  await r.recorder?.close().catch(() => {});
  await r.foreignClient?.close().catch(() => {});
  await r.gateway?.close().catch(() => {});
  await r.sim?.close().catch(() => {});
  await r.redisServer?.stop().catch(() => {});
}

export async function runChaos(scenario: ChaosScenario): Promise<ChaosRun> {
  try {
    return await run(scenario);
  } finally {
    await cleanupChaos();
  }
}

async function run(scenario: ChaosScenario): Promise<ChaosRun> {
  const runStarted = Date.now();
  const random = seededRandom(scenario.seed);
  const randomInt = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  let chaosOn = true;
  resources.stopChaos = () => {
    chaosOn = false;
  };

  /*
   * AOF with `appendfsync always`: Redis fsyncs each write before it answers it. With `everysec` (the
   * Redis default) a crash loses up to the last second of writes that were already acknowledged: events
   * on the stream and ledger transitions (`submitting` with its lease, `submitted`, `broadcast`) would
   * vanish after the worker acted on them and consumers read them. The transfer would then be sent again
   * (only the provider's 409 stands between that and a double spend) and its events published a second
   * time under the same versions. So `appendonly yes` with `appendfsync always` is a production
   * requirement of the exactly-once guarantee, and the crash below is a SIGKILL, not a clean shutdown
   * (which flushes the AOF), to hold Redis to it.
   */
  const redisServer = await startRedisServer({ appendonly: true, extraArgs: ['--appendfsync', 'always'] });
  resources.redisServer = redisServer;
  const sim: Simulator = await startSimulator({
    port: 0,
    // Long and random, so a hit in the leak scan cannot be a coincidence.
    clientSecret: `chaos-secret-${randomBytes(24).toString('hex')}`,
    settings: {
      // The travel rule applies (upstream API 4.4), so the references on every payload are what lets them through.
      travelRule: { outgoingTxn: 1, mandatory: true },
      retryAfterSec: 1,
      ...scenario.sim,
    },
  });
  resources.sim = sim;
  const recorder = await startTokenRecorder(`${sim.url}/oauth/token`);
  resources.recorder = recorder;

  // The gateway: a 2xx of the simulator to a send, replaced by a status of the gateway's own.
  const gatewayReplaced: Record<string, number> = {};
  let gateway: Gateway | undefined;
  if (scenario.gateway) {
    const { probability, statuses } = scenario.gateway;
    gateway = await startGateway(sim.url);
    resources.gateway = gateway;
    gateway.setRule((request, originStatus, body) => {
      // Only acceptances: a 2xx `{ success: false }` (an injected refusal) hidden behind a gateway
      // error, for a sequenceId a foreign holder has, is the one case no client can tell apart.
      const accepted = originStatus >= 200 && originStatus < 300 && !/"success"\s*:\s*false/.test(body);
      if (request.endpoint !== 'sendTransaction' || !accepted || random() >= probability) return undefined;
      const status = statuses[randomInt(0, statuses.length - 1)]!;
      gatewayReplaced[status] = (gatewayReplaced[status] ?? 0) + 1;
      return { replaceStatus: status };
    });
  }
  const foreignClient = scenario.foreignShare ? simulatorClient(sim, { connections: 4 }) : undefined;
  resources.foreignClient = foreignClient;
  /** sequenceIds another client's transaction holds upstream (its send was accepted before ours). */
  const foreign = new Set<string>();

  const prefix = uniquePrefix(`chaos-${scenario.name}`);
  const env = workerEnv(sim, prefix, {
    REDIS_URL: redisServer.url,
    ...(gateway ? { CUSTODY_SDK_URL: gateway.url, CUSTODY_BASE_URL: gateway.url } : {}),
    CUSTODY_TOKEN_URL: recorder.url,
    ...BASE_WORKER_ENV,
    ...scenario.env,
  });
  const config = loadConfig(env);
  const keys = createKeys(config.queue.prefix, config.queue.eventsStream);

  const sequences = {} as Record<SimEndpoint, FaultEntry[]>;
  for (const [endpoint, plan] of Object.entries(scenario.faults) as Array<[SimEndpoint, FaultMix]>) {
    sequences[endpoint] = randomFaultSequence(FAULT_SEQUENCE_LENGTH, plan.probability, plan.weights, random);
    sim.setFault(endpoint, { sequence: sequences[endpoint] });
  }
  const redrawLatency = () => {
    const latencyMs: Partial<Record<SimEndpoint, number>> = {};
    for (const [endpoint, [min, max]] of Object.entries(scenario.latencyMs) as Array<[SimEndpoint, readonly [number, number]]>) {
      latencyMs[endpoint] = randomInt(min, max);
    }
    sim.updateSettings({ latencyMs });
  };
  redrawLatency();

  const redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
  resources.redis = redis;
  const producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });
  resources.producer = producer;
  const submitQueue = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
  const trackQueue = new Queue(QueueName.TRACK, { connection: redis, prefix });
  resources.queues.push(submitQueue, trackQueue);

  // ---- workers: a pool of `workers` slots; every process ever spawned is kept for the log checks.
  const allWorkers: Array<{ worker: WorkerProcess; slot: number; skewed: boolean }> = [];
  const live = new Map<WorkerProcess, number>();
  const killedByUs = new Set<WorkerProcess>();
  const unexpectedExits: string[] = [];
  const startOffsets: SkewFigures['startOffsets'] = [];
  let shuttingDown = false;
  const skew = scenario.clockSkew;
  const spawn = async (slot: number): Promise<WorkerProcess> => {
    const skewed = skew !== undefined && slot < skew.workers;
    const name = `${scenario.name}-worker-${allWorkers.length + 1}${skewed ? '-skewed' : ''}`;
    const worker = spawnWorker(skewed ? { ...env, CHAOS_CLOCK_SKEW_MS: String(skew.skewMs) } : env, {
      name,
      maxOutputChars: MAX_OUTPUT_CHARS,
      execArgv: skewed ? ['--import', CLOCK_SKEW_PRELOAD] : [],
    });
    allWorkers.push({ worker, slot, skewed });
    live.set(worker, slot);
    void worker.exited.then((info) => {
      live.delete(worker);
      if (!killedByUs.has(worker) && !shuttingDown) {
        unexpectedExits.push(
          `${worker.name} (pid ${worker.pid}) exited by itself: ${JSON.stringify(info)}; last output:\n${worker.output().slice(-3_000)}`,
        );
      }
    });
    const line = await worker.waitForLog('worker started', WORKER_START_TIMEOUT_MS);
    const seenAt = Date.now();
    startOffsets.push({ name, skewed, offsetMs: Date.parse(String((JSON.parse(line) as { time?: unknown }).time)) - seenAt });
    return worker;
  };
  await Promise.all(Array.from({ length: scenario.workers }, (_, slot) => spawn(slot)));

  // ---- the events, read incrementally
  const events: TransferEvent[] = [];
  const terminal = new Set<string>();
  let cursor = '-';
  const readNewEvents = async () => {
    for (;;) {
      const entries = (await redis.xrange(config.queue.eventsStream, cursor, '+', 'COUNT', 5_000)) as Array<[string, string[]]>;
      for (const entry of entries) {
        const event = parseStreamEntry(entry);
        events.push(event);
        if (TERMINAL_EVENTS.has(event.event)) terminal.add(event.sequenceId);
      }
      if (entries.length === 0) return;
      cursor = `(${entries[entries.length - 1]![0]}`;
      if (entries.length < 5_000) return;
    }
  };

  // ---- enqueue: valid payloads with travel-rule references, in batches
  const sequenceIds: string[] = [];
  const enqueueStarted = Date.now();
  let enqueued = 0;
  /** Another client sends its own transaction under the sequenceId first (retried through injected faults). */
  const sendForeign = async (sequenceId: string) => {
    for (let attempt = 1; attempt <= 20; attempt++) {
      try {
        await foreignClient!.sendTransaction(310, sampleSend(sequenceId));
        foreign.add(sequenceId);
        return;
      } catch {
        if ((sim.stats().sends[sequenceId]?.accepted ?? 0) > 0) {
          foreign.add(sequenceId);
          return;
        }
        await sleep(50);
      }
    }
  };
  const submitWithRetry = async (payload: ValidSamplePayload) => {
    if (foreignClient && random() < scenario.foreignShare!) await sendForeign(payload.halfSigned.sequenceId);
    // A submit cut off by the Redis crash is simply repeated: the job id derived from the sequenceId (and one
    // sequenceId being one transfer) makes it idempotent; submit() rejects within its bound while Redis is down.
    for (let attempt = 1; ; attempt++) {
      try {
        await producer.submit(payload);
        return;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(250);
      }
    }
  };
  const enqueue = (async () => {
    for (let batch = 0; batch * scenario.enqueueBatch < scenario.transfers; batch++) {
      const size = Math.min(scenario.enqueueBatch, scenario.transfers - batch * scenario.enqueueBatch);
      const payloads = Array.from({ length: size }, (_, i) =>
        samplePayload({ walletId: 310 + ((batch + i) % 7), travelRule: { reference: `tr-chaos-${batch}-${i}` } }),
      );
      sequenceIds.push(...payloads.map((p) => p.halfSigned.sequenceId));
      await Promise.all(payloads.map(submitWithRetry));
      enqueued += payloads.length;
      await sleep(scenario.enqueueEveryMs);
    }
  })();
  let enqueueError: unknown;
  enqueue.catch((error: unknown) => {
    enqueueError = error;
  });

  // ---- chaos: kills, the Redis crash, token expiries, redrawn latencies; until everything has settled
  const chaosErrors: unknown[] = [];
  const kills: Kill[] = [];
  let redisCrash: ChaosRun['redisCrash'];
  let tokenExpiries = 0;
  const loop = async (everyMs: number, step: () => Promise<void>) => {
    if (everyMs <= 0) return;
    try {
      while (chaosOn) {
        await sleep(everyMs);
        if (chaosOn) await step();
      }
    } catch (error) {
      chaosErrors.push(error);
      chaosOn = false;
    }
  };
  const chaos = Promise.all([
    loop(scenario.killEveryMs, async () => {
      const candidates = [...live.keys()];
      const victim = candidates[randomInt(0, candidates.length - 1)];
      if (!victim) return;
      const slot = live.get(victim)!;
      killedByUs.add(victim);
      victim.kill('SIGKILL');
      const exit = await victim.waitForExit(10_000);
      kills.push({ atMs: Date.now() - enqueueStarted, victim: victim.name, exit, terminalAtKill: terminal.size });
      await spawn(slot);
    }),
    loop(scenario.redisCrash ? 1_000 : 0, async () => {
      const crash = scenario.redisCrash!;
      if (redisCrash) return;
      const elapsed = Date.now() - enqueueStarted;
      if (terminal.size < scenario.transfers * crash.atShare && elapsed < crash.latestMs) return;
      const down = Date.now();
      await redisServer.kill();
      await redisServer.restart();
      redisCrash = { atMs: down - enqueueStarted, downMs: Date.now() - down, terminalAtCrash: terminal.size };
    }),
    loop(scenario.expireTokensEveryMs, async () => {
      sim.expireTokens();
      tokenExpiries += 1;
    }),
    loop(Object.keys(scenario.latencyMs).length > 0 ? scenario.redrawLatencyEveryMs : 0, async () => redrawLatency()),
  ]);

  // ---- settle: every enqueued sequenceId has a terminal event (bounded)
  const settleDeadline = enqueueStarted + scenario.settleTimeoutMs;
  let settledAt: number | undefined;
  try {
    while (settledAt === undefined) {
      await readNewEvents();
      if (enqueued === scenario.transfers && sequenceIds.every((id) => terminal.has(id))) {
        settledAt = Date.now();
        break;
      }
      if (chaosErrors.length > 0) throw chaosErrors[0];
      if (enqueueError !== undefined) throw enqueueError;
      if (unexpectedExits.length > 0 && live.size === 0) throw new Error(`every worker is gone:\n${unexpectedExits.join('\n')}`);
      if (Date.now() > settleDeadline)
        throw new Error(
          `[${scenario.name} seed ${scenario.seed}] not settled within ${scenario.settleTimeoutMs} ms:\n${await diagnostic()}`,
        );
      await sleep(500);
    }
  } finally {
    chaosOn = false;
    await chaos;
    await enqueue.catch(() => {});
  }
  await enqueue;
  if (chaosErrors.length > 0) throw chaosErrors[0];

  async function diagnostic(): Promise<string> {
    const states = await redis.pipeline(sequenceIds.map((id) => ['hget', keys.transfer(id), 'state'])).exec();
    const byState: Record<string, number> = {};
    for (const [, state] of states ?? []) byState[String(state ?? 'no record')] = (byState[String(state ?? 'no record')] ?? 0) + 1;
    const byType: Record<string, number> = {};
    for (const event of events) byType[event.event] = (byType[event.event] ?? 0) + 1;
    const stuck = sequenceIds.filter((id) => !terminal.has(id)).slice(0, 5);
    const records = await Promise.all(
      stuck.map(
        async (id) => `  ${id}: ${JSON.stringify(await redis.hgetall(keys.transfer(id)))} sends=${JSON.stringify(sim.stats().sends[id])}`,
      ),
    );
    return [
      `enqueued ${enqueued}/${scenario.transfers}, terminal ${terminal.size}`,
      `events per type: ${JSON.stringify(byType)}`,
      `ledger states: ${JSON.stringify(byState)}`,
      `submit queue: ${JSON.stringify(await submitQueue.getJobCounts())}; track queue: ${JSON.stringify(await trackQueue.getJobCounts())}`,
      `sim requests: ${JSON.stringify(sim.stats().requests)}`,
      `some unsettled ledger records (payload left out):\n${records.join('\n').replace(/"payload":"(?:[^"\\]|\\.)*",?/g, '')}`,
      `unexpected worker exits: ${unexpectedExits.length}`,
    ].join('\n');
  }

  // A stalled copy of a job may still run after the last terminal event (and must publish and send
  // nothing): wait until no submit or track job is left anywhere before looking.
  await untilQueuesIdle([submitQueue, trackQueue]);

  // ---- stop: SIGTERM to every live worker; each must drain and exit 0
  shuttingDown = true;
  const exits = await Promise.all(
    [...live.keys()].map(async (worker) => ({ name: worker.name, exit: await worker.stop(SHUTDOWN_GRACE_MS) })),
  );

  await readNewEvents();
  const stats = sim.stats();
  const consumed = await consumedPerEndpoint(sim.url);
  const tokens = recorder.tokens();
  const runMs = Date.now() - runStarted;
  const settleMs = settledAt - enqueueStarted;

  // ---- figures
  const known = new Set(sequenceIds);
  const transferEvents = events.filter((e) => e.event !== 'reconcile.completed');
  const bySequenceId = new Map<string, TransferEvent[]>();
  for (const event of transferEvents) {
    const list = bySequenceId.get(event.sequenceId) ?? [];
    list.push(event);
    bySequenceId.set(event.sequenceId, list);
  }
  const eventTypes: Record<string, number> = {};
  for (const event of events) eventTypes[event.event] = (eventTypes[event.event] ?? 0) + 1;
  /** Sends of ours the simulator accepted (a foreign holder's own send is not one). */
  const accepted = (id: string) => (stats.sends[id]?.accepted ?? 0) - (foreign.has(id) ? 1 : 0);
  const codeOf = (event: TransferEvent): string | undefined => {
    switch (event.event) {
      case 'transfer.submitted':
      case 'transfer.broadcast':
      case 'transfer.cancelled':
      case 'transfer.halted':
      case 'reconcile.completed':
        return undefined;
      default:
        return event.data.code;
    }
  };

  const outcomes: Record<string, number> = {};
  const unresolved = { total: 0, thenBroadcast: 0, thenExpired: 0 };
  const recoveredBy: Record<string, number> = {};
  const expiredButAccepted: string[] = [];
  const problems: Record<string, string[]> = {
    'events of sequenceIds never enqueued': [...bySequenceId.keys()].filter((id) => !known.has(id)),
    'sequenceIds without exactly one terminal event': [],
    'events after a terminal event': [],
    'event sequences outside [unresolved] submitted broadcast|expired(TRACKING_DEADLINE)|halted, [unresolved] expired(SEND_OUTCOME_UNKNOWN|SEQUENCE_ID_IN_USE), failed':
      [],
    'sequenceIds accepted twice by the simulator (double spend)': [],
    'transfer.failed for a transfer accepted upstream': [],
    'transfer.submitted for a transfer never accepted upstream': [],
    'broadcast txid differs from the simulator': [],
    "another client's transaction claimed (submitted or broadcast of a foreign holder's sequenceId)": [],
    'foreign holder not reported as SEQUENCE_ID_IN_USE': [],
    'foreign holder reported SEQUENCE_ID_IN_USE, then expired with another code': [],
    'repeated or missing event versions': versionProblems(events).slice(0, 50),
  };
  const flag = (name: string, id: string) => problems[name]!.push(id);
  for (const id of sequenceIds) {
    const list = bySequenceId.get(id) ?? [];
    const types = list.map((e) => e.event);
    const terminals = list.filter((e) => TERMINAL_EVENTS.has(e.event));
    if (terminals.length !== 1) flag('sequenceIds without exactly one terminal event', id);
    const firstTerminal = types.findIndex((type) => TERMINAL_EVENTS.has(type));
    if (firstTerminal !== -1 && firstTerminal !== list.length - 1) flag('events after a terminal event', id);
    const last = list[list.length - 1];
    const shape = list.map((e) => (e.event === 'transfer.expired' ? `expired:${codeOf(e)}` : e.event.slice('transfer.'.length))).join(' ');
    if (
      !/^(unresolved )?(submitted (broadcast|expired:TRACKING_DEADLINE|halted)|expired:(SEND_OUTCOME_UNKNOWN|SEQUENCE_ID_IN_USE))$|^failed$/.test(
        shape,
      )
    ) {
      flag(
        'event sequences outside [unresolved] submitted broadcast|expired(TRACKING_DEADLINE)|halted, [unresolved] expired(SEND_OUTCOME_UNKNOWN|SEQUENCE_ID_IN_USE), failed',
        id,
      );
    }
    if (accepted(id) > 1) flag('sequenceIds accepted twice by the simulator (double spend)', id);
    if (types.includes('transfer.failed') && accepted(id) > 0) flag('transfer.failed for a transfer accepted upstream', id);
    if (types.includes('transfer.submitted') && accepted(id) === 0) flag('transfer.submitted for a transfer never accepted upstream', id);
    const broadcast = list.find((e) => e.event === 'transfer.broadcast');
    if (foreign.has(id)) {
      if (types.includes('transfer.submitted') || broadcast !== undefined)
        flag("another client's transaction claimed (submitted or broadcast of a foreign holder's sequenceId)", id);
      const inUse = list.some((e) => e.event === 'transfer.unresolved' && e.data.code === 'SEQUENCE_ID_IN_USE');
      if (!inUse && !types.includes('transfer.failed')) flag('foreign holder not reported as SEQUENCE_ID_IN_USE', id);
      if (inUse && last?.event === 'transfer.expired' && codeOf(last) !== 'SEQUENCE_ID_IN_USE')
        flag('foreign holder reported SEQUENCE_ID_IN_USE, then expired with another code', id);
    } else if (broadcast !== undefined && broadcast.data.txid !== sim.transfer(id)?.txid)
      flag('broadcast txid differs from the simulator', id);

    if (last !== undefined && TERMINAL_EVENTS.has(last.event)) {
      const outcome = last.event === 'transfer.broadcast' ? last.event : `${last.event} ${codeOf(last) ?? ''}`.trim();
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
      if (last.event === 'transfer.expired' && codeOf(last) === 'SEND_OUTCOME_UNKNOWN' && accepted(id) > 0) expiredButAccepted.push(id);
    }
    if (types.includes('transfer.unresolved')) {
      unresolved.total += 1;
      if (last?.event === 'transfer.broadcast') unresolved.thenBroadcast += 1;
      if (last?.event === 'transfer.expired') unresolved.thenExpired += 1;
    }
    const submitted = list.find((e) => e.event === 'transfer.submitted');
    if (submitted) {
      const how = submitted.data.transfer === null ? submitted.data.recoveredBy : 'send answer';
      recoveredBy[how] = (recoveredBy[how] ?? 0) + 1;
    }
  }

  const faultsPerEndpoint: Record<string, Partial<Record<FaultKind, number>>> = {};
  const faultsPerKind: Partial<Record<FaultKind, number>> = {};
  for (const endpoint of Object.keys(sequences) as SimEndpoint[]) {
    const counts = countInjected(sequences[endpoint], consumed[endpoint] ?? 0);
    faultsPerEndpoint[endpoint] = counts;
    for (const [kind, n] of Object.entries(counts) as Array<[FaultKind, number]>) faultsPerKind[kind] = (faultsPerKind[kind] ?? 0) + n;
  }
  const exhausted = (Object.keys(sequences) as SimEndpoint[]).filter((e) => (consumed[e] ?? 0) >= FAULT_SEQUENCE_LENGTH);

  // ---- the workers' own account of sends with unknown outcome
  const workerOutputs = allWorkers.map(({ worker, skewed }) => ({ name: worker.name, skewed, text: worker.output() }));
  const unknownById = new Map<string, UnknownSendLog[]>();
  for (const { text } of workerOutputs) {
    for (const line of text.split('\n')) {
      if (!line.includes('"send outcome unknown: it may have gone out"')) continue;
      let entry: { sequenceId?: string; code?: string; err?: { httpStatus?: number; maybeProcessed?: boolean } };
      try {
        entry = JSON.parse(line) as typeof entry;
      } catch {
        continue; // a line cut short by SIGKILL
      }
      if (!entry.sequenceId) continue;
      const list = unknownById.get(entry.sequenceId) ?? [];
      list.push({ code: String(entry.code), httpStatus: entry.err?.httpStatus, maybeProcessed: entry.err?.maybeProcessed });
      unknownById.set(entry.sequenceId, list);
    }
  }
  const refusedAfterUnknown = [...unknownById].filter(([, list]) => list.some((log) => log.maybeProcessed === false)).map(([id]) => id);
  const unknownSends = {
    transfers: unknownById.size,
    refusedAfterUnknown,
    refusedAfterAccepted: refusedAfterUnknown.filter((id) => accepted(id) > 0),
  };

  // ---- the skewed clock, seen from outside: start lines, and events' `at` against their stream ids
  let skewFigures: SkewFigures | undefined;
  if (skew) {
    let eventsAhead = 0;
    let maxOtherOffsetMs = 0;
    for (const event of transferEvents) {
      const offset = Date.parse(event.at) - Number(event.id.split('-')[0]);
      if (offset >= skew.skewMs / 2) eventsAhead += 1;
      else maxOtherOffsetMs = Math.max(maxOtherOffsetMs, Math.abs(offset));
    }
    let atBackwards = 0;
    for (const events of bySequenceId.values()) {
      if (events.some((event, i) => i > 0 && Date.parse(event.at) < Date.parse(events[i - 1]!.at))) atBackwards += 1;
    }
    const countInSkewed = (needle: string) =>
      workerOutputs.filter((w) => w.skewed).reduce((n, w) => n + w.text.split(needle).length - 1, 0);
    skewFigures = {
      skewMs: skew.skewMs,
      startOffsets,
      eventsAhead,
      atBackwards,
      maxOtherOffsetMs,
      leaseWaitsBySkewed: countInSkewed('"reason":"send lease held"'),
      submittedBySkewed: countInSkewed('"msg":"transfer submitted"'),
    };
  }

  // ---- security: the forbidden strings, and where they must not be
  const user = buildUser(sim.clientId);
  const originator = sim.settings().travelRule.dataJson;
  const needles: Needle[] = [
    { label: 'client secret', value: sim.clientSecret },
    { label: 'Basic credentials', value: basicAuthorization(sim.clientId, sim.clientSecret).slice('Basic '.length) },
    ...tokens.map((value, i) => ({ label: `bearer token #${i + 1}`, value })),
    ...(['displayName', 'email', 'phoneNumber', 'photoURL', 'lastLoginAt', 'created_at'] as const).map((field) => ({
      label: `raw.user.${field}`,
      value: String(user[field]),
    })),
    { label: 'travel-rule originator id number', value: originator.identification.number },
    { label: 'travel-rule originator address', value: originator.address.address1 },
  ];
  const logs: Haystack[] = workerOutputs.map((w) => ({ where: `${w.name} output`, text: w.text }));
  const streamEntries = await streamHaystacks(redis, config.queue.eventsStream);
  const stored = await keyspaceHaystacks(redis, `${prefix}*`);
  const hits = findNeedles([...logs, ...streamEntries, ...stored], needles);
  const firstAccepted = sequenceIds.find((id) => sim.transfer(id) !== undefined);
  const firstRecordRaw = firstAccepted === undefined ? '' : sim.transfer(firstAccepted)!.record.raw;

  const sample = (ids: string[]) =>
    ids
      .slice(0, 10)
      .map(
        (id) =>
          `${id}: ${JSON.stringify((bySequenceId.get(id) ?? []).map((e) => `${e.event}@v${e.version}`))} sends=${JSON.stringify(stats.sends[id])}`,
      );

  // ---- evidence: whatever a violation (or an allowed but odd outcome) needs to be diagnosed without running again
  const violated = Object.entries(problems).filter(([, ids]) => ids.length > 0);
  const notable = Object.entries({ 'expired SEND_OUTCOME_UNKNOWN although accepted upstream': expiredButAccepted }).filter(
    ([, ids]) => ids.length > 0,
  );
  let evidenceDir: string | undefined;
  if (LOG_DIR || violated.length > 0 || notable.length > 0) {
    evidenceDir = LOG_DIR
      ? join(LOG_DIR, `${scenario.name}-seed${scenario.seed}`)
      : await mkdtemp(join(tmpdir(), `chaos-${scenario.name}-seed${scenario.seed}-`));
    await mkdir(evidenceDir, { recursive: true });
    for (const w of workerOutputs) await writeFile(join(evidenceDir, `${w.name}.log`), w.text);
    if (violated.length > 0 || notable.length > 0) {
      const ids = [...new Set([...violated, ...notable].flatMap(([, list]) => list.filter((id) => known.has(id)).slice(0, 20)))];
      const detail = await Promise.all(
        ids.map(async (id) => {
          const record = await redis.hgetall(keys.transfer(id));
          delete record.payload;
          return {
            sequenceId: id,
            events: bySequenceId.get(id) ?? [],
            simulatorSends: stats.sends[id] ?? null,
            simulatorTransfer: sim.transfer(id) ? { ...sim.transfer(id)!, record: undefined } : null,
            ledgerRecord: record,
            unknownSendLogs: unknownById.get(id) ?? [],
            workerLogLines: workerOutputs.flatMap((w) =>
              w.text
                .split('\n')
                .filter((line) => line.includes(id))
                .map((line) => `${w.name}: ${line}`),
            ),
          };
        }),
      );
      await writeFile(
        join(evidenceDir, 'evidence.json'),
        JSON.stringify(
          {
            scenario: scenario.name,
            seed: scenario.seed,
            problems: Object.fromEntries(violated),
            notable: Object.fromEntries(notable),
            detail,
          },
          null,
          2,
        ),
      );
    }
  }

  const tally = (counts: Record<string, number>) =>
    Object.entries(counts)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
  const sendAnswers = stats.requests.sendTransaction;
  const summary = [
    `[chaos:${scenario.name}] ${scenario.title}`,
    `  seed ${scenario.seed} (CHAOS_SEED); ${scenario.transfers} transfers, ${scenario.workers} worker processes${skew ? ` (${skew.workers} with its clock ${skew.skewMs / 1000} s ahead)` : ''}, Redis AOF appendfsync always`,
    `  run: ${(runMs / 1000).toFixed(1)} s; time to settle (first enqueue → every transfer terminal): ${(settleMs / 1000).toFixed(1)} s`,
    `  SIGKILLs: ${kills.length} (worker processes spawned: ${allWorkers.length}); unexpected worker exits: ${unexpectedExits.length}`,
    `  Redis crash (SIGKILL) + restart: ${redisCrash ? `at ${(redisCrash.atMs / 1000).toFixed(1)} s with ${redisCrash.terminalAtCrash} transfers ended, down ${redisCrash.downMs} ms` : 'not done'}`,
    `  token expiries forced: ${tokenExpiries}; tokens issued: ${tokens.length}; 401 answers: sendTransaction ${sendAnswers['401'] ?? 0}, getWalletTransaction ${stats.requests.getWalletTransaction['401'] ?? 0}`,
    `  latency redrawn per endpoint (ms): ${Object.keys(scenario.latencyMs).length ? JSON.stringify(scenario.latencyMs) : 'none'}`,
    `  faults injected per kind: ${JSON.stringify(faultsPerKind)}`,
    `  faults injected per endpoint: ${JSON.stringify(faultsPerEndpoint)}${exhausted.length ? ` (sequences used up: ${exhausted.join(', ')})` : ''}`,
    `  409s seen: ${sendAnswers['409'] ?? 0} answered (${sequenceIds.reduce((sum, id) => sum + (stats.sends[id]?.duplicates ?? 0), 0)} duplicate sends refused, some of them unanswered by a fault)`,
    `  upstream answers per endpoint: ${JSON.stringify(stats.requests)}`,
    `  outcomes: ${tally(outcomes)}`,
    `  transfer.unresolved: ${unresolved.total} (then broadcast ${unresolved.thenBroadcast}, then expired ${unresolved.thenExpired}); expired SEND_OUTCOME_UNKNOWN although accepted upstream: ${expiredButAccepted.length}`,
    `  sends of unknown outcome (worker logs): ${unknownSends.transfers} transfers; a later send refused: ${refusedAfterUnknown.length}, of which accepted upstream: ${unknownSends.refusedAfterAccepted.length} (ended failed: ${unknownSends.refusedAfterAccepted.filter((id) => bySequenceId.get(id)?.some((e) => e.event === 'transfer.failed')).length})`,
    `  transfer.submitted via: ${JSON.stringify(recoveredBy)}`,
    ...(scenario.gateway ? [`  gateway: accepted sends answered instead with ${JSON.stringify(gatewayReplaced)}`] : []),
    ...(scenario.foreignShare
      ? [
          `  foreign holders: ${foreign.size} sequenceIds used first by another client; reported SEQUENCE_ID_IN_USE: ${[...foreign].filter((id) => bySequenceId.get(id)?.some((e) => e.event === 'transfer.unresolved' && e.data.code === 'SEQUENCE_ID_IN_USE')).length}`,
        ]
      : []),
    `  reconciliation runs: ${eventTypes['reconcile.completed'] ?? 0} completed, ${logs.reduce((n, log) => n + log.text.split('another reconciliation is running, skipped').length - 1, 0)} skipped (lock held)`,
    `  events: ${JSON.stringify(eventTypes)}`,
    ...(skewFigures
      ? [
          `  clock skew: start offsets ${skewFigures.startOffsets
            .map((o) => `${o.skewed ? 'skewed' : 'normal'} ${(o.offsetMs / 1000).toFixed(1)} s`)
            .filter((v, i, all) => all.indexOf(v) === i)
            .join(
              ', ',
            )}; events published ahead by ≥ ${skewFigures.skewMs / 2000} s: ${skewFigures.eventsAhead}, transfers whose at went back: ${skewFigures.atBackwards}, other events within ${skewFigures.maxOtherOffsetMs} ms; skewed workers: ${skewFigures.submittedBySkewed} sends accepted, ${skewFigures.leaseWaitsBySkewed} waits for another's send lease`,
        ]
      : []),
    `  guarantees: ${Object.entries(problems)
      .map(([name, ids]) => `${ids.length} ${name}`)
      .join('; ')}`,
    `  SIGTERM exits: ${exits.map((e) => `${e.name}=${e.exit.code ?? e.exit.signal}`).join(', ')}`,
    `  leak scan: ${needles.length} strings (${tokens.length} tokens) in ${logs.length} worker outputs (${logs.reduce((sum, log) => sum + log.text.split('\n').length, 0)} lines, ${logs.reduce((sum, log) => sum + log.text.length, 0)} chars), ${streamEntries.length} stream entries, ${stored.length} Redis keys: ${hits.length} hits`,
    ...(evidenceDir ? [`  worker logs${violated.length + notable.length ? ' and evidence.json' : ''} kept in ${evidenceDir}`] : []),
  ].join('\n');

  return {
    scenario,
    runMs,
    settleMs,
    sequenceIds,
    events,
    bySequenceId,
    eventTypes,
    stats,
    kills,
    workersSpawned: allWorkers.length,
    workerOutputs,
    unexpectedExits,
    redisCrash,
    tokenExpiries,
    tokensIssued: tokens.length,
    faultsPerKind,
    faultsPerEndpoint,
    exits,
    outcomes,
    unresolved,
    recoveredBy,
    unknownSends,
    expiredButAccepted,
    foreign: [...foreign],
    gatewayReplaced,
    skew: skewFigures,
    leak: { needles, tokens: tokens.length, logs, streamEntries, stored, hits, firstRecordRaw, user },
    problems,
    evidenceDir,
    summary,
    sample,
  };
}

/** docs/contract.md section 4, whatever the scenario: every list of `run.problems` empty, clean exits, no leak. */
/** Waits until none of `queues` holds a job that could still run (active, waiting, delayed or prioritized). */
export async function untilQueuesIdle(queues: readonly Queue[]): Promise<void> {
  await until(
    'idle submit and track queues',
    60_000,
    async () => {
      for (const queue of queues) {
        const counts = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'waiting-children');
        if (Object.values(counts).some((n) => n > 0)) return undefined;
      }
      return true;
    },
    250,
  );
}

export function expectGuarantees(run: ChaosRun): void {
  expect(run.unexpectedExits, 'workers that died without being killed').toEqual([]);
  for (const [name, ids] of Object.entries(run.problems)) {
    expect(
      name.startsWith('repeated') ? ids.slice(0, 10) : run.sample(ids),
      `${name} (seed ${run.scenario.seed}; evidence: ${run.evidenceDir ?? 'none'})`,
    ).toEqual([]);
  }
  expect(
    run.exits.map((e) => `${e.name}: ${JSON.stringify(e.exit)}`),
    'SIGTERM exits',
  ).toEqual(run.exits.map((e) => `${e.name}: ${JSON.stringify({ code: 0, signal: null })}`));
  expect(run.leak.hits, 'secrets or personal data found').toEqual([]);
}

/** The run really was chaotic (else it proves little). */
export function expectChaos(run: ChaosRun, minKills = 3): void {
  expect(run.kills.length).toBeGreaterThanOrEqual(minKills);
  expect(run.kills.every((kill) => kill.exit.signal === 'SIGKILL')).toBe(true);
  if (run.scenario.redisCrash) {
    expect(run.redisCrash, 'Redis was crashed and restarted mid-run').toBeDefined();
    expect(run.redisCrash!.terminalAtCrash).toBeLessThan(run.scenario.transfers);
  }
}

/** The skewed workers really ran ahead, published events, and the others did not. */
export function expectSkew(run: ChaosRun): void {
  const skew = run.skew;
  expect(skew, 'scenario with clockSkew').toBeDefined();
  const margin = 5_000;
  for (const offset of skew!.startOffsets) {
    if (offset.skewed) {
      expect(offset.offsetMs, `${offset.name}: process clock ahead by about ${skew!.skewMs} ms`).toBeGreaterThan(skew!.skewMs - margin);
      expect(offset.offsetMs, `${offset.name}: process clock ahead by about ${skew!.skewMs} ms`).toBeLessThan(skew!.skewMs + margin);
    } else {
      expect(Math.abs(offset.offsetMs), `${offset.name}: process clock not skewed`).toBeLessThan(margin);
    }
  }
  expect(skew!.startOffsets.filter((o) => o.skewed).length, 'skewed workers ran').toBeGreaterThan(0);
  // `at` is Redis's TIME inside the transition, whoever publishes: a skewed worker's events are not ahead,
  // and within a transfer `at` never goes back.
  expect(skew!.eventsAhead, 'events whose `at` runs ahead of Redis time (a skewed publisher)').toBe(0);
  expect(skew!.atBackwards, 'transfers whose `at` went back from one event to the next').toBe(0);
  expect(skew!.submittedBySkewed, 'sends accepted for a skewed worker (it held send leases)').toBeGreaterThan(0);
}
