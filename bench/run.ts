/**
 * `npm run bench` (docs/contract.md section 7). Wires the phases and prints the result; each phase is in its
 * own module. Processes: this one generates the load and watches the streams; the custody simulator
 * (no added latency), our worker (`src/worker.ts`) and the bare BullMQ worker each run as a child
 * process, and in the submission phase the bare worker doing the same work (BARE_MODE=submit-same-work,
 * BENCH_SAME_WORK); Redis is a private redis-server (or BENCH_REDIS_URL under fresh prefixes, never
 * flushed). Phases run one after the other; within a phase, the sides are measured in alternating
 * rounds, the idle ones waiting on a paused queue. BENCH_SUBMISSIONS_ONLY=1 ends after the submission phase.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { chart } from './chart.ts';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { acquireRedis, redactRedisUrl, type PrivateRedis } from '../tools/redis/private-redis.ts';
import { readBenchConfig } from './config.ts';
import { bareTarget, oursTarget, payloads, type SubmitTarget } from './load.ts';
import { measureMemory } from './memory.ts';
import { startBareWorker, startOurWorker, startSimulatorProcess, type NodeChild, type WalletServiceSimulatorChild } from './processes.ts';
import {
  format,
  formatSubmissionsOnly,
  machine,
  median,
  packageVersion,
  targets,
  type BenchResult,
  type SubmissionsOnlyResult,
  type SubmissionsResult,
  type SubmitSide,
} from './report.ts';
import type { CpuShare } from './cpu.ts';
import { measureLatency, sweepPoint, throughputRound, warmUp, type SweepPoint, type ThroughputRound } from './submissions.ts';
import { acceptTransfers, prepareBareTracking, prepareOurTracking, trackingRound, trackQueue, type TrackingRound } from './tracking.ts';

const config = readBenchConfig(process.env, fileURLToPath(new URL('./results/', import.meta.url)));
const log = (message: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

/** The txid never appears during the run (24 h): trackers keep polling and nothing else happens. */
const SIM_ENV = { SIM_TXID_AFTER: '24h' };
/** While submissions are measured, trackers wait far in the future so they do not compete. */
const SUBMIT_PHASE_TRACK_POLL = '10m';
const SUBMIT_PHASE_TRACK_POLL_MS = 10 * 60_000;
/** Memory phase: trackers delayed for an hour, as a transfer waiting for its txid would be. */
const MEMORY_PHASE_TRACK_POLL = '1h';

async function getRedis(): Promise<PrivateRedis> {
  if (config.redisUrl) return acquireRedis({ url: config.redisUrl });
  try {
    // A redis-server of our own first: a container's port forwarding would be measured too. No AOF (no
    // fsync cost), as every recorded figure was measured: the worker runs with REDIS_ALLOW_VOLATILE=1.
    return await acquireRedis({ noContainers: true, server: { appendonly: false, extraArgs: config.redisArgs } });
  } catch (error) {
    log(`no redis-server on PATH (${(error as Error).message.split('\n')[0]}), trying testcontainers`);
    return acquireRedis({});
  }
}

async function redisVersion(redis: Redis): Promise<string> {
  return /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? 'unknown';
}

async function versions(redis: Redis): Promise<BenchResult['versions']> {
  return {
    node: process.version,
    redis: await redisVersion(redis),
    bullmq: packageVersion('bullmq'),
    ioredis: packageVersion('ioredis'),
    undici: packageVersion('undici'),
  };
}

const redisSource = (privateRedis: PrivateRedis) => (privateRedis.source === 'env' ? 'BENCH_REDIS_URL' : privateRedis.source);

/** The notes every result carries about how it was measured. */
function settingNotes(): string[] {
  const notes: string[] = [];
  if (config.quick) notes.push('BENCH_QUICK=1: sizes too small for the figures to mean anything; run without it to measure.');
  if (config.redisUrl)
    notes.push(
      'BENCH_REDIS_URL: a Redis shared with whatever else uses it; memory is a used_memory difference and includes their changes.',
    );
  if (config.redisArgs.length > 0) notes.push(`redis-server started with ${config.redisArgs.join(' ')}`);
  if (config.workerScript) notes.push(`worker measured: ${config.workerScript} (not this checkout's src/worker.ts)`);
  if (config.cpuProfDir) notes.push(`CPU profiles of the children in ${config.cpuProfDir} (profiling slows every figure down).`);
  return notes;
}

/** A note when other processes were busy during a measured window. */
function busyNote(windows: Array<{ cpu: CpuShare | undefined }>): string[] {
  const busiest = Math.max(0, ...windows.map((window) => window.cpu?.otherCores ?? 0));
  if (busiest < 0.2) return [];
  return [
    `other processes on this machine used up to ${busiest.toFixed(2)} cores during a measured window (column "other CPU"): ` +
      'figures from such windows are lower than on a quiet machine; the alternating rounds keep the ratios comparable.',
  ];
}

/** Only for BENCH_REDIS_URL: remove what the run left under its own prefixes (UNLINK, never a flush). */
async function removeKeys(redis: Redis, base: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${base}-*`, 'COUNT', 5_000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** Event types on the stream besides `expected` (the tracking phase must have ended no transfer). */
async function eventsOtherThan(redis: Redis, stream: string, expected: string[]): Promise<string[]> {
  const found: string[] = [];
  let cursor = '-';
  for (;;) {
    const entries = await redis.xrange(stream, cursor, '+', 'COUNT', 1_000);
    for (const [, fields] of entries) {
      const event = fields[fields.indexOf('event') + 1] ?? '';
      if (!expected.includes(event)) found.push(event);
    }
    if (entries.length < 1_000) return found;
    cursor = `(${entries.at(-1)![0]}`;
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const privateRedis = await getRedis();
  const redis = new Redis(privateRedis.url, { maxRetriesPerRequest: null });
  const base = `bench-${randomBytes(4).toString('hex')}`;
  const children: NodeChild[] = [];
  const targetsToClose: SubmitTarget[] = [];
  const queuesToClose: Queue[] = [];
  let sim: WalletServiceSimulatorChild | undefined;
  const echo = config.verbose;
  log(`redis: ${privateRedis.source} ${redactRedisUrl(privateRedis.url)}, prefix ${base}-*`);

  const ourWorker = async (name: string, prefix: string, env: Record<string, string>) => {
    const child = await startOurWorker({
      name,
      redisUrl: privateRedis.url,
      prefix,
      sim: sim!,
      env,
      script: config.workerScript,
      cpuProfDir: config.cpuProfDir,
      echo,
    });
    children.push(child);
    return child;
  };
  const bareWorker = async (
    name: string,
    mode: 'submit' | 'submit-same-work' | 'track',
    target: SubmitTarget,
    concurrency: number,
    trackDelayMs = config.trackPollMs,
  ) => {
    const child = await startBareWorker({
      name,
      role: target.label,
      mode,
      redisUrl: privateRedis.url,
      prefix: target.prefix,
      stream: target.stream,
      sim: sim!,
      concurrency,
      connections: config.connections,
      trackDelayMs,
      cpuProfDir: config.cpuProfDir,
      echo,
    });
    children.push(child);
    return child;
  };
  const stop = async (child: NodeChild) => {
    const { code, signal } = await child.stop();
    if (code !== 0) log(`${child.name} exited with code ${code} (signal ${signal}):\n${child.tail()}`);
  };

  try {
    sim = await startSimulatorProcess(SIM_ENV, { cpuProfDir: config.cpuProfDir, echo });
    children.push(sim.process);
    const submitEnv = {
      SUBMIT_CONCURRENCY: String(config.submitConcurrency),
      CUSTODY_CONNECTIONS: String(config.connections),
      TRACK_POLL_MIN: SUBMIT_PHASE_TRACK_POLL,
      TRACK_POLL_MAX: SUBMIT_PHASE_TRACK_POLL,
    };

    // ---- submissions: every side's worker up, rounds alternate so all meet the same background load
    const ours = oursTarget(redis, `${base}-ours`);
    const bare = bareTarget(redis, `${base}-bare`);
    // The same work, bare: its tracking jobs wait as ours' do during this phase (not competing).
    const same = config.sameWork ? bareTarget(redis, `${base}-same`, 'bare-same-work') : undefined;
    targetsToClose.push(ours, bare, ...(same ? [same] : []));
    const oursSubmit = await ourWorker('ours-submit', ours.prefix, submitEnv);
    const bareSubmit = await bareWorker('bare-submit', 'submit', bare, config.submitConcurrency);
    const sameSubmit = same
      ? await bareWorker('bare-same-work', 'submit-same-work', same, config.submitConcurrency, SUBMIT_PHASE_TRACK_POLL_MS)
      : undefined;
    const sides = [ours, bare, ...(same ? [same] : [])];
    log(
      `submissions (${sides.map((side) => side.label).join(', ')}): ${config.warmup} warm-up, then ${config.rounds} round(s) of ${config.submissions} per side at concurrency ${config.submitConcurrency}`,
    );
    for (const side of sides) await warmUp(redis, side, payloads(config.warmup));
    const rounds = new Map<SubmitTarget, ThroughputRound[]>(sides.map((side) => [side, []]));
    for (let round = 1; round <= config.rounds; round++) {
      for (const side of sides) rounds.get(side)!.push(await throughputRound(redis, side, payloads(config.submissions)));
      log(`round ${round}: ${sides.map((side) => `${side.label} ${Math.round(rounds.get(side)!.at(-1)!.perSecond)}/s`).join(', ')}`);
    }
    const submitSide = (target: SubmitTarget): SubmitSide => {
      const measured = rounds.get(target)!;
      return { perSecond: median(measured.map((round) => round.perSecond)), rounds: measured };
    };
    const oursRounds = rounds.get(ours)!;
    const bareRounds = rounds.get(bare)!;
    const submissions: SubmissionsResult = { ours: submitSide(ours), bare: submitSide(bare), ratio: 0 };
    submissions.ratio = submissions.ours.perSecond / submissions.bare.perSecond;
    if (same) {
      submissions.sameWork = submitSide(same);
      submissions.sameWorkRatio = submissions.ours.perSecond / submissions.sameWork.perSecond;
      await stop(sameSubmit!);
    }
    if (config.submissionsOnly) {
      const result: SubmissionsOnlyResult = {
        version: 1,
        kind: 'submissions',
        finishedAt: new Date().toISOString(),
        quick: config.quick,
        machine: machine(),
        versions: await versions(redis),
        redis: { source: redisSource(privateRedis) },
        setup: {
          processes: 'load generator (this process), simulator, the workers under test: one Node process each; Redis',
          simulator: 'no added latency, SIM_TXID_AFTER 24h (no txid during the run)',
          'submit concurrency (ours SUBMIT_CONCURRENCY, bare)': config.submitConcurrency,
          'custody connections (ours CUSTODY_CONNECTIONS, bare pool)': config.connections,
          'tracking jobs during the submission phase (ours, bare same work)': `delayed ${SUBMIT_PHASE_TRACK_POLL} (not competing)`,
          'warm-up jobs before the first round, per side': config.warmup,
          'rounds per side (median counts)': config.rounds,
          'backlog per submission round': config.submissions,
          'ours LOG_LEVEL': 'warn',
        },
        submissions,
        notes: [
          'BENCH_SUBMISSIONS_ONLY=1: no latency, tracking or memory phase.',
          ...settingNotes(),
          ...busyNote(sides.flatMap((side) => rounds.get(side)!)),
          `total run time ${Math.round((performance.now() - started) / 1000)} s`,
        ],
      };
      mkdirSync(dirname(config.resultFile), { recursive: true });
      writeFileSync(config.resultFile, `${JSON.stringify(result, null, 2)}\n`);
      process.stdout.write(`${formatSubmissionsOnly(result)}\n\nJSON: ${config.resultFile}\n`);
      return;
    }

    // ---- latency at half of ours' maximum, then the bare worker at the same rate
    const halfRate = submissions.ours.perSecond / 2;
    log(`latency: ${Math.round(halfRate)}/s for ${config.seconds} s, ours then bare`);
    const latencyJobs = Math.max(1, Math.round(halfRate * config.seconds));
    const oursLatency = await measureLatency(redis, ours, halfRate, config.seconds, payloads(latencyJobs));
    const bareLatency = await measureLatency(redis, bare, halfRate, config.seconds, payloads(latencyJobs));
    // ---- the same at lower rates: where each side's latency starts to climb
    const latencySweep: SweepPoint[] = [];
    for (const fraction of config.sweep.filter((value) => value !== 0.5)) {
      const rate = submissions.ours.perSecond * fraction;
      log(`latency sweep: ${Math.round(rate)}/s (${fraction} × ours' maximum) for ${config.sweepSeconds} s, ours then bare`);
      const jobs = Math.max(1, Math.round(rate * config.sweepSeconds));
      const oursPoint = await measureLatency(redis, ours, rate, config.sweepSeconds, payloads(jobs));
      const barePoint = await measureLatency(redis, bare, rate, config.sweepSeconds, payloads(jobs));
      latencySweep.push(sweepPoint(fraction, oursPoint, barePoint));
    }
    latencySweep.push(sweepPoint(0.5, oursLatency, bareLatency));
    latencySweep.sort((a, b) => a.fraction - b.fraction);
    await stop(oursSubmit);
    await stop(bareSubmit);
    // A fresh simulator per phase: it keeps every transfer it accepted, and /_sim/stats lists them all.
    await stop(sim.process);
    sim = await startSimulatorProcess(SIM_ENV, { cpuProfDir: config.cpuProfDir, echo });
    children.push(sim.process);

    // ---- tracking: both workers up with their tracking queue paused, rounds alternate
    const tracking = oursTarget(redis, `${base}-ours-track`);
    targetsToClose.push(tracking);
    const pollEvery = `${config.trackPollMs}ms`;
    const oursTrack = await ourWorker('ours-track', tracking.prefix, {
      SUBMIT_CONCURRENCY: String(config.submitConcurrency),
      CUSTODY_CONNECTIONS: String(config.connections),
      TRACK_CONCURRENCY: String(config.trackConcurrency),
      TRACK_POLL_MIN: pollEvery,
      TRACK_POLL_MAX: pollEvery,
    });
    const bareTrack = await bareWorker('bare-track', 'track', bare, config.trackConcurrency);
    const oursTrackQueue = trackQueue(redis, tracking.prefix);
    const bareTrackQueue = trackQueue(redis, bare.prefix);
    queuesToClose.push(oursTrackQueue, bareTrackQueue);
    log(
      `tracking: ${config.trackTransfers} transfers per side, concurrency ${config.trackConcurrency}, poll every ${pollEvery}, ${config.rounds} round(s) of ${config.seconds} s`,
    );
    await prepareOurTracking(redis, tracking, oursTrackQueue, payloads(config.trackTransfers));
    const bareTracked = payloads(config.trackTransfers);
    await acceptTransfers(sim, bareTracked);
    await prepareBareTracking(bareTrackQueue, bareTracked);
    const oursTrackRounds: TrackingRound[] = [];
    const bareTrackRounds: TrackingRound[] = [];
    for (let round = 1; round <= config.rounds; round++) {
      oursTrackRounds.push(
        await trackingRound(redis, sim.url, oursTrackQueue, config.trackTransfers, config.trackWarmupSeconds, config.seconds),
      );
      bareTrackRounds.push(
        await trackingRound(redis, sim.url, bareTrackQueue, bareTracked.length, config.trackWarmupSeconds, config.seconds),
      );
      log(
        `round ${round}: ours ${Math.round(oursTrackRounds.at(-1)!.pollsPerSecond)} polls/s, bare ${Math.round(bareTrackRounds.at(-1)!.pollsPerSecond)} polls/s`,
      );
    }
    const unexpected = await eventsOtherThan(redis, tracking.stream, ['transfer.submitted', 'reconcile.completed']);
    if (unexpected.length > 0)
      throw new Error(`ours tracking: unexpected events ${unexpected.slice(0, 5).join(', ')} (did a txid appear?)`);
    const trackingResult = {
      ours: {
        transfers: config.trackTransfers,
        pollsPerSecond: median(oursTrackRounds.map((round) => round.pollsPerSecond)),
        rounds: oursTrackRounds,
      },
      bare: {
        transfers: bareTracked.length,
        pollsPerSecond: median(bareTrackRounds.map((round) => round.pollsPerSecond)),
        rounds: bareTrackRounds,
      },
      ratio: 0,
    };
    trackingResult.ratio = trackingResult.ours.pollsPerSecond / trackingResult.bare.pollsPerSecond;
    await stop(oursTrack);
    await stop(bareTrack);
    await stop(sim.process);
    sim = await startSimulatorProcess(SIM_ENV, { cpuProfDir: config.cpuProfDir, echo });
    children.push(sim.process);

    // ---- memory per tracked transfer
    const memoryTarget = oursTarget(redis, `${base}-mem`);
    targetsToClose.push(memoryTarget);
    const memoryWorker = await ourWorker('ours-memory', memoryTarget.prefix, {
      SUBMIT_CONCURRENCY: String(config.memoryConcurrency),
      CUSTODY_CONNECTIONS: String(config.connections),
      TRACK_POLL_MIN: MEMORY_PHASE_TRACK_POLL,
      TRACK_POLL_MAX: MEMORY_PHASE_TRACK_POLL,
    });
    log(`memory: ${config.tracked} transfers into tracking`);
    const memory = await measureMemory(redis, memoryTarget, config.tracked);
    log(`memory: ${Math.round(memory.bytesPerTransfer)} B per tracked transfer`);
    await stop(memoryWorker);

    const partial = {
      quick: config.quick,
      machine: machine(),
      versions: await versions(redis),
      redis: { source: redisSource(privateRedis) },
      setup: {
        processes: 'load generator (this process), simulator, worker under test: one Node process each; Redis',
        simulator: 'no added latency, SIM_TXID_AFTER 24h (no txid during the run)',
        'submit concurrency (ours SUBMIT_CONCURRENCY, bare)': config.submitConcurrency,
        'custody connections (ours CUSTODY_CONNECTIONS, bare pool)': config.connections,
        'track concurrency (ours TRACK_CONCURRENCY, bare)': config.trackConcurrency,
        'poll interval while tracking (ours TRACK_POLL_MIN/MAX, bare re-delay)': `${config.trackPollMs} ms`,
        'trackers during the submission phase (ours, bare same work)': `delayed ${SUBMIT_PHASE_TRACK_POLL} (not competing)`,
        'bare same work (BENCH_SAME_WORK)': config.sameWork ? 'submission rounds only' : 'off',
        'warm-up jobs before each backlog': config.warmup,
        'latency run': `${config.seconds} s`,
        'latency sweep': config.sweep.length > 0 ? `${config.sweep.join(', ')} × ours' maximum, ${config.sweepSeconds} s each` : 'off',
        'rounds per side (median counts)': config.rounds,
        'backlog per submission round': config.submissions,
        'tracking window': `${config.seconds} s after ${config.trackWarmupSeconds} s warm-up, per round`,
        'tracked transfers per side': config.trackTransfers,
        'memory phase SUBMIT_CONCURRENCY (loading only)': config.memoryConcurrency,
        'ours LOG_LEVEL': 'warn',
      },
      submissions,
      latency: { ours: oursLatency, bare: bareLatency },
      latencySweep,
      tracking: trackingResult,
      memory,
    };
    const notes = settingNotes();
    if ([...oursTrackRounds, ...bareTrackRounds].some((round) => round.errors > 0)) {
      notes.push('get-transfer answered errors during a tracking window: see the errors column.');
    }
    notes.push(
      ...busyNote([
        ...oursRounds,
        ...bareRounds,
        ...(submissions.sameWork?.rounds ?? []),
        ...oursTrackRounds,
        ...bareTrackRounds,
        oursLatency,
        bareLatency,
        ...latencySweep.flatMap((point) => [point.ours, point.bare]),
      ]),
    );
    notes.push(`total run time ${Math.round((performance.now() - started) / 1000)} s`);
    const result: BenchResult = { version: 1, finishedAt: new Date().toISOString(), ...partial, targets: targets(partial), notes };

    mkdirSync(dirname(config.resultFile), { recursive: true });
    writeFileSync(config.resultFile, `${JSON.stringify(result, null, 2)}\n`);
    const chartFile = config.resultFile.replace(/(\.json)?$/, '.svg');
    writeFileSync(chartFile, chart(result));
    process.stdout.write(`${format(result)}\n\nJSON: ${config.resultFile}\nchart: ${chartFile}\n`);
  } finally {
    for (const queue of queuesToClose) await queue.close().catch(() => undefined);
    for (const target of targetsToClose) await target.close().catch(() => undefined);
    for (const child of children.reverse()) await child.stop(5_000).catch(() => undefined);
    if (config.redisUrl) await removeKeys(redis, base).catch((error: Error) => log(`could not remove the run's keys: ${error.message}`));
    redis.disconnect();
    await privateRedis.stop();
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
}
