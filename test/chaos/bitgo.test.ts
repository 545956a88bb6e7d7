/**
 * The chaos run with CUSTODY_PROVIDER=bitgo: real worker processes against the BitGo simulator, every few
 * seconds one SIGKILLed and replaced, the simulator answering 5xx, 429 or nothing at random on each of
 * its endpoints, each transfer waiting in `pendingApproval` a random while before it is signed, and a
 * real HTTP gateway in front of the simulator that answers 502 or 504 for a share of the sends the
 * simulator accepted (the send recorded upstream, the worker told otherwise). What must come out is
 * docs/contract.md section 4's promise: each sequenceId accepted upstream exactly once, one
 * `transfer.submitted`, then one terminal event, here always `transfer.broadcast` with BitGo's txid.
 *
 * run-chaos.ts is the first provider's machine (its token endpoint and recorder, the travel rule, the
 * leak scan of its records, a Redis crash): this file is a smaller runner of the same shape, reusing its
 * worker settings, seed and fault plans (fault-plan.ts), the gateway (test/helpers/gateway.ts) and the
 * worker processes (test/helpers/worker-process.ts). CHAOS_SEED replays the fault plans.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { TERMINAL_EVENTS, parseStreamEntry, type TransferEvent } from '../../packages/producer/src/events.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { loadConfig } from '../../src/config/config.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startBitgoSimulator, type BitgoEndpoint, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import type { FaultKind } from '../../src/simulator/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startGateway, type Gateway } from '../helpers/gateway.ts';
import { countBy, versionProblems } from '../helpers/harness.ts';
import { parseCheckedEntry } from '../helpers/json-schemas.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { seededRandom } from '../helpers/seeded-random.ts';
import { sleep } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type ExitInfo, type WorkerProcess } from '../helpers/worker-process.ts';
import { consumedPerEndpoint, countInjected, randomFaultSequence, type FaultEntry } from './fault-plan.ts';
import { BASE_WORKER_ENV, chaosSeed, FAULT_SEQUENCE_LENGTH, MAX_OUTPUT_CHARS, untilQueuesIdle, type FaultMix } from './run-chaos.ts';

const SEED = chaosSeed();
const TRANSFERS = 300;
const WORKERS = 3;
const ENQUEUE_BATCH = 30;
const ENQUEUE_EVERY_MS = 1_000;
const KILL_EVERY_MS = 3_000;
const SETTLE_TIMEOUT_MS = 150_000;
const WORKER_START_TIMEOUT_MS = 60_000;
const SHUTDOWN_GRACE_MS = 20_000;

/**
 * Faults the BitGo simulator serves, none a refusal: '5xx' and '429' answer without processing, 'timeout'
 * processes and never answers (the worker gives up after CUSTODY_TIMEOUT). 429 stays rare on sends: each
 * pauses the submit queue a second (BitGo documents no Retry-After; the simulator sends 1 s).
 */
const FAULTS: Record<BitgoEndpoint, FaultMix> = {
  sendTransaction: { probability: 0.08, weights: { '5xx': 3, timeout: 2, '429': 1 } },
  transferBySequenceId: { probability: 0.06, weights: { '5xx': 3, timeout: 1, '429': 1 } },
  getTransfer: { probability: 0.06, weights: { '5xx': 3, timeout: 1, '429': 1 } },
};
/** This share of the sends the simulator accepted reach the worker as one of these instead. */
const GATEWAY = { probability: 0.3, statuses: [502, 504] as const };
/**
 * Redrawn every REDRAW_EVERY_MS, so each transfer waits its own while in pendingApproval (the send answers
 * 202), then for its txid. Every APPROVAL_NONE_EVERY-th draw needs none (the send answers 200, signed): by
 * count, not by chance, so that sends spread over seconds always meet some (a run drew none while its sends
 * went out, and proved nothing about signed-at-once sends).
 */
const APPROVAL_MS = [200, 2_500] as const;
const APPROVAL_NONE_EVERY = 5;
const TXID_MS = [0, 800] as const;
const LATENCY_MS = [0, 40] as const;
const REDRAW_EVERY_MS = 250;
/** 32-hex BitGo wallet ids: a few wallets, many transfers each. */
const WALLETS = Array.from({ length: 5 }, (_, i) => `${'b17c0'}${String(i).padStart(27, '0')}`);

let stopChaos: (() => void) | undefined;
const closers: Array<() => Promise<unknown>> = [];

afterAll(async () => {
  stopChaos?.();
  await killAllWorkers();
  for (const close of closers.reverse()) await close().catch(() => {});
});

interface Kill {
  atMs: number;
  victim: string;
  exit: ExitInfo;
}

describe('chaos with CUSTODY_PROVIDER=bitgo: SIGKILLs, BitGo faults, pendingApproval, a gateway hiding acceptances', () => {
  it('every sequenceId accepted once, submitted once, then broadcast once with its txid', async () => {
    const runStarted = Date.now();
    const random = seededRandom(SEED);
    const randomInt = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
    let chaosOn = true;
    stopChaos = () => {
      chaosOn = false;
    };

    // ---- the simulator, its faults drawn up front (so they can be counted), and the gateway in front
    const sim: BitgoSimulator = await startBitgoSimulator({ port: 0, settings: { retryAfterSec: 1 } });
    closers.push(() => sim.close());
    const sequences = {} as Record<BitgoEndpoint, FaultEntry[]>;
    for (const [endpoint, plan] of Object.entries(FAULTS) as Array<[BitgoEndpoint, FaultMix]>) {
      sequences[endpoint] = randomFaultSequence(FAULT_SEQUENCE_LENGTH, plan.probability, plan.weights, random);
      sim.setFault(endpoint, { sequence: sequences[endpoint] });
    }
    let draws = 0;
    const redraw = () =>
      sim.updateSettings({
        approvalAfterMs: draws++ % APPROVAL_NONE_EVERY === 0 ? 0 : randomInt(...APPROVAL_MS),
        txidAfterMs: randomInt(...TXID_MS),
        latencyMs: randomInt(...LATENCY_MS),
      });
    redraw();

    const gateway: Gateway = await startGateway(sim.url);
    closers.push(() => gateway.close());
    const gatewayReplaced: Record<string, number> = {};
    /** sequenceIds whose accepted send the gateway answered with its own 5xx. */
    const hidden = new Set<string>();
    gateway.setRule((request, originStatus) => {
      const accepted = originStatus >= 200 && originStatus < 300;
      if (request.role !== 'send' || !accepted || random() >= GATEWAY.probability) return undefined;
      const status = GATEWAY.statuses[randomInt(0, GATEWAY.statuses.length - 1)]!;
      gatewayReplaced[status] = (gatewayReplaced[status] ?? 0) + 1;
      if (request.sequenceId !== undefined) hidden.add(request.sequenceId);
      return { replaceStatus: status };
    });

    // ---- the worker settings: BitGo through the gateway, the chaos suite's fast retries and polls
    const prefix = uniquePrefix('chaos-bitgo');
    const env: Record<string, string> = {
      REDIS_URL: testRedisUrl(),
      QUEUE_PREFIX: prefix,
      ...workerBitgoEnv({ url: gateway.url, accessToken: sim.accessToken }),
      HTTP_PORT: '0',
      ...BASE_WORKER_ENV,
      // info, not the suite's debug: there is no leak scan here, and 2 cores run everything.
      LOG_LEVEL: 'info',
    };
    const config = loadConfig(env);
    expect(config.custody.provider, 'the workers run the BitGo adapter').toBe('bitgo');
    const stream = config.queue.eventsStream;
    const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    closers.push(async () => redis.disconnect());
    const producer = new TransferProducer({ connection: redis, prefix, eventsStream: stream });
    closers.push(() => producer.close());
    const submitQueue = new Queue(QueueName.SUBMIT, { connection: redis, prefix });
    const trackQueue = new Queue(QueueName.TRACK, { connection: redis, prefix });
    closers.push(
      () => submitQueue.close(),
      () => trackQueue.close(),
    );

    // ---- workers: WORKERS slots, each killed one replaced; every process kept for its output
    const allWorkers: WorkerProcess[] = [];
    const live = new Set<WorkerProcess>();
    const killedByUs = new Set<WorkerProcess>();
    const unexpectedExits: string[] = [];
    let shuttingDown = false;
    const spawn = async (): Promise<WorkerProcess> => {
      const worker = spawnWorker(env, { name: `chaos-bitgo-worker-${allWorkers.length + 1}`, maxOutputChars: MAX_OUTPUT_CHARS });
      allWorkers.push(worker);
      live.add(worker);
      void worker.exited.then((info) => {
        live.delete(worker);
        if (!killedByUs.has(worker) && !shuttingDown) {
          unexpectedExits.push(`${worker.name} exited by itself: ${JSON.stringify(info)}; last output:\n${worker.output().slice(-3_000)}`);
        }
      });
      await worker.waitForLog('worker started', WORKER_START_TIMEOUT_MS);
      return worker;
    };
    await Promise.all(Array.from({ length: WORKERS }, () => spawn()));

    // ---- the events, read incrementally
    const terminal = new Set<string>();
    let cursor = '-';
    const readNewEvents = async () => {
      for (;;) {
        const entries = (await redis.xrange(stream, cursor, '+', 'COUNT', 5_000)) as Array<[string, string[]]>;
        for (const entry of entries) {
          const event = parseStreamEntry(entry);
          if (TERMINAL_EVENTS.has(event.event)) terminal.add(event.sequenceId);
        }
        if (entries.length === 0) return;
        cursor = `(${entries[entries.length - 1]![0]}`;
        if (entries.length < 5_000) return;
      }
    };

    // ---- enqueue in batches while the workers run, so kills hit every stage of a transfer
    const sequenceIds: string[] = [];
    const enqueueStarted = Date.now();
    let enqueued = 0;
    const enqueue = (async () => {
      for (let batch = 0; batch * ENQUEUE_BATCH < TRANSFERS; batch++) {
        const size = Math.min(ENQUEUE_BATCH, TRANSFERS - batch * ENQUEUE_BATCH);
        const payloads = Array.from({ length: size }, (_, i) =>
          samplePayload({ walletId: WALLETS[(batch + i) % WALLETS.length]!, coin: 'tbtc' }),
        );
        sequenceIds.push(...payloads.map((p) => p.halfSigned.sequenceId));
        await Promise.all(payloads.map((p) => producer.submit(p)));
        enqueued += size;
        await sleep(ENQUEUE_EVERY_MS);
      }
    })();
    let enqueueError: unknown;
    enqueue.catch((error: unknown) => {
      enqueueError = error;
    });

    // ---- chaos: kills and redrawn approval delays, until everything has settled
    const chaosErrors: unknown[] = [];
    const kills: Kill[] = [];
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
        const victim = candidates[randomInt(0, candidates.length - 1)];
        if (!victim) return;
        killedByUs.add(victim);
        victim.kill('SIGKILL');
        const exit = await victim.waitForExit(10_000);
        kills.push({ atMs: Date.now() - enqueueStarted, victim: victim.name, exit });
        await spawn();
      }),
      loop(REDRAW_EVERY_MS, async () => redraw()),
    ]);

    // ---- settle: every enqueued sequenceId has a terminal event (bounded)
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
        if (Date.now() - enqueueStarted > SETTLE_TIMEOUT_MS) {
          const stuck = sequenceIds.filter((id) => !terminal.has(id));
          throw new Error(
            `[bitgo seed ${SEED}] not settled within ${SETTLE_TIMEOUT_MS} ms: enqueued ${enqueued}/${TRANSFERS}, terminal ${terminal.size}; ` +
              `submit ${JSON.stringify(await submitQueue.getJobCounts())}, track ${JSON.stringify(await trackQueue.getJobCounts())}; ` +
              `sim ${JSON.stringify(sim.stats().requests)}; stuck e.g. ${stuck
                .slice(0, 5)
                .map((id) => `${id} ${JSON.stringify(sim.transfer(id) ?? null)}`)
                .join('; ')}`,
          );
        }
        await sleep(500);
      }
    } finally {
      chaosOn = false;
      await chaos;
      await enqueue.catch(() => {});
    }
    if (chaosErrors.length > 0) throw chaosErrors[0];

    // A stalled copy of a job may still run after the last terminal event (and must send and publish
    // nothing): wait until no submit or track job is left before looking.
    await untilQueuesIdle([submitQueue, trackQueue]);

    // ---- stop: SIGTERM to every live worker; each must drain and exit 0
    shuttingDown = true;
    const exits = await Promise.all([...live].map(async (worker) => ({ name: worker.name, exit: await worker.stop(SHUTDOWN_GRACE_MS) })));

    // ---- figures: every event checked against its committed JSON Schema, the simulator's records
    const events = (await redis.xrange(stream, '-', '+')).map((entry) => parseCheckedEntry(entry as [string, string[]]));
    const transferEvents = events.filter((e) => e.event !== 'reconcile.completed');
    const bySequenceId = new Map<string, TransferEvent[]>();
    for (const event of transferEvents) bySequenceId.set(event.sequenceId, [...(bySequenceId.get(event.sequenceId) ?? []), event]);
    const stats = sim.stats();
    const consumed = (await consumedPerEndpoint(sim.url)) as Partial<Record<BitgoEndpoint, number>>;
    const faultsPerEndpoint: Record<string, Partial<Record<FaultKind, number>>> = {};
    const faultsPerKind: Partial<Record<FaultKind, number>> = {};
    for (const endpoint of Object.keys(sequences) as BitgoEndpoint[]) {
      const counts = countInjected(sequences[endpoint], consumed[endpoint] ?? 0);
      faultsPerEndpoint[endpoint] = counts;
      for (const [kind, n] of Object.entries(counts) as Array<[FaultKind, number]>) faultsPerKind[kind] = (faultsPerKind[kind] ?? 0) + n;
    }
    const eventTypes: Record<string, number> = {};
    for (const event of events) eventTypes[event.event] = (eventTypes[event.event] ?? 0) + 1;
    const recoveredBy: Record<string, number> = {};
    for (const event of transferEvents) {
      if (event.event !== 'transfer.submitted') continue;
      const how = event.data.transfer === null ? event.data.recoveredBy : 'send answer';
      recoveredBy[how] = (recoveredBy[how] ?? 0) + 1;
    }
    const gatewayRoles: Record<string, number> = {};
    for (const entry of gateway.log) gatewayRoles[entry.endpoint] = (gatewayRoles[entry.endpoint] ?? 0) + 1;
    const known = new Set(sequenceIds);
    const accepted = (id: string) => stats.sends[id]?.accepted ?? 0;
    const submittedCounts = countBy(transferEvents, 'transfer.submitted');
    const shapeOf = (id: string) => (bySequenceId.get(id) ?? []).map((e) => e.event.slice('transfer.'.length)).join(' ');
    const sample = (ids: string[]) =>
      ids
        .slice(0, 10)
        .map((id) => `${id}: ${shapeOf(id)} sends=${JSON.stringify(stats.sends[id])} sim=${JSON.stringify(sim.transfer(id))}`);

    const runMs = Date.now() - runStarted;
    const settleMs = settledAt - enqueueStarted;
    const duplicates = sequenceIds.reduce((sum, id) => sum + (stats.sends[id]?.duplicates ?? 0), 0);
    console.log(
      [
        `[chaos:bitgo] SIGKILLs, 5xx/429/timeout on every BitGo endpoint, pendingApproval ${APPROVAL_MS.join('-')} ms (none every ${APPROVAL_NONE_EVERY}th draw), a gateway answering ${GATEWAY.statuses.join('/')} for ${GATEWAY.probability * 100} % of accepted sends`,
        `  seed ${SEED} (CHAOS_SEED); ${TRANSFERS} transfers, ${WORKERS} worker processes (CUSTODY_PROVIDER=${config.custody.provider})`,
        `  run: ${(runMs / 1000).toFixed(1)} s; time to settle (first enqueue → every transfer terminal): ${(settleMs / 1000).toFixed(1)} s`,
        `  SIGKILLs: ${kills.length} (worker processes spawned: ${allWorkers.length}); unexpected worker exits: ${unexpectedExits.length}`,
        `  faults injected per kind: ${JSON.stringify(faultsPerKind)}`,
        `  faults injected per endpoint: ${JSON.stringify(faultsPerEndpoint)}`,
        `  gateway: accepted sends answered instead with ${JSON.stringify(gatewayReplaced)} (${hidden.size} transfers); requests through it: ${JSON.stringify(gatewayRoles)}`,
        `  upstream answers per endpoint: ${JSON.stringify(stats.requests)}`,
        `  simulator: ${stats.transfers} transfers accepted; resends refused DuplicateSequenceIdError: ${duplicates}`,
        `  transfer.submitted via: ${JSON.stringify(recoveredBy)}`,
        `  events: ${JSON.stringify(eventTypes)}`,
        `  SIGTERM exits: ${exits.map((e) => `${e.name}=${e.exit.code ?? e.exit.signal}`).join(', ')}`,
      ].join('\n'),
    );

    // ---- the run really was chaotic (else it proves little)
    expect(unexpectedExits, 'workers that died without being killed').toEqual([]);
    expect(kills.length, 'workers SIGKILLed').toBeGreaterThanOrEqual(3);
    expect(kills.every((kill) => kill.exit.signal === 'SIGKILL')).toBe(true);
    for (const kind of ['5xx', 'timeout', '429'] as const) expect(faultsPerKind[kind] ?? 0, `${kind} faults injected`).toBeGreaterThan(0);
    expect(stats.requests.sendTransaction['202'] ?? 0, 'sends answered 202: transfers waiting in pendingApproval').toBeGreaterThan(0);
    expect(stats.requests.sendTransaction['200'] ?? 0, 'sends answered 200: transfers signed at once').toBeGreaterThan(0);
    const replaced = Object.values(gatewayReplaced).reduce((a, b) => a + b, 0);
    expect(replaced, 'accepted sends the gateway answered with its own 5xx').toBeGreaterThan(0);
    // The gateway saw BitGo's paths for what they are: sends carry their sequenceId, lookups too.
    const sends = gateway.log.filter((entry) => entry.endpoint === 'bitgo:sendTransaction');
    expect(sends.length).toBeGreaterThanOrEqual(TRANSFERS);
    expect(sends.filter((entry) => entry.role !== 'send' || !known.has(entry.sequenceId ?? ''))).toEqual([]);
    expect(gateway.log.filter((entry) => entry.endpoint === 'bitgo:transferBySequenceId' && !known.has(entry.sequenceId ?? ''))).toEqual(
      [],
    );
    expect(gateway.log.filter((entry) => entry.endpoint === 'other')).toEqual([]);
    // Each send the gateway hid was recorded upstream, and the worker learned of it only otherwise (a
    // lookup, or a resend refused as a duplicate): never from a send's answer, which it never got.
    const hiddenIds = [...hidden];
    expect(sample(hiddenIds.filter((id) => accepted(id) !== 1)), 'hidden sends recorded upstream').toEqual([]);
    const hiddenButSendAnswer = hiddenIds.filter((id) =>
      (bySequenceId.get(id) ?? []).some((e) => e.event === 'transfer.submitted' && e.data.transfer !== null),
    );
    expect(sample(hiddenButSendAnswer), 'hidden sends whose transfer.submitted came from a send answer').toEqual([]);

    // ---- docs/contract.md section 4, and what this scenario adds: no refusal is injected, so every
    // transfer is accepted once, then submitted, then broadcast with the simulator's txid
    expect(
      [...bySequenceId.keys()].filter((id) => !known.has(id)),
      'events of sequenceIds never enqueued',
    ).toEqual([]);
    expect(sample(sequenceIds.filter((id) => accepted(id) > 1)), 'sequenceIds accepted twice by the simulator (double spend)').toEqual([]);
    expect(sample(sequenceIds.filter((id) => accepted(id) !== 1)), 'sequenceIds not accepted exactly once').toEqual([]);
    expect(sample(sequenceIds.filter((id) => submittedCounts.get(id) !== 1)), 'sequenceIds without exactly one transfer.submitted').toEqual(
      [],
    );
    const terminals = (id: string) => (bySequenceId.get(id) ?? []).filter((e) => TERMINAL_EVENTS.has(e.event)).length;
    expect(sample(sequenceIds.filter((id) => terminals(id) !== 1)), 'sequenceIds without exactly one terminal event').toEqual([]);
    expect(sample(sequenceIds.filter((id) => shapeOf(id) !== 'submitted broadcast')), 'events other than submitted then broadcast').toEqual(
      [],
    );
    const wrongTxid = sequenceIds.filter((id) => {
      const broadcast = bySequenceId.get(id)?.find((e) => e.event === 'transfer.broadcast');
      return broadcast?.event !== 'transfer.broadcast' || broadcast.data.txid !== sim.transfer(id)?.txid;
    });
    expect(sample(wrongTxid), 'broadcast txid differs from the simulator').toEqual([]);
    expect(versionProblems(events).slice(0, 10), 'repeated or missing event versions').toEqual([]);
    expect(
      exits.map((e) => `${e.name}: ${JSON.stringify(e.exit)}`),
      'SIGTERM exits',
    ).toEqual(exits.map((e) => `${e.name}: ${JSON.stringify({ code: 0, signal: null })}`));
  });
});
