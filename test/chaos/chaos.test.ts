/**
 * The chaos run (`npm run test:chaos`): the whole machine at once, as production could see it on a bad
 * day. Three real worker processes share one AOF Redis and one faulty custody simulator; every few
 * seconds one worker is SIGKILLed and replaced, Redis itself is killed and restarted once, tokens are
 * expired under the workers' feet, and every endpoint answers 5xx, 429, garbage or nothing at random.
 * 2,000 valid transfers go through all of it. What must come out is exactly what CONTRACT section 4
 * promises: each sequenceId accepted upstream once, one `transfer.submitted` then one
 * `transfer.broadcast`, versions 1 and 2, and, from the same run, no secret and no person's data in any
 * log line, event or Redis value.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from '../../src/events/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { TransferProducer } from '../../src/producer.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startSimulator, type FaultKind, type SimEndpoint, type Simulator } from '../../src/simulator/index.ts';
import { buildUser } from '../../src/simulator/records.ts';
import { basicAuthorization } from '../../src/upstream/auth.ts';
import { countBy, versionProblems, workerEnv } from '../helpers/harness.ts';
import { samplePayload, type SamplePayload } from '../helpers/payloads.ts';
import { startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type ExitInfo, type WorkerProcess } from '../helpers/worker-process.ts';
import { consumedPerEndpoint, countInjected, randomFaultSequence, type FaultEntry } from './fault-plan.ts';
import { findNeedles, keyspaceHaystacks, streamHaystacks, type Haystack, type Needle } from './leak-scan.ts';
import { startTokenRecorder, type TokenRecorder } from './token-recorder.ts';

const TRANSFERS = 2_000;
const WORKERS = 3;
/** Enqueued in batches while the workers run, so kills and the Redis crash hit every stage of a transfer. */
const ENQUEUE_BATCH = 50;
const ENQUEUE_EVERY_MS = 1_500;
const KILL_EVERY_MS = 3_000;
const EXPIRE_TOKENS_EVERY_MS = 3_000;
/** Latency is one setting per endpoint: redrawn this often. Visibility and txid delays are per transfer. */
const REDRAW_DELAYS_EVERY_MS = 500;
const MAX_VISIBLE_AFTER_MS = 1_500;
const MAX_TXID_AFTER_MS = 1_500;
const MAX_LATENCY_MS = 40;
/** Redis is crashed once this share of the transfers has ended (mid-run), or after REDIS_CRASH_LATEST_MS. */
const REDIS_CRASH_AT_SHARE = 0.3;
const REDIS_CRASH_LATEST_MS = 60_000;
/** From the first enqueue until every transfer has its terminal event. */
const SETTLE_TIMEOUT_MS = 300_000;
const WORKER_START_TIMEOUT_MS = 60_000;
const SHUTDOWN_GRACE_MS = 20_000;
/** Worker output kept per process: far above what a run logs, so the leak check sees every line. */
const MAX_OUTPUT_CHARS = 64 * 1024 * 1024;
/** More entries than any endpoint gets requests in a run, so faults last to the end. */
const FAULT_SEQUENCE_LENGTH = 200_000;
/** Set to a directory to keep every worker's output there (for digging into a failed run). */
const LOG_DIR = process.env.CHAOS_LOG_DIR;

/**
 * Moderate rates: enough that every kind hits every stage many times, low enough that the run settles.
 * 429 stays rare on sendTransaction: each one pauses the whole submit queue for Retry-After (1 s).
 * 'timeout' on the token endpoint goes through the token recorder as well: it drops its upstream
 * request when the worker gives up after CUSTODY_TIMEOUT.
 */
const FAULTS: Record<SimEndpoint, { probability: number; weights: Partial<Record<FaultKind, number>> }> = {
  sendTransaction: { probability: 0.06, weights: { '5xx': 3, timeout: 3, malformed: 2, '429': 1 } },
  getTransfer: { probability: 0.05, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  getWalletTransaction: { probability: 0.05, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  // Few requests (the travel-rule answer is cached, tokens live seconds): higher rates to hit them at all.
  isEnabled: { probability: 0.15, weights: { '5xx': 3, timeout: 2, malformed: 2, '429': 1 } },
  token: { probability: 0.15, weights: { '5xx': 3, timeout: 1, malformed: 2, '429': 1 } },
};

const randomInt = (max: number) => Math.floor(Math.random() * (max + 1));

// Everything started here, stopped in afterAll whatever happened.
let redisServer: RedisServerHandle | undefined;
let sim: Simulator | undefined;
let recorder: TokenRecorder | undefined;
let redis: Redis | undefined;
let producer: TransferProducer | undefined;
const queues: Queue[] = [];
let stopChaos = () => {};

afterAll(async () => {
  stopChaos();
  await killAllWorkers();
  for (const queue of queues) await queue.close().catch(() => {});
  await producer?.close().catch(() => {});
  redis?.disconnect();
  await recorder?.close().catch(() => {});
  await sim?.close().catch(() => {});
  await redisServer?.stop().catch(() => {});
});

describe('chaos: 3 workers, SIGKILLs, a Redis crash, expired tokens and upstream faults', () => {
  it('every transfer is accepted once, submitted once and broadcast once, and nothing secret leaks', async () => {
    const runStarted = Date.now();

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
    redisServer = await startRedisServer({ appendonly: true, extraArgs: ['--appendfsync', 'always'] });
    sim = await startSimulator({
      port: 0,
      // Long and random, so a hit in the leak scan cannot be a coincidence.
      clientSecret: `chaos-secret-${randomBytes(24).toString('hex')}`,
      settings: {
        // The travel rule applies (spec 4.4), so the references on every payload are what lets them through.
        travelRule: { outgoingTxn: 1, mandatory: true },
        // Each transfer becomes visible, then gets its txid, after its own random delays.
        visibleAfterMs: 0,
        visibleJitterMs: MAX_VISIBLE_AFTER_MS,
        txidAfterMs: 0,
        txidJitterMs: MAX_TXID_AFTER_MS,
        // Short-lived tokens: renewals happen throughout the run, besides the forced expiries below.
        tokenLifetimeSec: 5,
        retryAfterSec: 1,
      },
    });
    recorder = await startTokenRecorder(`${sim.url}/oauth/token`);

    const prefix = uniquePrefix('chaos');
    const env = workerEnv(sim, prefix, {
      REDIS_URL: redisServer.url,
      CUSTODY_TOKEN_URL: recorder.url,
      CUSTODY_TIMEOUT: '1s',
      CUSTODY_CONNECT_TIMEOUT: '1s',
      JOB_LOCK_DURATION: '2s',
      SUBMIT_RETRY_BASE: '50ms',
      SUBMIT_RETRY_MAX: '500ms',
      // Faults must never exhaust the attempts: every transfer here must end broadcast.
      SUBMIT_ATTEMPTS: '1000',
      TRACK_POLL_MIN: '200ms',
      TRACK_POLL_MAX: '1s',
      TRAVEL_RULE_CACHE_TTL: '1s',
      RECONCILE_EVERY: '5s',
      RECONCILE_GRACE: '5s',
      SHUTDOWN_TIMEOUT: '15s',
      // debug: the most log lines (and data in them) for the leak check; 'worker started' is info.
      LOG_LEVEL: 'debug',
    });
    const config = loadConfig(env);
    const keys = createKeys(config.queue.prefix, config.queue.eventsStream);

    // The fault plans, fixed up front so the faults injected can be counted exactly at the end.
    const sequences = {} as Record<SimEndpoint, FaultEntry[]>;
    for (const [endpoint, plan] of Object.entries(FAULTS) as Array<[SimEndpoint, (typeof FAULTS)[SimEndpoint]]>) {
      sequences[endpoint] = randomFaultSequence(FAULT_SEQUENCE_LENGTH, plan.probability, plan.weights);
      sim.setFault(endpoint, { sequence: sequences[endpoint] });
    }

    redis = new Redis(redisServer.url, { maxRetriesPerRequest: null });
    producer = new TransferProducer({ connection: redis, prefix, eventsStream: config.queue.eventsStream });
    const submitQueue = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
    const trackQueue = new Queue(QueueName.TRACK, { connection: redis, prefix });
    queues.push(submitQueue, trackQueue);

    // ---- workers: a pool of WORKERS live processes; every one ever spawned is kept for the log checks.
    const allWorkers: WorkerProcess[] = [];
    const live = new Set<WorkerProcess>();
    const killedByUs = new Set<WorkerProcess>();
    const unexpectedExits: string[] = [];
    let shuttingDown = false;
    const spawn = async (): Promise<WorkerProcess> => {
      const worker = spawnWorker(env, { name: `chaos-worker-${allWorkers.length + 1}`, maxOutputChars: MAX_OUTPUT_CHARS });
      allWorkers.push(worker);
      live.add(worker);
      void worker.exited.then((info) => {
        live.delete(worker);
        if (!killedByUs.has(worker) && !shuttingDown) {
          unexpectedExits.push(`${worker.name} (pid ${worker.pid}) exited by itself: ${JSON.stringify(info)}; last output:\n${worker.output().slice(-3_000)}`);
        }
      });
      await worker.waitForLog('worker started', WORKER_START_TIMEOUT_MS);
      return worker;
    };
    await Promise.all(Array.from({ length: WORKERS }, () => spawn()));

    // ---- the events, read incrementally
    const events: TransferEvent[] = [];
    const terminal = new Set<string>();
    let cursor = '-';
    const readNewEvents = async () => {
      for (;;) {
        const entries = (await redis!.xrange(config.queue.eventsStream, cursor, '+', 'COUNT', 5_000)) as Array<[string, string[]]>;
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

    // ---- enqueue: TRANSFERS valid payloads with travel-rule references, in batches
    const sequenceIds: string[] = [];
    const enqueueStarted = Date.now();
    let enqueued = 0;
    const submitWithRetry = async (payload: SamplePayload) => {
      // A submit cut off by the Redis crash is simply repeated: jobId = sequenceId makes it idempotent.
      for (let attempt = 1; ; attempt++) {
        try {
          await producer!.submit(payload);
          return;
        } catch (error) {
          if (attempt >= 20) throw error;
          await sleep(250);
        }
      }
    };
    const enqueue = (async () => {
      for (let batch = 0; batch * ENQUEUE_BATCH < TRANSFERS; batch++) {
        const payloads = Array.from({ length: Math.min(ENQUEUE_BATCH, TRANSFERS - batch * ENQUEUE_BATCH) }, (_, i) =>
          samplePayload({
            walletId: 310 + ((batch + i) % 7),
            travelRule: { reference: `tr-chaos-${batch}-${i}` },
          }),
        );
        sequenceIds.push(...payloads.map((p) => p.halfSigned.sequenceId));
        await Promise.all(payloads.map(submitWithRetry));
        enqueued += payloads.length;
        await sleep(ENQUEUE_EVERY_MS);
      }
    })();
    let enqueueError: unknown;
    enqueue.catch((error: unknown) => {
      enqueueError = error;
    });

    // ---- chaos: kills, the Redis crash, token expiries, redrawn latencies; until everything has settled
    let chaosOn = true;
    const chaosErrors: unknown[] = [];
    stopChaos = () => {
      chaosOn = false;
    };
    const kills: Array<{ atMs: number; victim: string; exit: ExitInfo; terminalAtKill: number }> = [];
    let redisCrash: { atMs: number; downMs: number; terminalAtCrash: number } | undefined;
    let tokenExpiries = 0;
    const loop = async (everyMs: number, step: () => Promise<void>) => {
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
      loop(KILL_EVERY_MS, async () => {
        const candidates = [...live];
        const victim = candidates[randomInt(candidates.length - 1)];
        if (!victim) return;
        killedByUs.add(victim);
        victim.kill('SIGKILL');
        const exit = await victim.waitForExit(10_000);
        kills.push({ atMs: Date.now() - enqueueStarted, victim: victim.name, exit, terminalAtKill: terminal.size });
        await spawn();
      }),
      loop(1_000, async () => {
        if (redisCrash) return;
        const elapsed = Date.now() - enqueueStarted;
        if (terminal.size < TRANSFERS * REDIS_CRASH_AT_SHARE && elapsed < REDIS_CRASH_LATEST_MS) return;
        const down = Date.now();
        await redisServer!.kill();
        await redisServer!.restart();
        redisCrash = { atMs: down - enqueueStarted, downMs: Date.now() - down, terminalAtCrash: terminal.size };
      }),
      loop(EXPIRE_TOKENS_EVERY_MS, async () => {
        sim!.expireTokens();
        tokenExpiries += 1;
      }),
      loop(REDRAW_DELAYS_EVERY_MS, async () => {
        sim!.updateSettings({
          latencyMs: { sendTransaction: randomInt(MAX_LATENCY_MS), getTransfer: randomInt(MAX_LATENCY_MS) },
        });
      }),
    ]);

    // ---- settle: every enqueued sequenceId has a terminal event (bounded)
    const settleDeadline = enqueueStarted + SETTLE_TIMEOUT_MS;
    let settledAt: number | undefined;
    try {
      while (settledAt === undefined) {
        await readNewEvents();
        if (enqueued === TRANSFERS && sequenceIds.every((id) => terminal.has(id))) {
          settledAt = Date.now();
          break;
        }
        if (chaosErrors.length > 0) throw chaosErrors[0];
        if (enqueueError !== undefined) throw enqueueError;
        if (unexpectedExits.length > 0 && live.size === 0) throw new Error(`every worker is gone:\n${unexpectedExits.join('\n')}`);
        if (Date.now() > settleDeadline) {
          throw new Error(`not settled within ${SETTLE_TIMEOUT_MS} ms:\n${await diagnostic()}`);
        }
        await sleep(500);
      }
    } finally {
      stopChaos();
      await chaos;
      await enqueue.catch(() => {});
    }
    await enqueue;
    if (chaosErrors.length > 0) throw chaosErrors[0];

    async function diagnostic(): Promise<string> {
      const states = await redis!.pipeline(sequenceIds.map((id) => ['hget', keys.transfer(id), 'state'])).exec();
      const byState: Record<string, number> = {};
      for (const [, state] of states ?? []) byState[String(state ?? 'no record')] = (byState[String(state ?? 'no record')] ?? 0) + 1;
      const byType: Record<string, number> = {};
      for (const event of events) byType[event.event] = (byType[event.event] ?? 0) + 1;
      const stuck = sequenceIds.filter((id) => !terminal.has(id)).slice(0, 5);
      const records = await Promise.all(stuck.map(async (id) => `  ${id}: ${JSON.stringify(await redis!.hgetall(keys.transfer(id)))}`));
      return [
        `enqueued ${enqueued}/${TRANSFERS}, terminal ${terminal.size}`,
        `events per type: ${JSON.stringify(byType)}`,
        `ledger states: ${JSON.stringify(byState)}`,
        `submit queue: ${JSON.stringify(await submitQueue.getJobCounts())}; track queue: ${JSON.stringify(await trackQueue.getJobCounts())}`,
        `sim requests: ${JSON.stringify(sim!.stats().requests)}`,
        `some unsettled ledger records:\n${records.join('\n')}`,
        `unexpected worker exits: ${unexpectedExits.length}`,
      ].join('\n');
    }

    // A stalled copy of a job may still run after the last terminal event (and must publish and send
    // nothing): wait until no submit or track job is left anywhere before looking.
    await until('idle submit and track queues', 60_000, async () => {
      for (const queue of [submitQueue, trackQueue]) {
        const counts = await queue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'waiting-children');
        if (Object.values(counts).some((n) => n > 0)) return undefined;
      }
      return true;
    }, 250);

    // ---- stop: SIGTERM to every live worker; each must drain and exit 0
    shuttingDown = true;
    const stopping = [...live];
    const exits = await Promise.all(stopping.map(async (worker) => ({ name: worker.name, exit: await worker.stop(SHUTDOWN_GRACE_MS) })));

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
    const terminalCounts = new Map<string, number>();
    for (const event of transferEvents) {
      if (TERMINAL_EVENTS.has(event.event)) terminalCounts.set(event.sequenceId, (terminalCounts.get(event.sequenceId) ?? 0) + 1);
    }
    const notBroadcastOnce = sequenceIds.filter((id) => {
      const list = bySequenceId.get(id) ?? [];
      return !(list.length === 2 && list[0]!.event === 'transfer.submitted' && list[1]!.event === 'transfer.broadcast');
    });
    const notOneTerminal = sequenceIds.filter((id) => terminalCounts.get(id) !== 1);
    const submittedCounts = countBy(transferEvents, 'transfer.submitted');
    const notSubmittedOnce = sequenceIds.filter((id) => submittedCounts.get(id) !== 1);
    const strangers = [...bySequenceId.keys()].filter((id) => !known.has(id));
    const acceptedTwice = sequenceIds.filter((id) => (stats.sends[id]?.accepted ?? 0) > 1);
    const neverAccepted = sequenceIds.filter((id) => (stats.sends[id]?.accepted ?? 0) === 0);
    const txidMismatches = sequenceIds.filter((id) => {
      const broadcast = bySequenceId.get(id)?.find((e) => e.event === 'transfer.broadcast');
      return broadcast !== undefined && (broadcast.data as { txid?: string }).txid !== sim!.transfer(id)?.txid;
    });
    const versions = versionProblems(events);
    const duplicates409 = sequenceIds.reduce((sum, id) => sum + (stats.sends[id]?.duplicates ?? 0), 0);
    const recoveredBy: Record<string, number> = {};
    for (const event of transferEvents) {
      if (event.event !== 'transfer.submitted') continue;
      const how = (event.data as { recoveredBy?: string }).recoveredBy ?? 'send answer';
      recoveredBy[how] = (recoveredBy[how] ?? 0) + 1;
    }
    const faultsPerEndpoint: Record<string, Partial<Record<FaultKind, number>>> = {};
    const faultsPerKind: Partial<Record<FaultKind, number>> = {};
    for (const endpoint of Object.keys(sequences) as SimEndpoint[]) {
      const counts = countInjected(sequences[endpoint], consumed[endpoint] ?? 0);
      faultsPerEndpoint[endpoint] = counts;
      for (const [kind, n] of Object.entries(counts) as Array<[FaultKind, number]>) faultsPerKind[kind] = (faultsPerKind[kind] ?? 0) + n;
    }
    const exhausted = (Object.keys(sequences) as SimEndpoint[]).filter((e) => (consumed[e] ?? 0) >= FAULT_SEQUENCE_LENGTH);
    const unauthorized = (stats.requests.sendTransaction['401'] ?? 0) + (stats.requests.getWalletTransaction['401'] ?? 0);

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
    if (LOG_DIR) {
      await mkdir(LOG_DIR, { recursive: true });
      for (const worker of allWorkers) await writeFile(join(LOG_DIR, `${worker.name}.log`), worker.output());
    }
    const logs: Haystack[] = allWorkers.map((worker) => ({ where: `${worker.name} output`, text: worker.output() }));
    const streamEntries = await streamHaystacks(redis, config.queue.eventsStream);
    const stored = await keyspaceHaystacks(redis, `${prefix}*`);
    const leaks = findNeedles([...logs, ...streamEntries, ...stored], needles);
    const logChars = logs.reduce((sum, log) => sum + log.text.length, 0);
    const logLines = logs.reduce((sum, log) => sum + log.text.split('\n').length, 0);

    console.log(
      [
        `[chaos] ${TRANSFERS} transfers, ${WORKERS} worker processes, Redis AOF appendfsync always`,
        `  run: ${(runMs / 1000).toFixed(1)} s; time to settle (first enqueue → every transfer terminal): ${(settleMs / 1000).toFixed(1)} s`,
        `  SIGKILLs: ${kills.length} (worker processes spawned: ${allWorkers.length}); unexpected worker exits: ${unexpectedExits.length}`,
        `  Redis crash (SIGKILL) + restart: ${redisCrash ? `at ${(redisCrash.atMs / 1000).toFixed(1)} s with ${redisCrash.terminalAtCrash} transfers ended, down ${redisCrash.downMs} ms` : 'not done'}`,
        `  token expiries forced: ${tokenExpiries}; tokens issued: ${tokens.length}; 401 answers on bearer endpoints: ${unauthorized}`,
        `  faults injected per kind: ${JSON.stringify(faultsPerKind)}`,
        `  faults injected per endpoint: ${JSON.stringify(faultsPerEndpoint)}${exhausted.length ? ` (sequences used up: ${exhausted.join(', ')})` : ''}`,
        `  409s seen: ${stats.requests.sendTransaction['409'] ?? 0} answered (${duplicates409} duplicate sends refused, some of them unanswered by a 'timeout' fault)`,
        `  upstream answers per endpoint: ${JSON.stringify(stats.requests)}`,
        `  transfer.submitted via: ${JSON.stringify(recoveredBy)}`,
        `  reconciliation runs: ${eventTypes['reconcile.completed'] ?? 0} completed, ${logs.reduce((n, log) => n + log.text.split('another reconciliation is running, skipped').length - 1, 0)} skipped (lock held)`,
        `  events: ${JSON.stringify(eventTypes)}`,
        `  sequenceIds accepted twice: ${acceptedTwice.length}; never accepted: ${neverAccepted.length}; without exactly submitted→broadcast: ${notBroadcastOnce.length}; version problems: ${versions.length}; txid mismatches: ${txidMismatches.length}`,
        `  SIGTERM exits: ${exits.map((e) => `${e.name}=${e.exit.code ?? e.exit.signal}`).join(', ')}`,
        `  leak scan: ${needles.length} strings (${tokens.length} tokens) in ${logs.length} worker outputs (${logLines} lines, ${logChars} chars), ${streamEntries.length} stream entries, ${stored.length} Redis keys: ${leaks.length} hits`,
      ].join('\n'),
    );

    // ---- the run really was chaotic (else it proves little)
    expect(kills.length).toBeGreaterThanOrEqual(3);
    expect(kills.every((kill) => kill.exit.signal === 'SIGKILL')).toBe(true);
    expect(redisCrash, 'Redis was crashed and restarted mid-run').toBeDefined();
    expect(redisCrash!.terminalAtCrash).toBeLessThan(TRANSFERS);
    for (const kind of ['5xx', 'timeout', '429', 'malformed'] as const) expect(faultsPerKind[kind] ?? 0, `${kind} faults injected`).toBeGreaterThan(0);
    expect(unauthorized, 'expired tokens were met with 401').toBeGreaterThan(0);

    // ---- CONTRACT section 4 guarantees
    const sample = (ids: string[]) => ids.slice(0, 10).map((id) => `${id}: ${JSON.stringify((bySequenceId.get(id) ?? []).map((e) => `${e.event}@v${e.version}`))} sends=${JSON.stringify(stats.sends[id])}`);
    expect(unexpectedExits, 'workers that died without being killed').toEqual([]);
    expect(strangers, 'events of sequenceIds never enqueued').toEqual([]);
    expect(sample(notOneTerminal), 'sequenceIds without exactly one terminal event').toEqual([]);
    expect(sample(notSubmittedOnce), 'sequenceIds without exactly one transfer.submitted').toEqual([]);
    expect(sample(notBroadcastOnce), 'sequenceIds whose events are not exactly submitted then broadcast').toEqual([]);
    expect(sample(acceptedTwice), 'sequenceIds accepted twice by the simulator (double spend)').toEqual([]);
    expect(sample(neverAccepted), 'sequenceIds never accepted by the simulator').toEqual([]);
    expect(versions.slice(0, 10), 'repeated or missing event versions').toEqual([]);
    expect(sample(txidMismatches), 'broadcast txid differs from the simulator').toEqual([]);
    expect(exits.map((e) => `${e.name}: ${JSON.stringify(e.exit)}`), 'SIGTERM exits').toEqual(
      exits.map((e) => `${e.name}: ${JSON.stringify({ code: 0, signal: null })}`),
    );

    // ---- security: the checks can fail (what they search for is real and where it is searched is full)
    expect(tokens.length, 'tokens were issued, renewed and recorded').toBeGreaterThanOrEqual(2);
    for (const needle of needles) expect(needle.value.length, `${needle.label} is a real search string`).toBeGreaterThanOrEqual(8);
    const record = sim.transfer(sequenceIds[0]!)!.record;
    for (const field of ['displayName', 'email', 'phoneNumber'] as const) {
      expect(record.raw, `the simulator's sendTransaction answer carries raw.user.${field}`).toContain(String(user[field]));
    }
    for (const worker of allWorkers) {
      expect(worker.output().length, `${worker.name} output kept whole`).toBeLessThan(MAX_OUTPUT_CHARS);
      expect(worker.output(), `${worker.name} logged`).toContain('worker started');
    }
    expect(logs.map((log) => log.text).join('')).toContain('"msg":"transfer submitted"');
    expect(findNeedles(logs, [{ label: 'control', value: 'worker started' }])).toHaveLength(allWorkers.length);
    expect(streamEntries.length).toBe(events.length);
    expect(findNeedles(streamEntries, [{ label: 'control', value: sequenceIds[0]! }]).length).toBe(2);
    expect(stored.length).toBeGreaterThan(TRANSFERS);
    expect(leaks, 'secrets or personal data found').toEqual([]);
  });
});
