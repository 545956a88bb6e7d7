/**
 * `npm run bench:webhooks`: how fast one worker process delivers webhooks (src/webhooks/), and what
 * each delivered event costs Redis. One real worker (`node src/worker.ts`, the simulator behind it,
 * idle) with one endpoint: a receiver in this process on 127.0.0.1 that answers 204 at once (checking
 * signatures is the receiver's job and not measured). Once the worker's consumer group exists, the
 * events stream gets N events at once (pipelined XADDs, as transition.lua writes them: several versions
 * of each of many transfers); the window runs from the first XADD to the moment the receiver holds every
 * event's webhook-id. INFO commandstats over the window, the fill's own XADDs taken out, gives the
 * commands per delivered event (the idle worker's BullMQ polling included: a few per second). The
 * worker's CPU over the window (Linux /proc, bench/cpu.ts) gives events per CPU-second of the worker,
 * the figure that does not depend on what else the machine runs; "other processes" says how busy it was.
 *
 *   WEBHOOK_BENCH_EVENTS (20000)       events in the stream
 *   WEBHOOK_BENCH_PER_TRANSFER (4)     events (versions) per transfer: N / this transfers
 *   WEBHOOK_BENCH_CPU_PROF=<dir>       write the worker's V8 CPU profile there (node --cpu-prof)
 *   WEBHOOK_BENCH_TIMEOUT_S (300)      give up after this long
 *
 * Checked on the way, never timed: every event arrives, each transfer's versions in order.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { endpointGroup } from '../src/webhooks/store.ts';
import { startOurWorker, startSimulatorProcess, type NodeChild } from './processes.ts';
import { cpuWindow } from './cpu.ts';
import { commandWindow, describeCommands } from './redis-stats.ts';

const env = process.env;
const EVENTS = Number(env.WEBHOOK_BENCH_EVENTS ?? 20_000);
const PER_TRANSFER = Number(env.WEBHOOK_BENCH_PER_TRANSFER ?? 4);
const TIMEOUT_MS = Number(env.WEBHOOK_BENCH_TIMEOUT_S ?? 300) * 1000;
const ENDPOINT = 'bench';
const FILL_BATCH = 1_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The receiver: first arrival of each webhook-id, and whether each transfer's versions came in order. */
function startReceiver() {
  const seen = new Set<string>();
  const lastVersion = new Map<string, number>();
  const stats = { requests: 0, outOfOrder: 0, firstAt: 0, allAt: 0, queuedAt: 0 };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      stats.requests++;
      const id = String(req.headers['webhook-id']);
      const { data } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { sequenceId: string; version: number } };
      // The bench's events only (the worker publishes its own, e.g. the ledger's epoch at start-up).
      if (!seen.has(id) && data.sequenceId.startsWith('bench-')) {
        seen.add(id);
        if ((lastVersion.get(data.sequenceId) ?? 0) >= data.version) stats.outOfOrder++;
        lastVersion.set(data.sequenceId, data.version);
        stats.firstAt ||= Date.now();
        if (seen.size === EVENTS) stats.allAt = Date.now();
      }
      res.writeHead(204).end();
    });
  });
  return { server, seen, stats };
}

async function main(): Promise<void> {
  const privateRedis = await acquireRedis({ noContainers: true, server: { appendonly: false } });
  const redis = new Redis(privateRedis.url, { maxRetriesPerRequest: null });
  const prefix = `bench-${randomBytes(4).toString('hex')}`;
  const stream = `${prefix}:transfer-events`;
  const receiver = startReceiver();
  await new Promise<void>((resolve) => receiver.server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}/hook`;
  const children: NodeChild[] = [];
  try {
    const sim = await startSimulatorProcess({});
    children.push(sim.process);
    const worker = await startOurWorker({
      name: 'ours-webhooks',
      redisUrl: privateRedis.url,
      prefix,
      sim,
      cpuProfDir: env.WEBHOOK_BENCH_CPU_PROF || undefined,
      env: {
        EVENTS_STREAM: stream,
        WEBHOOK_ENDPOINTS: JSON.stringify([{ name: ENDPOINT, url, secrets: [`whsec_${randomBytes(24).toString('base64')}`] }]),
        WEBHOOK_ALLOW_HTTP: '1',
        WEBHOOK_ALLOW_PRIVATE: '1',
      },
    });
    children.push(worker);
    // The endpoint's group starts at the stream's end: fill once it exists.
    for (;;) {
      const groups = (await redis.xinfo('GROUPS', stream).catch(() => [])) as Array<string[]>;
      if (groups.some((group) => group.includes(endpointGroup(ENDPOINT)))) break;
      await sleep(50);
    }

    const transfers = Math.ceil(EVENTS / PER_TRANSFER);
    const window = await commandWindow(redis);
    const cpu = cpuWindow();
    const started = Date.now();
    for (let first = 0; first < EVENTS; first += FILL_BATCH) {
      const pipeline = redis.pipeline();
      for (let n = first; n < Math.min(EVENTS, first + FILL_BATCH); n++) {
        // Round by round: version v of every transfer, then v + 1, as transfers progress side by side.
        const version = Math.floor(n / transfers) + 1;
        const sequenceId = `bench-${n % transfers}`;
        pipeline.xadd(
          stream,
          '*',
          ...['event', 'transfer.cancelled', 'sequenceId', sequenceId, 'walletId', '310', 'coin', 'eth'],
          ...['version', String(version), 'at', new Date().toISOString()],
          ...['data', JSON.stringify({ reason: `step ${version}`, by: 'bench' }), 'metadata', JSON.stringify({ orderId: `A-${n}` })],
        );
      }
      await pipeline.exec();
    }
    const filled = Date.now();
    const lastId = (await redis.xrevrange(stream, '+', '-', 'COUNT', 1))[0]![0];
    let next = Date.now();
    while (receiver.stats.allAt === 0) {
      // When the endpoint's consumer had read and queued the whole stream (its reading, apart from delivering).
      if (receiver.stats.queuedAt === 0 && Date.now() >= next) {
        next = Date.now() + 100;
        const group = ((await redis.xinfo('GROUPS', stream)) as Array<Array<string | number>>)
          .map((fields) => Object.fromEntries(fields.flatMap((v, i, a) => (i % 2 === 0 ? [[v, a[i + 1]]] : []))) as Record<string, unknown>)
          .find((g) => g.name === endpointGroup(ENDPOINT));
        if (group?.['last-delivered-id'] === lastId && group.pending === 0) receiver.stats.queuedAt = Date.now();
      }
      if (Date.now() - started > TIMEOUT_MS) throw new Error(`${receiver.seen.size} of ${EVENTS} events delivered after ${TIMEOUT_MS} ms`);
      if (!worker.running) throw new Error(`the worker exited:\n${worker.tail()}`);
      await sleep(20);
    }
    const seconds = (receiver.stats.allAt - started) / 1000;
    const share = cpu.end();
    const counts = await window.end(1);
    // The fill's XADDs are the bench's own.
    counts.xadd = (counts.xadd ?? 0) - EVENTS;
    if (counts.xadd <= 0) delete counts.xadd;
    const perEvent = Object.fromEntries(Object.entries(counts).map(([command, calls]) => [command, calls / EVENTS]));
    const { stats } = receiver;
    console.log(
      [
        `webhooks: ${EVENTS} events of ${transfers} transfers (${PER_TRANSFER} versions each), one worker process, one endpoint on 127.0.0.1`,
        `  delivered all in ${seconds.toFixed(2)} s: ${(EVENTS / seconds).toFixed(0)} events/s (fill took ${((filled - started) / 1000).toFixed(2)} s; first delivery after ${((stats.firstAt - started) / 1000).toFixed(2)} s)`,
        share === undefined
          ? '  CPU: not measured (no /proc)'
          : `  CPU: the worker ${(share.processes.ours ?? 0).toFixed(2)} cores (${(EVENTS / ((share.processes.ours ?? 0) * share.seconds)).toFixed(0)} events per CPU-second of it), this process ${(share.processes['load generator'] ?? 0).toFixed(2)}, Redis and the simulator ${((share.processes['redis-server'] ?? 0) + (share.processes.simulator ?? 0)).toFixed(2)}, other processes on the machine ${share.otherCores.toFixed(2)} cores`,
        `  read and queued by the consumer after ${stats.queuedAt ? ((stats.queuedAt - started) / 1000).toFixed(2) : '-'} s`,
        `  requests ${stats.requests} (${stats.requests - EVENTS} besides one per event), versions out of order: ${stats.outOfOrder}`,
        `  Redis commands per delivered event: ${describeCommands(perEvent, 12)}`,
      ].join('\n'),
    );
    if (stats.outOfOrder > 0) process.exitCode = 1;
  } finally {
    for (const child of children.reverse()) await child.stop(15_000).catch(() => {});
    receiver.server.closeAllConnections();
    receiver.server.close();
    redis.disconnect();
    await privateRedis.stop();
  }
}

await main();
