/**
 * `npm run bench:console`: how long the operator console's reads take the server as the ledger grows.
 * Per size N (CONSOLE_SIZES, default 1000,10000,100000; cumulative on one private redis-server):
 *
 *   1. seeding: transfers are driven through the ledger's named operations (src/ledger/operations.ts,
 *      the transition script itself, so every listing index is the real one), many at once on an
 *      auto-pipelined connection, never through a worker. They end spread as a ledger's are: mostly
 *      broadcast, some submitted (a few waiting for an approval), a few unresolved, send-unknown,
 *      halted, failed, cancelled, expired with SEND_OUTCOME_UNKNOWN, gated (MIX below);
 *   2. the HTTP server as the worker builds it (createApp + createHttpServer, on 127.0.0.1), its
 *      `/api/v1` rate limit raised so the bench is not refused; each route below is asked
 *      CONSOLE_REQUESTS times (default 300), one request at a time, after a warm-up. The server time
 *      is fastify's reply.elapsedTime (request received → response sent); the round trip is beside it.
 *
 * The goal (CONSOLE_P99_GOAL_MS, 50): p99 server time at the largest size. The machine's load average is
 * printed with the figures (a shared machine). CONSOLE_MARKDOWN=1 prints the table as Markdown.
 */
import { createHash, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { createApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config/config.ts';
import { createHttpServer } from '../src/http/server.ts';
import { createKeys } from '../src/ledger/keys.ts';
import { Ledger, TransferState, type GateDecision, type TransitionRequest } from '../src/ledger/ledger.ts';
import { op } from '../src/ledger/operations.ts';
import { hashSecret } from '../src/lib/secret-hash.ts';
import { createLogger } from '../src/logger.ts';
import { workerCustodyEnv } from '../src/simulator/index.ts';
import { parseSubmitPayload, type SubmitPayload } from '../packages/producer/src/payload.ts';
import type { EventData } from '../packages/producer/src/events.ts';
import { samplePayload } from '../tools/sample-payloads.ts';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { forEachLimited } from './load.ts';
import { startSimulatorProcess } from './processes.ts';
import { machine } from './report.ts';
import { percentile } from './submissions.ts';

const env = process.env;
const SIZES = (env.CONSOLE_SIZES ?? '1000,10000,100000').split(',').map(Number);
const REQUESTS = Number(env.CONSOLE_REQUESTS ?? 300);
const WARMUP = 20;
const SEED_PARALLEL = Number(env.CONSOLE_SEED_PARALLEL ?? 256);
const GOAL_MS = Number(env.CONSOLE_P99_GOAL_MS ?? 50);
const MARKDOWN = env.CONSOLE_MARKDOWN === '1';
const LEASE_MS = 30_000;
const USER = 'bench';
const PASSWORD = 'bench-console-password';
const AT = '2026-11-23T10:15:02.120Z';
const UNRESOLVED: EventData['transfer.unresolved'] = { code: 'SEND_OUTCOME_UNKNOWN', attempts: 1, lastError: 'CUSTODY_TIMEOUT' };
const DECISION: GateDecision = {
  setting: { outgoingTxn: 0, mandatory: false, blockTxn: false },
  settingFetchedAt: AT,
  checkedAt: AT,
  applies: false,
  reference: false,
  outcome: 'passed',
};

/** Where the seeded transfers end, per 1000. */
const MIX: ReadonlyArray<[End, number]> = [
  ['broadcast', 860],
  ['submitted', 70],
  ['approval', 10],
  ['failed', 15],
  ['unresolved', 10],
  ['halted', 10],
  ['cancelled', 10],
  ['gated', 5],
  ['send-unknown', 5],
  ['expired-unknown', 5],
];
type End =
  'broadcast' | 'submitted' | 'approval' | 'failed' | 'unresolved' | 'halted' | 'cancelled' | 'gated' | 'send-unknown' | 'expired-unknown';

const log = (line: string) => process.stderr.write(`[bench:console] ${line}\n`);

function endOf(i: number): End {
  let slot = (i * 7919) % 1000;
  for (const [end, share] of MIX) {
    if (slot < share) return end;
    slot -= share;
  }
  return 'broadcast';
}

function payloadOf(sequenceId: string, i: number): SubmitPayload {
  const parsed = parseSubmitPayload(samplePayload({ sequenceId, walletId: 1000 + (i % 20) }));
  if (!parsed.ok) throw new Error('sample payload invalid');
  return parsed.payload;
}

/** One transfer taken to `end` through the operations the handlers use. */
async function drive(ledger: Ledger, i: number, end: End): Promise<string> {
  const s = `bench-${i}-${randomUUID()}`;
  const owner = `runner-${i}`;
  const must = async (request: TransitionRequest) => {
    const result = await ledger.transition(s, request);
    if (!result.ok) throw new Error(`${request.from.join('|')} -> ${request.to} refused: ${result.reason} (state ${result.state})`);
  };
  await must(op.create(`job-${s}`, payloadOf(s, i)));
  if (end === 'cancelled') {
    const result = await ledger.cancel(s, { reason: 'duplicate order', by: 'cli' });
    if (result.outcome !== 'cancelled') throw new Error(`cancel: ${result.outcome}`);
    return s;
  }
  await must(op.pass(DECISION));
  if (end === 'gated') return s;
  await must(op.takeSend(TransferState.GATED, owner, LEASE_MS, undefined));
  if (end === 'failed') {
    await must(op.fail(owner, { code: 'CUSTODY_REJECTED', httpStatus: 400, message: 'm', attempts: 1 }, 0));
    return s;
  }
  if (end === 'send-unknown' || end === 'unresolved' || end === 'expired-unknown') {
    await must(op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }));
    if (end === 'send-unknown') return s;
    await must(op.takeLease(owner, LEASE_MS));
    if (end === 'expired-unknown') {
      await must(op.expireUnsettled(owner, { code: 'SEND_OUTCOME_UNKNOWN', submittedAt: AT, deadline: AT }));
      return s;
    }
    await must(op.markUnknown(owner, { lastError: 'CUSTODY_TIMEOUT', extraSends: 0 }, UNRESOLVED));
    return s;
  }
  const record = String(10_000_000 + i);
  await must(op.markSubmitted(owner, { transfer: null, recoveredBy: 'duplicate' }, { transactionId: record }, 0));
  // The tracking job is not the bench's business: the outbox entry goes, as Trackers does once it added one.
  await ledger.trackerAdded(s);
  await must(op.pollAnswered());
  if (end === 'submitted') return s;
  if (end === 'approval') {
    await must(op.approvalPending());
    return s;
  }
  if (end === 'halted') {
    await must(op.haltedForNow('removed'));
    await must(op.pollFailed(1));
    await must(op.halt({ state: 'rejected', providerTransferId: record }));
    return s;
  }
  const txid = txidOf(s);
  await must(op.txidFound({ id: record, txid }));
  const transaction = { id: record, type: 'send', txid, outputs: [] };
  await must(op.broadcast(txid, Date.now(), { txid, transaction, walletTransaction: null }));
  return s;
}

/** A seeded broadcast's txid: random-looking hex, as a chain's. */
function txidOf(sequenceId: string): string {
  return createHash('sha256').update(sequenceId).digest('hex');
}

interface Route {
  name: string;
  path: (sample: Samples) => string;
}

interface Samples {
  broadcast: string[];
  unresolved: string[];
}

const ROUTES: Route[] = [
  { name: 'GET /api/v1/summary', path: () => '/api/v1/summary' },
  { name: 'GET /api/v1/transfers?state=broadcast&limit=50', path: () => '/api/v1/transfers?state=broadcast&limit=50' },
  { name: 'GET /api/v1/transfers?attention=unresolved&limit=50', path: () => '/api/v1/transfers?attention=unresolved&limit=50' },
  {
    name: 'GET /api/v1/transfers?q=<sequenceId prefix>&limit=50',
    path: (s) => `/api/v1/transfers?q=${pick(s.broadcast).slice(0, 9)}&limit=50`,
  },
  {
    name: 'GET /api/v1/transfers?q=<txid prefix>&limit=50',
    path: (s) => `/api/v1/transfers?q=${txidOf(pick(s.broadcast)).slice(0, 8)}&limit=50`,
  },
  { name: 'GET /api/v1/transfers/:sequenceId', path: (s) => `/api/v1/transfers/${pick(s.broadcast)}` },
  { name: 'GET /console/transfers/:sequenceId', path: (s) => `/console/transfers/${pick(s.broadcast)}` },
  { name: 'GET /console (overview)', path: () => '/console' },
];

let seed = 1;
function pick<T>(items: readonly T[]): T {
  seed = (seed * 48271) % 2147483647;
  return items[seed % items.length]!;
}

interface Row {
  size: number;
  route: string;
  p50: number;
  p99: number;
  max: number;
  roundTripP99: number;
  load: string;
}

async function measure(base: string, app: App, timings: number[], route: Route, samples: Samples, size: number): Promise<Row> {
  const authorization = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
  const server: number[] = [];
  const trips: number[] = [];
  for (let i = 0; i < WARMUP + REQUESTS; i++) {
    timings.length = 0;
    const started = performance.now();
    const response = await fetch(`${base}${route.path(samples)}`, { headers: { authorization } });
    await response.arrayBuffer();
    const trip = performance.now() - started;
    if (response.status !== 200) throw new Error(`${route.name}: ${response.status}`);
    // onResponse runs once the response is sent: wait for it (same process, a tick or two).
    while (timings.length === 0) await new Promise((resolve) => setImmediate(resolve));
    if (i >= WARMUP) {
      server.push(timings[0]!);
      trips.push(trip);
    }
  }
  void app;
  server.sort((a, b) => a - b);
  trips.sort((a, b) => a - b);
  return {
    size,
    route: route.name,
    p50: percentile(server, 50),
    p99: percentile(server, 99),
    max: server[server.length - 1]!,
    roundTripP99: percentile(trips, 99),
    load: loadavg()
      .map((n) => n.toFixed(2))
      .join(' '),
  };
}

const redis = await acquireRedis({ noContainers: true, server: { appendonly: false } });
const sim = await startSimulatorProcess({});
const prefix = `bench-console-${Date.now()}`;
const seeder = new Redis(redis.url, { maxRetriesPerRequest: null, enableAutoPipelining: true });
let app: App | undefined;
let server: Awaited<ReturnType<typeof createHttpServer>> | undefined;
try {
  const config = loadConfig({
    REDIS_URL: redis.url,
    QUEUE_PREFIX: prefix,
    ...workerCustodyEnv(sim),
    HTTP_HOST: '127.0.0.1',
    HTTP_PORT: '0',
    LOG_LEVEL: 'warn',
    // Nothing for reconciliation to repair while the bench reads: the seeded transfers are as meant.
    RECONCILE_EVERY: '1h',
    RECONCILE_GRACE: '24h',
    REDIS_ALLOW_VOLATILE: '1',
    CONSOLE_USERS: `${USER}:viewer:${await hashSecret(PASSWORD)}`,
  });
  const keys = createKeys(prefix, config.queue.eventsStream);
  const ledger = new Ledger(seeder, keys, {
    eventsMaxLen: config.queue.eventsMaxLen,
    retentionMs: config.retention.transfersMs,
    tombstoneRetentionMs: config.retention.tombstonesMs,
  });
  await ledger.epoch.start();
  app = await createApp(config, createLogger({ level: 'warn' }));
  server = await createHttpServer({
    app,
    config,
    logger: createLogger({ level: 'warn' }),
    metrics: app.metrics,
    apiRateLimit: { max: 1_000_000, timeWindowMs: 60_000 },
  });
  const timings: number[] = [];
  server.addHook('onResponse', async (_request, reply) => {
    timings.push(reply.elapsedTime);
  });
  const base = await server.listen({ host: '127.0.0.1', port: 0 });

  const samples: Samples = { broadcast: [], unresolved: [] };
  const rows: Row[] = [];
  let seeded = 0;
  for (const size of SIZES) {
    const started = performance.now();
    const indexes = Array.from({ length: size - seeded }, (_, k) => seeded + k);
    await forEachLimited(indexes, SEED_PARALLEL, async (i) => {
      const end = endOf(i);
      const s = await drive(ledger, i, end);
      if (end === 'broadcast' && samples.broadcast.length < 5_000) samples.broadcast.push(s);
      if (end === 'unresolved') samples.unresolved.push(s);
    });
    seeded = size;
    const seconds = (performance.now() - started) / 1000;
    log(`seeded ${size} transfers (${indexes.length} in ${seconds.toFixed(1)} s, ${(indexes.length / seconds).toFixed(0)}/s)`);
    for (const route of ROUTES) {
      const row = await measure(base, app, timings, route, samples, size);
      rows.push(row);
      log(`N=${size} ${route.name}: p50 ${row.p50.toFixed(2)} ms, p99 ${row.p99.toFixed(2)} ms (load ${row.load})`);
    }
  }

  const info = machine();
  const lines = MARKDOWN
    ? [
        '| transfers | route | p50 (ms) | p99 (ms) | max (ms) | round trip p99 (ms) | load average (1/5/15 min) |',
        '|---:|---|---:|---:|---:|---:|---|',
        ...rows.map(
          (r) =>
            `| ${r.size.toLocaleString('en')} | \`${r.route}\` | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.max.toFixed(2)} | ${r.roundTripP99.toFixed(2)} | ${r.load} |`,
        ),
      ]
    : rows.map(
        (r) =>
          `${String(r.size).padStart(7)}  ${r.route.padEnd(58)} p50 ${r.p50.toFixed(2).padStart(7)}  p99 ${r.p99.toFixed(2).padStart(7)}  max ${r.max.toFixed(2).padStart(7)}  trip p99 ${r.roundTripP99.toFixed(2).padStart(7)}  load ${r.load}`,
      );
  process.stdout.write(`${lines.join('\n')}\n\nmachine: ${JSON.stringify(info)}\n`);
  const largest = Math.max(...SIZES);
  const missed = rows.filter((r) => r.size === largest && r.p99 > GOAL_MS);
  if (missed.length > 0) {
    process.stdout.write(`goal missed (p99 ≤ ${GOAL_MS} ms at ${largest}): ${missed.map((r) => r.route).join(', ')}\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write(`goal met: every route's p99 ≤ ${GOAL_MS} ms at ${largest} transfers\n`);
  }
} finally {
  await server?.close();
  await app?.close();
  seeder.disconnect();
  await sim.process.stop(2_000);
  await redis.stop();
}
