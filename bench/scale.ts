/**
 * `npm run bench:scale`: what tracking costs per upstream call as the number of tracked transfers
 * grows, while polls saturate the provider's request budget (CUSTODY_MAX_RPS = R, the simulator
 * answering 429 past R). Per size N, on a fresh private redis-server and a fresh simulator
 * (`SIM_TXID_AFTER=24h`: no txid ever):
 *
 *   1. seeding: N transfers through the real path (Queue.addBulk of the producer's jobs, under
 *      jobIdFor) into a seeding worker with a larger budget (SCALE_SEED_RPS), until N
 *      `transfer.submitted` events are on the stream and every transfer was polled once (its first
 *      poll identifies it: a one-off ledger write, not the steady state); `used_memory` before and
 *      after gives the bytes per tracked transfer. The seeding worker is stopped (SIGTERM);
 *   2. ours: the worker under test (src/worker.ts, one process, default concurrencies,
 *      TRACK_POLL_MIN/MAX=500ms/5s, CUSTODY_MAX_RPS=R) polls the N transfers; after a warm-up, a window
 *      measures upstream calls (simulator `/_sim/stats`, token endpoint excluded), Redis commands
 *      (INFO commandstats, Lua-internal commands included), CPU per process (/proc), provider 429s,
 *      and K new sends enqueued one every window/K seconds (enqueue → `transfer.submitted`);
 *   3. bare: Redis flushed, N plain BullMQ tracking jobs for the same transfers (addBulk), polled by
 *      bench/bare-worker.ts in track mode (one get-transfer and a re-delay per job) with a BullMQ
 *      limiter of one job per 1000/R ms; the same window figures (no sends: it has no send path).
 *
 * SCALE_LISTING=K (wallet-service only): every get-transfer answer also lists K other transfers of the
 * wallet with their sequenceIds (the simulator's narrowResults off, otherTransfersListed K,
 * includeSequenceIdInTransactions), as a provider that does not narrow its lookups does. They are the
 * wallet's K newest: K more transfers sent by the seeding worker after the N, whose txids the simulator
 * shows once the seeding worker stopped, so ours finds them in the N's answers (found for other, woken,
 * broadcast) and then sees them, txid and all, in every answer of the window. The window's new sends
 * go to another wallet (LISTING_SEND_WALLET) so they do not push the K out of the list. Writes
 * scale-listing<K>.json.
 *
 * SCALE_PROVIDER=bitgo measures the BitGo adapter instead (CUSTODY_PROVIDER=bitgo against the BitGo
 * simulator, no approval wait, no txid; the bare worker polls BitGo's get-transfer-by-sequenceId).
 *
 * Writes bench/results/scale.json and scale.svg (SCALE_QUICK=1: scale-quick.json / .svg, not committed);
 * with SCALE_PROVIDER=bitgo, scale-bitgo.json (scale-bitgo-quick.json).
 */
import { byEndpoint, simStats, total } from './sim-stats.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { getFreePort } from '../tools/redis/redis-server.ts';
import { newSequenceId, samplePayload } from '../tools/sample-payloads.ts';
import { jobIdFor } from '../packages/producer/src/job-id.ts';
import { parseSubmitPayload, SUBMIT_TRANSACTION } from '../packages/producer/src/payload.ts';
import { cpuWindow, type CpuShare } from './cpu.ts';
import { entryMs, forEachLimited, lastEntryId, oursTarget, readStream, sleep, SUBMIT_QUEUE, TRACK_QUEUE } from './load.ts';
import { startBareWorker, startOurWorker, startProviderSimulator, type NodeChild, type SimulatorChild } from './processes.ts';
import { BENCH_WALLET, benchPayload, POLL_ENDPOINT, readBenchProvider, type BenchProvider } from './provider.ts';
import { commandWindow, type CommandCounts } from './redis-stats.ts';
import { machine, packageVersion } from './report.ts';

interface Settings {
  quick: boolean;
  provider: BenchProvider;
  /** SCALE_LISTING: other transfers of the wallet listed in each get-transfer answer (0: narrowed answers). */
  listing: number;
  sizes: number[];
  rps: number;
  windowSeconds: number;
  warmupSeconds: number;
  sends: number;
  seedRps: number;
  seedConcurrency: number;
  resultFile: string;
  /** SCALE_CPU_PROF: a directory for the V8 CPU profile (`--cpu-prof`) of ours' measuring worker, one per size. */
  cpuProfDir: string | undefined;
}

function settings(): Settings {
  const env = process.env;
  const quick = env.SCALE_QUICK === '1';
  const number = (name: string, fallback: number): number => {
    const text = env[name];
    if (text === undefined || text === '') return fallback;
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}: must be a positive number, got ${JSON.stringify(text)}`);
    return value;
  };
  const sizes = (env.SCALE_SIZES ?? (quick ? '300,1000' : '1000,10000,100000')).split(',').map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n <= 0) throw new Error(`SCALE_SIZES: "${part}" is not a positive whole number`);
    return n;
  });
  const provider = readBenchProvider('SCALE_PROVIDER', env);
  const listingText = env.SCALE_LISTING?.trim() || '0';
  const listing = Number(listingText);
  if (!Number.isInteger(listing) || listing < 0)
    throw new Error(`SCALE_LISTING: must be a whole number, got ${JSON.stringify(listingText)}`);
  if (listing > 0 && provider !== 'wallet-service')
    throw new Error('SCALE_LISTING: only the wallet-service simulator lists other transfers');
  const results = fileURLToPath(new URL('./results/', import.meta.url));
  const fileName = [
    'scale',
    ...(provider === 'wallet-service' ? [] : [provider]),
    ...(listing > 0 ? [`listing${listing}`] : []),
    ...(quick ? ['quick'] : []),
  ].join('-');
  return {
    quick,
    provider,
    listing,
    sizes,
    rps: number('SCALE_RPS', quick ? 50 : 100),
    windowSeconds: number('SCALE_WINDOW_SECONDS', quick ? 10 : 60),
    warmupSeconds: number('SCALE_WARMUP_SECONDS', quick ? 5 : 20),
    sends: number('SCALE_SENDS', quick ? 10 : 50),
    seedRps: number('SCALE_SEED_RPS', 2000),
    seedConcurrency: number('SCALE_SEED_CONCURRENCY', 128),
    resultFile: env.SCALE_RESULT_FILE || `${results}${fileName}.json`,
    cpuProfDir: env.SCALE_CPU_PROF?.trim() || undefined,
  };
}

const log = (message: string) => process.stderr.write(`[bench:scale ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

async function setSimLimit(sim: SimulatorChild, maxRps: number): Promise<void> {
  await patchSim(sim, { maxRps });
}

async function patchSim(sim: SimulatorChild, settings: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${sim.url}/_sim/settings`, {
    method: 'PATCH',
    body: JSON.stringify(settings),
    headers: { 'content-type': 'application/json' },
  });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`simulator settings: HTTP ${response.status}`);
}

async function info(redis: Redis, field: string): Promise<number> {
  const text = await redis.info();
  const match = new RegExp(`^${field}:(\\d+)`, 'm').exec(text);
  if (!match) throw new Error(`INFO has no ${field}`);
  return Number(match[1]);
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

/** Counter samples of the worker's /metrics whose line starts with one of `names`, by series. */
async function scrape(port: number, names: readonly string[]): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !names.some((name) => line.startsWith(name))) continue;
    const space = line.lastIndexOf(' ');
    series.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return series;
}

const METRICS = ['custody_budget_used_total', 'custody_budget_refused_total', 'custody_worker_jobs_total{queue="track-transfer"'] as const;

export interface SendLatency {
  count: number;
  p50S: number;
  p99S: number;
  maxS: number;
  /** One slot of the budget, 1/R. */
  floorS: number;
}

export interface SideResult {
  windowSeconds: number;
  /** Upstream requests in the window, every endpoint but token, every outcome. */
  upstreamCalls: number;
  callsPerSecond: number;
  /** callsPerSecond ÷ R. */
  budgetUsed: number;
  callsByEndpoint: Record<string, number>;
  provider429s: number;
  /** Redis commands per upstream call, every command (probes of the load generator excluded). */
  redisCommandsPerCall: number;
  /** The biggest commands per upstream call. */
  topCommands: CommandCounts;
  workerCores: number;
  workerCpuMsPerCall: number;
  redisCores: number;
  redisCpuMsPerCall: number;
  simulatorCores: number;
  /** CPU used by processes outside the benchmark meanwhile (cores). */
  otherCores: number;
  cpu: CpuShare | undefined;
  /** Ours: K new sends during the window. */
  sends?: SendLatency;
  /** Ours: deltas of the worker's budget and tracking-job counters over the window, per upstream call. */
  workerMetricsPerCall?: Record<string, number>;
}

export interface SizeResult {
  n: number;
  rps: number;
  seeding: {
    seconds: number;
    seedRps: number;
    usedMemoryBefore: number;
    usedMemoryAfter: number;
    bytesPerTransfer: number;
    keysPerTransfer: number;
  };
  ours: SideResult;
  bare: SideResult & { seedSeconds: number; bytesPerJob: number };
}

interface WindowOptions {
  redis: Redis;
  sim: SimulatorChild;
  role: 'ours' | 'bare';
  rps: number;
  warmupSeconds: number;
  windowSeconds: number;
  /** Ours: enqueue K sends spread over the window and watch for their transfer.submitted. */
  sends?: { count: number; stream: string; enqueue: (sequenceId: string) => Promise<void> };
  metricsPort?: number;
}

async function measureWindow(options: WindowOptions): Promise<SideResult> {
  const { redis, sim, role, rps, windowSeconds } = options;
  await sleep(options.warmupSeconds * 1000);

  const submittedAt = new Map<string, number>();
  const reader = options.sends
    ? readStream(redis, options.sends.stream, await lastEntryId(redis, options.sends.stream), (event, sequenceId, id) => {
        if (event === 'transfer.submitted') submittedAt.set(sequenceId, entryMs(id));
      })
    : undefined;
  try {
    const metricsBefore = options.metricsPort ? await scrape(options.metricsPort, METRICS) : undefined;
    const before = await simStats(sim);
    const commands = await commandWindow(redis);
    const cpu = cpuWindow();
    const startedAt = performance.now();

    const enqueuedAt = new Map<string, number>();
    const sending = (async () => {
      const sends = options.sends;
      if (!sends) return;
      const every = (windowSeconds * 1000) / sends.count;
      for (let i = 0; i < sends.count; i++) {
        const due = startedAt + every * (i + 0.5);
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const sequenceId = newSequenceId();
        enqueuedAt.set(sequenceId, Date.now());
        await sends.enqueue(sequenceId);
      }
    })();
    await sleep(windowSeconds * 1000);
    await sending;
    const after = await simStats(sim);
    const elapsed = (performance.now() - startedAt) / 1000;
    const share = cpu.end();
    const calls = total(after, (e) => e !== 'token') - total(before, (e) => e !== 'token');
    const perCall = Math.max(1, calls);
    const topCommands = await commands.end(perCall);
    const metricsAfter = options.metricsPort ? await scrape(options.metricsPort, METRICS) : undefined;

    let sends: SendLatency | undefined;
    if (options.sends) {
      const ids = [...enqueuedAt.keys()];
      const deadline = Date.now() + 120_000;
      while (!ids.every((id) => submittedAt.has(id))) {
        if (Date.now() > deadline)
          throw new Error(`${role}: ${ids.filter((id) => !submittedAt.has(id)).length} sends not submitted in 120 s`);
        await sleep(50);
      }
      const latencies = ids.map((id) => (submittedAt.get(id)! - enqueuedAt.get(id)!) / 1000);
      sends = {
        count: ids.length,
        p50S: quantile(latencies, 0.5),
        p99S: quantile(latencies, 0.99),
        maxS: Math.max(...latencies),
        floorS: 1 / rps,
      };
    }
    let workerMetricsPerCall: Record<string, number> | undefined;
    if (metricsBefore && metricsAfter) {
      workerMetricsPerCall = {};
      for (const [series, value] of metricsAfter) {
        const delta = value - (metricsBefore.get(series) ?? 0);
        if (delta > 0) workerMetricsPerCall[series] = delta / perCall;
      }
    }
    const cores = (label: string) => share?.processes[label] ?? Number.NaN;
    const msPerCall = (c: number) => (c * elapsed * 1000) / perCall;
    const top = Object.fromEntries(Object.entries(topCommands).slice(0, 12));
    return {
      windowSeconds: elapsed,
      upstreamCalls: calls,
      callsPerSecond: calls / elapsed,
      budgetUsed: calls / elapsed / rps,
      callsByEndpoint: byEndpoint(before, after, ['token']),
      provider429s:
        total(after, (e, outcome) => e !== 'token' && outcome === '429') -
        total(before, (e, outcome) => e !== 'token' && outcome === '429'),
      redisCommandsPerCall: Object.values(topCommands).reduce((sum, value) => sum + value, 0),
      topCommands: top,
      workerCores: cores(role),
      workerCpuMsPerCall: msPerCall(cores(role)),
      redisCores: cores('redis-server'),
      redisCpuMsPerCall: msPerCall(cores('redis-server')),
      simulatorCores: cores('simulator'),
      otherCores: share?.otherCores ?? Number.NaN,
      cpu: share,
      ...(sends ? { sends } : {}),
      ...(workerMetricsPerCall ? { workerMetricsPerCall } : {}),
    };
  } finally {
    await reader?.stop();
  }
}

/** Polls made while seeding, per transfer, before the window (see runSize). */
const SEED_POLL_ROUNDS = 1.2;

async function waitUntil(what: string, timeoutMs: number, done: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const TRACK_ENV = { TRACK_POLL_MIN: '500ms', TRACK_POLL_MAX: '5s' } as const;

/** SCALE_LISTING: the wallet of the window's new sends, so the K listed transfers stay the newest of BENCH_WALLET's. */
const LISTING_SEND_WALLET = 311;

/**
 * SCALE_LISTING: K transfers more through the seeding worker, after the N (so the wallet's newest),
 * until the simulator accepted each. Their txids are shown later (showTxids), once the seeder stopped.
 */
async function seedListed(redis: Redis, prefix: string, sim: SimulatorChild, k: number): Promise<string[]> {
  const target = oursTarget(redis, prefix);
  const sequenceIds: string[] = [];
  try {
    for (let i = 0; i < k; i++) {
      const sequenceId = newSequenceId();
      await target.enqueue(benchPayload('wallet-service', sequenceId));
      sequenceIds.push(sequenceId);
    }
  } finally {
    await target.close();
  }
  await waitUntil(`the ${k} listed transfers accepted`, 60_000, async () => {
    for (const sequenceId of sequenceIds) {
      const response = await fetch(`${sim.url}/_sim/transfers/${sequenceId}`);
      await response.arrayBuffer();
      if (response.status !== 200) return false;
    }
    return true;
  });
  return sequenceIds;
}

async function showTxids(sim: SimulatorChild, sequenceIds: readonly string[]): Promise<void> {
  for (const sequenceId of sequenceIds) {
    const response = await fetch(`${sim.url}/_sim/transfers/${sequenceId}/txid`, { method: 'POST' });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`simulator txid of ${sequenceId}: HTTP ${response.status}`);
  }
}

async function runSize(config: Settings, n: number): Promise<SizeResult> {
  const { rps, provider } = config;
  // A fresh Redis per size: used_memory starts from an empty instance, commandstats from zero.
  const server = await acquireRedis({ noContainers: true, server: { appendonly: false } });
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  // No txid ever; BitGo's simulator needs no approval by default (approvalAfterMs 0).
  const sim = await startProviderSimulator(provider, { SIM_TXID_AFTER: '24h' });
  const children: NodeChild[] = [];
  if (config.listing > 0) {
    await patchSim(sim, { narrowResults: false, otherTransfersListed: config.listing, includeSequenceIdInTransactions: true });
  }
  const prefix = `scale-${n}`;
  try {
    // 1. Seeding, at a larger budget.
    await setSimLimit(sim, config.seedRps);
    const seeder = await startOurWorker({
      name: 'scale-seed',
      redisUrl: server.url,
      prefix,
      sim,
      env: {
        ...TRACK_ENV,
        CUSTODY_MAX_RPS: String(config.seedRps),
        SUBMIT_CONCURRENCY: String(config.seedConcurrency),
      },
    });
    children.push(seeder);
    const stream = `${prefix}:transfer-events`;
    await sleep(500);
    const memoryBefore = await info(redis, 'used_memory');
    const keysBefore = await redis.dbsize();
    const sequenceIds: string[] = [];
    let submitted = 0;
    const reader = readStream(redis, stream, '0-0', (event) => {
      if (event === 'transfer.submitted') submitted++;
    });
    const seedStart = performance.now();
    const submitQueue = new Queue(SUBMIT_QUEUE, { connection: redis, prefix });
    try {
      const chunks = Math.ceil(n / 1000);
      await forEachLimited(
        Array.from({ length: chunks }, (_, i) => i),
        2,
        async (chunk) => {
          const jobs = [];
          for (let i = chunk * 1000; i < Math.min(n, (chunk + 1) * 1000); i++) {
            const parsed = parseSubmitPayload(benchPayload(provider));
            if (!parsed.ok) throw new Error(`sample payload invalid: ${JSON.stringify(parsed.issues)}`);
            const sequenceId = parsed.payload.halfSigned.sequenceId;
            sequenceIds.push(sequenceId);
            jobs.push({ name: SUBMIT_TRANSACTION, data: parsed.payload, opts: { jobId: jobIdFor(sequenceId) } });
          }
          await submitQueue.addBulk(jobs);
        },
      );
      log(`N=${n}: enqueued in ${((performance.now() - seedStart) / 1000).toFixed(1)} s; waiting for ${n} transfer.submitted`);
      let lastLog = Date.now();
      await waitUntil(`${n} transfer.submitted`, 120_000 + n * 50, () => {
        if (Date.now() - lastLog > 30_000) {
          lastLog = Date.now();
          log(`  ${submitted} of ${n} submitted`);
        }
        return submitted >= n;
      });
      await waitUntil('the submit queue to drain', 60_000, async () => {
        const counts = await submitQueue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        return Object.values(counts).every((count) => count === 0);
      });
      // Every transfer polled once before the window: its first poll identifies it upstream (a ledger
      // write, once per transfer). Without this, a window shorter than N/R (each transfer's turn at R)
      // would count that one-off write on nearly every poll at large N. Tracking queues are first due,
      // first polled, so N × SEED_POLL_ROUNDS polls reach every transfer.
      await waitUntil(`every transfer polled once`, 120_000 + n * 50, async () => {
        return total(await simStats(sim), (endpoint) => endpoint === POLL_ENDPOINT[provider]) >= n * SEED_POLL_ROUNDS;
      });
    } finally {
      await reader.stop();
      await submitQueue.close();
    }
    const seedSeconds = (performance.now() - seedStart) / 1000;
    await sleep(1_000);
    const memoryAfter = await info(redis, 'used_memory');
    const keysAfter = await redis.dbsize();
    log(`N=${n}: seeded in ${seedSeconds.toFixed(1)} s, ${Math.round((memoryAfter - memoryBefore) / n)} B per transfer`);
    const listed = config.listing > 0 ? await seedListed(redis, prefix, sim, config.listing) : [];
    await seeder.stop(30_000);
    await showTxids(sim, listed);

    // 2. Ours at R.
    await setSimLimit(sim, rps);
    const httpPort = await getFreePort();
    const worker = await startOurWorker({
      name: 'scale-ours',
      cpuProfDir: config.cpuProfDir,
      redisUrl: server.url,
      prefix,
      sim,
      httpPort,
      env: { ...TRACK_ENV, CUSTODY_MAX_RPS: String(rps) },
    });
    children.push(worker);
    const target = oursTarget(redis, prefix);
    let ours: SideResult;
    try {
      log(
        `N=${n}: ours (${provider}) at R=${rps}/s: ${config.warmupSeconds} s warm-up, ${config.windowSeconds} s window, ${config.sends} sends`,
      );
      ours = await measureWindow({
        redis,
        sim,
        role: 'ours',
        rps,
        warmupSeconds: config.warmupSeconds,
        windowSeconds: config.windowSeconds,
        metricsPort: httpPort,
        sends: {
          count: config.sends,
          stream,
          enqueue: (sequenceId) =>
            target.enqueue(
              config.listing > 0 ? samplePayload({ sequenceId, walletId: LISTING_SEND_WALLET }) : benchPayload(provider, sequenceId),
            ),
        },
      });
    } finally {
      await target.close();
    }
    if (config.listing > 0) {
      const found = await scrape(httpPort, ['custody_track_found_in_other_answers_total']);
      log(`N=${n}: listed transfers found in other answers (warm-up and window): ${[...found.values()].join(', ')}`);
    }
    await worker.stop(30_000);

    // 3. Bare at R, on the same transfers (the simulator knows them), Redis emptied first.
    await redis.flushall();
    await sleep(500);
    const barePrefix = `scale-bare-${n}`;
    const bareMemoryBefore = await info(redis, 'used_memory');
    const bareStart = performance.now();
    const trackQueue = new Queue(TRACK_QUEUE, { connection: redis, prefix: barePrefix });
    try {
      for (let i = 0; i < sequenceIds.length; i += 1000) {
        await trackQueue.addBulk(
          sequenceIds.slice(i, i + 1000).map((sequenceId) => ({
            name: TRACK_QUEUE,
            data: { sequenceId, ...BENCH_WALLET[provider] },
            opts: { jobId: `track-${sequenceId}` },
          })),
        );
      }
    } finally {
      await trackQueue.close();
    }
    const bareSeedSeconds = (performance.now() - bareStart) / 1000;
    const bareMemoryAfter = await info(redis, 'used_memory');
    const bareWorker = await startBareWorker({
      name: 'scale-bare',
      mode: 'track',
      redisUrl: server.url,
      prefix: barePrefix,
      stream: `${barePrefix}:bare-events`,
      sim,
      concurrency: 64,
      connections: 64,
      trackDelayMs: 500,
      limitRps: rps,
    });
    children.push(bareWorker);
    log(`N=${n}: bare at R=${rps}/s (seeded in ${bareSeedSeconds.toFixed(1)} s)`);
    const bare = await measureWindow({
      redis,
      sim,
      role: 'bare',
      rps,
      warmupSeconds: config.warmupSeconds,
      windowSeconds: config.windowSeconds,
    });
    await bareWorker.stop(30_000);

    return {
      n,
      rps,
      seeding: {
        seconds: seedSeconds,
        seedRps: config.seedRps,
        usedMemoryBefore: memoryBefore,
        usedMemoryAfter: memoryAfter,
        bytesPerTransfer: (memoryAfter - memoryBefore) / n,
        keysPerTransfer: (keysAfter - keysBefore) / n,
      },
      ours,
      bare: { ...bare, seedSeconds: bareSeedSeconds, bytesPerJob: (bareMemoryAfter - bareMemoryBefore) / n },
    };
  } finally {
    for (const child of children) if (child.running) await child.stop(10_000);
    await sim.process.stop(5_000);
    redis.disconnect();
    await server.stop();
  }
}

const f = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a');

function table(results: SizeResult[]): string {
  const header = [
    'N',
    'side',
    'calls/s',
    'budget',
    '429s',
    'Redis cmds/call',
    'worker CPU ms/call',
    'Redis CPU',
    'Redis ms/call',
    'send p50 / p99 s',
    'B/transfer',
  ];
  const rows: string[][] = [];
  for (const r of results) {
    for (const side of ['ours', 'bare'] as const) {
      const s = r[side];
      rows.push([
        r.n.toLocaleString('en-US'),
        side,
        f(s.callsPerSecond),
        `${f(s.budgetUsed * 100)} %`,
        String(s.provider429s),
        f(s.redisCommandsPerCall),
        f(s.workerCpuMsPerCall, 2),
        `${f(s.redisCores * 100)} %`,
        f(s.redisCpuMsPerCall, 2),
        s.sends ? `${f(s.sends.p50S, 3)} / ${f(s.sends.p99S, 3)}` : '-',
        side === 'ours' ? f(r.seeding.bytesPerTransfer, 0) : f(r.bare.bytesPerJob, 0),
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const COLOURS = { ours: '#1f6feb', bare: '#8b949e' } as const;

/** Two panels (Redis commands per call, worker CPU ms per call), grouped bars per N, log scale. */
export function chart(results: SizeResult[], subtitle: string, provider: BenchProvider = 'wallet-service'): string {
  const panelW = 360;
  const top = 70;
  const bottom = 290;
  const left = 70;
  const gap = 90;
  const width = left + 2 * panelW + gap + 30;
  const height = 350;
  const esc = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${left}" y="20" font-weight="600" font-size="14">Tracking cost per upstream call, polls saturating R (log scale)</text>`,
    `<text x="${left}" y="36" font-size="11" fill="#57606a">${esc(subtitle)}</text>`,
  ];
  const panels: Array<[string, (s: SideResult) => number, number]> = [
    ['Redis commands per call', (s) => s.redisCommandsPerCall, 1],
    ['worker CPU ms per call', (s) => s.workerCpuMsPerCall, 2],
  ];
  panels.forEach(([title, value, digits], p) => {
    const x0 = left + p * (panelW + gap);
    const values = results.flatMap((r) => [value(r.ours), value(r.bare)]).filter((v) => Number.isFinite(v) && v > 0);
    const lo = Math.floor(Math.log10(Math.min(...values, 10)));
    const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values, 1))));
    const yOf = (v: number) => bottom - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / Math.max(1, hi - lo)) * (bottom - top);
    parts.push(`<text x="${x0}" y="${top - 12}" font-weight="600">${esc(title)}</text>`);
    parts.push(`<line x1="${x0}" y1="${bottom}" x2="${x0 + panelW}" y2="${bottom}" stroke="#d0d7de"/>`);
    parts.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${bottom}" stroke="#d0d7de"/>`);
    for (let d = lo; d <= hi; d++) {
      const y = yOf(10 ** d);
      if (d > lo) parts.push(`<line x1="${x0}" y1="${y.toFixed(1)}" x2="${x0 + panelW}" y2="${y.toFixed(1)}" stroke="#eaeef2"/>`);
      parts.push(
        `<text x="${x0 - 6}" y="${(y + 4).toFixed(1)}" font-size="10" text-anchor="end" fill="#57606a">${(10 ** d).toLocaleString('en-US')}</text>`,
      );
    }
    const slot = panelW / results.length;
    const bar = Math.min(40, slot / 3);
    results.forEach((r, i) => {
      const centre = x0 + slot * (i + 0.5);
      (['ours', 'bare'] as const).forEach((side, k) => {
        const v = value(r[side]);
        if (!Number.isFinite(v) || v <= 0) return;
        const x = centre - bar + k * bar;
        const y = yOf(v);
        parts.push(
          `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(bar - 2).toFixed(1)}" height="${(bottom - y).toFixed(1)}" fill="${COLOURS[side]}"><title>${side} N=${r.n}: ${v.toFixed(digits)}</title></rect>`,
        );
        parts.push(
          `<text x="${(x + bar / 2 - 1).toFixed(1)}" y="${(y - 3).toFixed(1)}" font-size="9" text-anchor="middle">${v.toFixed(digits)}</text>`,
        );
      });
      parts.push(
        `<text x="${centre.toFixed(1)}" y="${bottom + 15}" font-size="10" text-anchor="middle" fill="#57606a">N=${r.n.toLocaleString('en-US')}</text>`,
      );
    });
  });
  (['ours', 'bare'] as const).forEach((side, index) => {
    const x = left + index * 260;
    parts.push(`<rect x="${x}" y="${height - 27}" width="12" height="12" fill="${COLOURS[side]}"/>`);
    parts.push(
      `<text x="${x + 18}" y="${height - 17}">${side === 'ours' ? `ours (src/worker.ts${provider === 'wallet-service' ? '' : `, ${provider}`})` : `bare BullMQ (1 ${provider === 'bitgo' ? 'get-transfer-by-sequenceId' : 'get-transfer'} + re-delay, limiter R)`}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

async function main(): Promise<void> {
  const config = settings();
  const started = performance.now();
  log(
    `provider ${config.provider}${config.listing > 0 ? `, ${config.listing} other transfers listed per answer` : ''}, sizes ${config.sizes.join(', ')}, R=${config.rps}/s, warm-up ${config.warmupSeconds} s, window ${config.windowSeconds} s, ${config.sends} sends${config.quick ? ' (SCALE_QUICK: figures meaningless)' : ''}`,
  );
  const results: SizeResult[] = [];
  const command = [
    ...Object.entries(process.env)
      .filter(([name]) => name.startsWith('SCALE_'))
      .map(([name, value]) => `${name}=${value ?? ''}`),
    'npm run bench:scale',
  ].join(' ');
  const m = machine();
  const svgFile = `${config.resultFile.replace(/\.json$/, '')}.svg`;
  mkdirSync(dirname(config.resultFile), { recursive: true });
  // Written after every size, so a run that fails at a large size keeps the smaller ones (complete: false).
  const write = (complete: boolean) => {
    const output = {
      version: 1,
      finishedAt: new Date().toISOString(),
      complete,
      quick: config.quick,
      /** The custody provider measured (SCALE_PROVIDER): its adapter, simulator and bare poll. */
      provider: config.provider,
      /** SCALE_LISTING: other transfers of the wallet listed in each get-transfer answer (0: none). */
      listing: config.listing,
      command,
      durationSeconds: (performance.now() - started) / 1000,
      machine: m,
      versions: { node: process.version, bullmq: packageVersion('bullmq'), ioredis: packageVersion('ioredis') },
      settings: {
        sizes: config.sizes,
        rps: config.rps,
        windowSeconds: config.windowSeconds,
        warmupSeconds: config.warmupSeconds,
        sends: config.sends,
        seedRps: config.seedRps,
        seedConcurrency: config.seedConcurrency,
        trackPollMin: TRACK_ENV.TRACK_POLL_MIN,
        trackPollMax: TRACK_ENV.TRACK_POLL_MAX,
      },
      results,
    };
    writeFileSync(config.resultFile, `${JSON.stringify(output, null, 2)}\n`);
    writeFileSync(
      svgFile,
      chart(
        results,
        `${config.provider === 'wallet-service' ? '' : `${config.provider}, `}${config.listing > 0 ? `${config.listing} others listed per answer, ` : ''}R=${config.rps}/s, ${config.windowSeconds} s window; ${m.cores} cores, ${process.version}${config.quick ? ', SCALE_QUICK (figures meaningless)' : ''}`,
        config.provider,
      ),
    );
  };
  for (const n of config.sizes) {
    results.push(await runSize(config, n));
    write(results.length === config.sizes.length);
    process.stdout.write(`${table(results.slice(-1))}\n`);
  }
  process.stdout.write(`\nprovider: ${config.provider}; machine: ${m.cpu}, ${m.cores} cores, ${process.version}\n${table(results)}\n`);
  log(`wrote ${config.resultFile} and ${svgFile} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

await main();
