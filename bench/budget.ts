/**
 * `npm run bench:budget`: the provider's request budget (docs/contract.md section 7). The simulator
 * enforces a limit of R requests/s (429 + Retry-After past it) and the worker is told the same
 * (CUSTODY_MAX_RPS=R). Per size:
 *   1. N transfers are enqueued at once: they are sent, then poll for txids that do not come yet;
 *   2. once polling has saturated the budget, K new transfers are enqueued at once;
 *   3. every txid appears at once (POST /_sim/txids).
 * Reported, each beside its floor: the first N submitted (floor N/R), the K new sends' latency p50/p99
 * (floor K/R), the last transfer.broadcast after the txids appeared (floor 2(N+K)/R: one poll and one
 * wallet-transaction lookup each), upstream calls per transfer in phase 3, the provider's 429s, and
 * the share of the budget used while polls alone spend it.
 *
 * Between 2 and 3, the wake-up figure: M = K more transfers are sent and polled with the rest, then their
 * txids appear one at a time, WAKE_SPACING_MS apart (few enough for the budget's spare slots); per
 * transfer, the time from the simulator showing its txid (Redis clock, just before the control call) to
 * its `transfer.broadcast` (the stream id, Redis clock), p50 and p99, beside one budget interval 1/R.
 * These M are not among phase 3's N+K, whose figures stay as they were.
 *
 * BUDGET_WEBHOOKS=1 (with BUDGET_PROVIDER=bitgo): the worker gets BITGO_WEBHOOK_SECRET (its
 * `POST /providers/bitgo/webhook` wake-up), the simulator the same secret and a `transfer` webhook on
 * the bench wallet pointing at the worker's loopback URL; writes budget-bitgo-webhooks.json / .svg.
 * Run it and the plain BUDGET_PROVIDER=bitgo run back to back to compare (goal with webhooks: the
 * wake-up's p99 ≤ 1 s + 1/R).
 *
 * Sizes: BUDGET_SIZES="600x40x30,5000x100x100" (N x R x K). Writes bench/results/budget.json and
 * budget.svg. One worker process, a private redis-server, the simulator as a child process.
 *
 * BUDGET_PROVIDER=bitgo measures the BitGo adapter instead (CUSTODY_PROVIDER=bitgo against the BitGo
 * simulator with its own limit of R requests/s, no approval wait; its `POST /_sim/txids` releases
 * every txid) and writes budget-bitgo.json / budget-bitgo.svg.
 *
 * BUDGET_LOOKUP_FIRST=1 runs the worker with LOOKUP_BEFORE_FIRST_SEND=1 (every transfer looked up before
 * its first send) and writes budget-lookup-first.json / .svg (budget-bitgo-lookup-first.*): the cost is in
 * `send-class calls per submission` (sends, lookups and tokens, all in the send budget class, over the
 * N of phase 1) and in the first N's time beside its floor.
 */
import { byEndpoint, simStats, total } from './sim-stats.ts';
import { writeFileSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { forEachLimited, oursTarget, readStream, sleep, entryMs } from './load.ts';
import { startOurWorker, startProviderSimulator } from './processes.ts';
import { BENCH_WALLET, benchPayload, readBenchProvider, type BenchProvider } from './provider.ts';
import { BUDGET_GOALS } from './goals.ts';
import { machine } from './report.ts';
import { getFreePort } from '../tools/redis/redis-server.ts';

export interface Size {
  n: number;
  rps: number;
  k: number;
}

export interface SizeResult extends Size {
  firstNSubmittedS: number;
  firstNFloorS: number;
  sendLatencyP50S: number;
  sendLatencyP99S: number;
  sendFloorS: number;
  lastBroadcastS: number;
  lastBroadcastFloorS: number;
  callsPerTransferPhase3: number;
  callsByEndpointPhase3: Record<string, number>;
  provider429s: number;
  /** Upstream requests per second while polls alone spent the budget, over R. */
  budgetUsedWhilePolling: number;
  /** Requests of the send budget class (sends, lookups before a send, tokens) per transfer of phase 1. */
  sendClassCallsPerSubmission: number;
  /** Phase 3 (every txid at once): each transfer's txid → transfer.broadcast, p50 and p99. */
  phase3BroadcastP50S: number;
  phase3BroadcastP99S: number;
  /** Whether the worker had the provider's webhook as a wake-up (BUDGET_WEBHOOKS=1). */
  webhooks: boolean;
  /** One budget interval, 1/R. */
  budgetIntervalS: number;
  /** The wake-up figure: transfers whose txids appeared one at a time, WAKE_SPACING_MS apart. */
  wakeTransfers: number;
  /** Their txid shown → transfer.broadcast, p50 and p99 (goal with webhooks: p99 ≤ 1 s + 1/R). */
  wakeBroadcastP50S: number;
  wakeBroadcastP99S: number;
}

/** BUDGET_LOOKUP_FIRST=1: the worker runs with LOOKUP_BEFORE_FIRST_SEND=1. */
const LOOKUP_FIRST = process.env.BUDGET_LOOKUP_FIRST === '1';
/** BUDGET_WEBHOOKS=1: the BitGo webhook wakes tracking (BUDGET_PROVIDER=bitgo only). */
const WEBHOOKS = process.env.BUDGET_WEBHOOKS === '1';
/** Between two txids of the wake-up figure: their 2 calls each fit in the slots sends leave. */
const WAKE_SPACING_MS = 500;
/** The webhook's shared secret, worker and simulator (loopback only, a bench value). */
const BENCH_WEBHOOK_SECRET = 'bench-budget-webhook-secret-0123456789';

/** A counter's value in Prometheus text (0 when absent). */
function counter(metrics: string, series: string): number {
  const line = metrics.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const RESULTS = fileURLToPath(new URL('./results/', import.meta.url));
const log = (message: string) => process.stderr.write(`[bench:budget ${new Date().toISOString().slice(11, 19)}] ${message}\n`);

function sizes(): Size[] {
  const text = process.env.BUDGET_SIZES ?? '600x40x30,5000x100x100';
  return text.split(',').map((part) => {
    const [n, rps, k] = part.split('x').map(Number);
    if (!n || !rps || !k) throw new Error(`BUDGET_SIZES: "${part}" is not N x R x K`);
    return { n, rps, k };
  });
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

async function waitFor(what: string, timeoutMs: number, done: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function runSize(redisUrl: string, size: Size, provider: BenchProvider): Promise<SizeResult> {
  const { n, rps, k } = size;
  const prefix = `budget-${n}-${rps}-${Date.now()}`;
  // No txid until phase 3; BitGo's simulator needs no approval by default (approvalAfterMs 0).
  const sim = await startProviderSimulator(provider, {
    SIM_TXID_AFTER: '24h',
    ...(WEBHOOKS ? { SIM_BITGO_WEBHOOK_SECRET: BENCH_WEBHOOK_SECRET } : {}),
  });
  // The provider's own request limit: 429 past R (both simulators take `maxRps` in their settings).
  const limited = await fetch(`${sim.url}/_sim/settings`, {
    method: 'PATCH',
    body: JSON.stringify({ maxRps: rps }),
    headers: { 'content-type': 'application/json' },
  });
  await limited.arrayBuffer();
  if (limited.status !== 200) {
    await sim.process.stop(5_000);
    throw new Error(`simulator settings: HTTP ${limited.status}`);
  }
  const httpPort = await getFreePort();
  const worker = await startOurWorker({
    httpPort,
    name: 'budget-worker',
    redisUrl,
    prefix,
    sim,
    env: {
      CUSTODY_MAX_RPS: String(rps),
      TRACK_POLL_MIN: '500ms',
      TRACK_POLL_MAX: '5s',
      SUBMIT_CONCURRENCY: '32',
      TRACK_CONCURRENCY: '256',
      ...(LOOKUP_FIRST ? { LOOKUP_BEFORE_FIRST_SEND: '1' } : {}),
      ...(WEBHOOKS ? { BITGO_WEBHOOK_SECRET: BENCH_WEBHOOK_SECRET } : {}),
    },
  });
  if (WEBHOOKS && sim.provider === 'bitgo') {
    const { walletId, coin } = BENCH_WALLET.bitgo;
    const registered = await fetch(`${sim.url}/api/v2/${coin}/wallet/${walletId}/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${sim.accessToken}` },
      body: JSON.stringify({ type: 'transfer', url: `http://127.0.0.1:${httpPort}/providers/bitgo/webhook` }),
    });
    await registered.arrayBuffer();
    if (registered.status !== 200) {
      await worker.stop(5_000);
      await sim.process.stop(5_000);
      throw new Error(`webhook registration: HTTP ${registered.status}`);
    }
  }
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const target = oursTarget(redis, prefix);
  const submittedAt = new Map<string, number>();
  const broadcastAt = new Map<string, number>();
  const reader = readStream(redis, target.stream, '0-0', (event, sequenceId, id) => {
    if (event === 'transfer.submitted') submittedAt.set(sequenceId, entryMs(id));
    if (event === 'transfer.broadcast') broadcastAt.set(sequenceId, entryMs(id));
  });
  try {
    const nowMs = async () => {
      const [s, us] = await redis.time();
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };

    // 1. N at once.
    const first = Array.from({ length: n }, () => benchPayload(provider));
    const t0 = await nowMs();
    await forEachLimited(first, 64, (p) => target.enqueue(p));
    log(`${n} enqueued; waiting for their submission (floor ${(n / rps).toFixed(1)} s)`);
    await waitFor(`${n} submitted`, (n / rps) * 10_000 + 60_000, () => first.every((p) => submittedAt.has(p.halfSigned.sequenceId)));
    const firstN = Math.max(...first.map((p) => submittedAt.get(p.halfSigned.sequenceId)!)) - t0;
    const afterFirst = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    const sendClassCalls = counter(afterFirst, 'custody_budget_used_total{class="send"}');

    // Polls alone: measure what they use of the budget over 10 s, after 5 s to settle.
    await sleep(5_000);
    const pollStart = await simStats(sim);
    const pollT = Date.now();
    await sleep(10_000);
    const pollEnd = await simStats(sim);
    const pollRate = (total(pollEnd, (e) => e !== 'token') - total(pollStart, (e) => e !== 'token')) / ((Date.now() - pollT) / 1000);

    // 2. K new sends at once, while polling is saturated.
    const fresh = Array.from({ length: k }, () => benchPayload(provider));
    const tk = await nowMs();
    await Promise.all(fresh.map((p) => target.enqueue(p)));
    await waitFor(`${k} new submitted`, 120_000, () => fresh.every((p) => submittedAt.has(p.halfSigned.sequenceId)));
    const latencies = fresh.map((p) => (submittedAt.get(p.halfSigned.sequenceId)! - tk) / 1000);

    // Wake-up figure: K more, polled with the rest; then their txids one at a time.
    const woken = Array.from({ length: k }, () => benchPayload(provider));
    await Promise.all(woken.map((p) => target.enqueue(p)));
    await waitFor(`${k} more submitted`, 120_000, () => woken.every((p) => submittedAt.has(p.halfSigned.sequenceId)));
    await sleep(2_000);
    const shownAt = new Map<string, number>();
    for (const p of woken) {
      const sequenceId = p.halfSigned.sequenceId;
      shownAt.set(sequenceId, await nowMs());
      const shown = await fetch(`${sim.url}/_sim/transfers/${encodeURIComponent(sequenceId)}/txid`, { method: 'POST' });
      await shown.arrayBuffer();
      if (shown.status !== 200) throw new Error(`txid of ${sequenceId}: HTTP ${shown.status}`);
      await sleep(WAKE_SPACING_MS);
    }
    await waitFor(`${k} woken broadcast`, 120_000, () => woken.every((p) => broadcastAt.has(p.halfSigned.sequenceId)));
    const wakeTimes = woken.map((p) => (broadcastAt.get(p.halfSigned.sequenceId)! - shownAt.get(p.halfSigned.sequenceId)!) / 1000);
    log(
      `txid → broadcast one at a time${WEBHOOKS ? ' (webhooks)' : ''}: p50 ${quantile(wakeTimes, 0.5)} s, p99 ${quantile(wakeTimes, 0.99)} s`,
    );

    // 3. Every txid at once.
    const all = [...first, ...fresh];
    const before = await simStats(sim);
    const tx = await nowMs();
    const released = await fetch(`${sim.url}/_sim/txids`, { method: 'POST' });
    const { released: count } = (await released.json()) as { released: number };
    if (released.status !== 200 || count < all.length)
      throw new Error(`txids: HTTP ${released.status}, ${count} of ${all.length} released`);
    log(`txids released; waiting for ${all.length} broadcasts (floor ${((2 * all.length) / rps).toFixed(1)} s)`);
    await waitFor(`${all.length} broadcast`, ((2 * all.length) / rps) * 10_000 + 60_000, () =>
      all.every((p) => broadcastAt.has(p.halfSigned.sequenceId)),
    );
    const broadcastTimes = all.map((p) => (broadcastAt.get(p.halfSigned.sequenceId)! - tx) / 1000);
    const lastBroadcast = Math.max(...broadcastTimes) * 1000;
    log(
      `broadcast after the txids: p10 ${quantile(broadcastTimes, 0.1)} s, p50 ${quantile(broadcastTimes, 0.5)} s, p90 ${quantile(broadcastTimes, 0.9)} s`,
    );
    const metrics = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    log(
      metrics
        .split('\n')
        .filter((line) =>
          /^custody_budget_(used|refused)_total|^custody_worker_jobs_total\{queue="track-transfer"|^custody_track_poll_stretch_seconds_(sum|count)|^custody_provider_webhooks_total/.test(
            line,
          ),
        )
        .join('\n'),
    );
    const after = await simStats(sim);
    const phase3 = byEndpoint(before, after);
    const calls = Object.entries(phase3)
      .filter(([e]) => e !== 'token')
      .reduce((sum, [, c]) => sum + c, 0);

    return {
      ...size,
      firstNSubmittedS: firstN / 1000,
      firstNFloorS: n / rps,
      sendLatencyP50S: quantile(latencies, 0.5),
      sendLatencyP99S: quantile(latencies, 0.99),
      sendFloorS: k / rps,
      lastBroadcastS: lastBroadcast / 1000,
      lastBroadcastFloorS: (2 * all.length) / rps,
      callsPerTransferPhase3: calls / all.length,
      callsByEndpointPhase3: phase3,
      provider429s: total(after, (_, outcome) => outcome === '429'),
      budgetUsedWhilePolling: pollRate / rps,
      sendClassCallsPerSubmission: sendClassCalls / n,
      phase3BroadcastP50S: quantile(broadcastTimes, 0.5),
      phase3BroadcastP99S: quantile(broadcastTimes, 0.99),
      webhooks: WEBHOOKS,
      budgetIntervalS: 1 / rps,
      wakeTransfers: woken.length,
      wakeBroadcastP50S: quantile(wakeTimes, 0.5),
      wakeBroadcastP99S: quantile(wakeTimes, 0.99),
    };
  } finally {
    await reader.stop();
    await target.close();
    redis.disconnect();
    await worker.stop(10_000);
    await sim.process.stop(5_000);
  }
}

function ratio(value: number, floor: number): string {
  return `${value.toFixed(2)} s (floor ${floor.toFixed(2)} s, ×${(value / floor).toFixed(2)})`;
}

function format(result: SizeResult): string {
  return [
    `N=${result.n} R=${result.rps}/s K=${result.k}`,
    `  first N submitted:  ${ratio(result.firstNSubmittedS, result.firstNFloorS)}   goal ≤ ×${BUDGET_GOALS.firstNSubmitted}`,
    `  new sends p50:      ${ratio(result.sendLatencyP50S, result.sendFloorS)}`,
    `  new sends p99:      ${ratio(result.sendLatencyP99S, result.sendFloorS)}   goal ≤ ×${BUDGET_GOALS.sendP99}`,
    `  last broadcast:     ${ratio(result.lastBroadcastS, result.lastBroadcastFloorS)}   goal ≤ ×${BUDGET_GOALS.lastBroadcast}`,
    `  calls per transfer from txid to broadcast: ${result.callsPerTransferPhase3.toFixed(2)}   goal ≤ ${BUDGET_GOALS.callsPerTransfer}   ${JSON.stringify(result.callsByEndpointPhase3)}`,
    `  provider 429s:      ${result.provider429s}   goal ${BUDGET_GOALS.provider429s}`,
    `  budget used by polls alone: ${(result.budgetUsedWhilePolling * 100).toFixed(1)} %   goal ≥ ${BUDGET_GOALS.budgetUsedWhilePolling * 100} %`,
    `  send-class calls per submission: ${result.sendClassCallsPerSubmission.toFixed(2)}${LOOKUP_FIRST ? ' (LOOKUP_BEFORE_FIRST_SEND=1)' : ''}`,
    `  txid → broadcast, all at once: p50 ${result.phase3BroadcastP50S.toFixed(2)} s, p99 ${result.phase3BroadcastP99S.toFixed(2)} s`,
    `  txid → broadcast, ${result.wakeTransfers} one at a time${result.webhooks ? ' (webhooks)' : ''}: p50 ${result.wakeBroadcastP50S.toFixed(2)} s, p99 ${result.wakeBroadcastP99S.toFixed(2)} s   one budget interval ${result.budgetIntervalS.toFixed(3)} s${result.webhooks ? `, goal p99 ≤ ${(BUDGET_GOALS.wakeupP99OverIntervalS + result.budgetIntervalS).toFixed(3)} s` : ''}`,
  ].join('\n');
}

/** Measured over floor for each figure and size, as bars (1 = the floor). */
function chart(results: SizeResult[]): string {
  const figures: Array<[string, (r: SizeResult) => number, number]> = [
    ['first N submitted', (r) => r.firstNSubmittedS / r.firstNFloorS, BUDGET_GOALS.firstNSubmitted],
    ['new sends p99', (r) => r.sendLatencyP99S / r.sendFloorS, BUDGET_GOALS.sendP99],
    ['last broadcast', (r) => r.lastBroadcastS / r.lastBroadcastFloorS, BUDGET_GOALS.lastBroadcast],
    ['calls/transfer ÷ 2', (r) => r.callsPerTransferPhase3 / 2, BUDGET_GOALS.callsPerTransfer / 2],
  ];
  const width = 720;
  const rowH = 26;
  const left = 170;
  const scale = (x: number) => left + Math.min(x, 3) * ((width - left - 20) / 3);
  const colors = ['#4e79a7', '#f28e2b', '#59a14f'];
  const rows: string[] = [];
  let y = 40;
  for (const [label, value, goal] of figures) {
    rows.push(`<text x="10" y="${y + 12}" font-size="12">${label}</text>`);
    results.forEach((r, i) => {
      const v = value(r);
      rows.push(`<rect x="${left}" y="${y + i * 10}" width="${scale(v) - left}" height="9" fill="${colors[i % colors.length]}"/>`);
      rows.push(`<text x="${scale(v) + 4}" y="${y + i * 10 + 8}" font-size="9">×${v.toFixed(2)}</text>`);
    });
    rows.push(
      `<line x1="${scale(goal)}" x2="${scale(goal)}" y1="${y - 2}" y2="${y + results.length * 10 + 2}" stroke="#e15759" stroke-dasharray="3,2"/>`,
    );
    y += rowH + results.length * 10;
  }
  const legend = results
    .map(
      (r, i) =>
        `<text x="${left + i * 180}" y="20" font-size="11" fill="${colors[i % colors.length]}">N=${r.n} R=${r.rps}/s K=${r.k}</text>`,
    )
    .join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y + 20}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>${legend}
<line x1="${scale(1)}" x2="${scale(1)}" y1="28" y2="${y}" stroke="#333"/>
<text x="${scale(1) - 10}" y="${y + 14}" font-size="10">floor</text>
${rows.join('\n')}
<text x="${left}" y="${y + 14}" font-size="10">measured ÷ floor (dashed: goal)</text>
</svg>
`;
}

// No AOF, as the recorded budgets were measured (the worker runs with REDIS_ALLOW_VOLATILE=1).
const provider = readBenchProvider('BUDGET_PROVIDER');
if (WEBHOOKS && provider !== 'bitgo') throw new Error('BUDGET_WEBHOOKS=1 needs BUDGET_PROVIDER=bitgo (the provider with a webhook)');
const resultName = `${provider === 'wallet-service' ? 'budget' : `budget-${provider}`}${LOOKUP_FIRST ? '-lookup-first' : ''}${WEBHOOKS ? '-webhooks' : ''}`;
const redis = await acquireRedis({ noContainers: true, server: { appendonly: false } });
try {
  const results: SizeResult[] = [];
  for (const size of sizes()) {
    log(`${provider}: size N=${size.n} R=${size.rps}/s K=${size.k}`);
    const result = await runSize(redis.url, size, provider);
    results.push(result);
    process.stdout.write(`${format(result)}\n`);
  }
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    `${RESULTS}${resultName}.json`,
    // provider: the custody provider measured (BUDGET_PROVIDER), its adapter and simulator.
    `${JSON.stringify({ finishedAt: new Date().toISOString(), provider, machine: machine(), results }, null, 2)}\n`,
  );
  writeFileSync(`${RESULTS}${resultName}.svg`, chart(results));
  log(`wrote bench/results/${resultName}.json and ${resultName}.svg`);
} finally {
  await redis.stop();
}
