/**
 * `npm run bench:profile`: what one submission costs Redis, command by command, and who issues each.
 * The same setup as `npm run bench`'s submission rounds (a private redis-server, the simulator, our
 * worker with the bench's settings, a paused backlog then resumed), measured by MONITOR instead of
 * timing: every command the worker's connections issue, the commands run inside Lua scripts included
 * (each counted once, as INFO commandstats and the benchmark count them), each script call named by
 * its SHA1 (BullMQ's and ours). The load generator's probes (XLEN, INFO, ...) are left out, as the
 * benchmark leaves them out. INFO commandstats over the same window is printed beside it as a check.
 *
 *   PROFILE_SUBMISSIONS (300)  backlog measured   PROFILE_WARMUP (200)  jobs run before it
 *   PROFILE_MARKDOWN=1         print the table as Markdown (bench/README.md)
 *   BENCH_WORKER_SCRIPT        another worker entry (a changed copy)
 */
import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { Redis } from 'ioredis';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { Ledger } from '../src/ledger/ledger.ts';
import { createKeys } from '../src/ledger/keys.ts';
import { RequestBudget } from '../src/custody/budget.ts';
import { oursTarget, payloads, SUBMIT_QUEUE, TRACK_QUEUE, waitForStreamLength } from './load.ts';
import { startOurWorker, startSimulatorProcess, type NodeChild } from './processes.ts';
import { commandWindow, describeCommands } from './redis-stats.ts';
import { warmUp } from './submissions.ts';

const env = process.env;
const SUBMISSIONS = Number(env.PROFILE_SUBMISSIONS ?? 300);
const WARMUP = Number(env.PROFILE_WARMUP ?? 200);
const MARKDOWN = env.PROFILE_MARKDOWN === '1';
/** The load generator's probes: not the worker's cost (redis-stats.ts leaves the same out). */
const PROBES = new Set(['xlen', 'info', 'xrevrange', 'xrange', 'xread', 'ping', 'client', 'select', 'monitor']);

/** Script SHA1 → a readable name, from the clients that define them (ioredis keeps each Script's sha). */
function scriptNames(url: string, prefix: string): Map<string, string> {
  const names = new Map<string, string>();
  const client = new Redis(url, { maxRetriesPerRequest: null, lazyConnect: true });
  new Ledger(client, createKeys(prefix, `${prefix}:transfer-events`), { eventsMaxLen: 1, retentionMs: 1 });
  new RequestBudget(client, `${prefix}:custody-rate`, 0);
  const own = (client as unknown as { scriptsSet: Record<string, { sha: string }> }).scriptsSet;
  for (const [name, script] of Object.entries(own)) names.set(script.sha, `ours: ${name}`);
  client.disconnect();
  // BullMQ's scripts, as its connections define them (name, keys, content; the CommonJS build loads as is).
  const bullScripts = createRequire(import.meta.url)('bullmq/dist/cjs/scripts/index.js') as Record<
    string,
    { name: string; content: string }
  >;
  for (const script of Object.values(bullScripts))
    names.set(createHash('sha1').update(script.content).digest('hex'), `BullMQ: ${script.name}`);
  return names;
}

/** A script call's name; a ledger transition's with the states it moves between (its request, the last argument). */
function scriptIssuer(names: Map<string, string>, args: string[]): string {
  const name = names.get(String(args[1])) ?? `script ${String(args[1]).slice(0, 8)}`;
  if (name !== 'ours: transferTransition') return name;
  // MONITOR shows the JSON request with its quotes escaped: the two fields are picked out as text.
  const request = String(args.at(-1));
  const from = /"from\\?":\[([^\]]*)\]/.exec(request)?.[1]?.replace(/[\\"]/g, '') ?? '?';
  const to = /"to\\?":\\?"([a-z]+)/.exec(request)?.[1] ?? '?';
  return `ours: transition ${from.replace(/,/g, '|')} → ${to}`;
}

/** Who issued a command outside any script, by its first key. */
function directIssuer(args: string[], prefix: string): string {
  const key = args[1] ?? '';
  if (key.startsWith(`${prefix}:${SUBMIT_QUEUE}:`)) return 'BullMQ: submit queue (direct)';
  if (key.startsWith(`${prefix}:${TRACK_QUEUE}:`)) return 'BullMQ: track queue (direct)';
  if (key.includes('tracker-outbox')) return 'ours: Trackers.ensure (trackerAdded)';
  if (key.includes('custody-rate')) return 'ours: budget (direct)';
  if (key.includes('travel-rule')) return 'ours: travel-rule cache';
  return `ours: direct (${key.replace(prefix, '<prefix>').slice(0, 40)})`;
}

async function main(): Promise<void> {
  const privateRedis = await acquireRedis({ noContainers: true, server: { appendonly: false } });
  const redis = new Redis(privateRedis.url, { maxRetriesPerRequest: null });
  const prefix = `bench-${randomBytes(4).toString('hex')}-ours`;
  const children: NodeChild[] = [];
  try {
    const sim = await startSimulatorProcess({ SIM_TXID_AFTER: '24h' });
    children.push(sim.process);
    const ours = oursTarget(redis, prefix);
    children.push(
      await startOurWorker({
        name: 'ours-submit',
        redisUrl: privateRedis.url,
        prefix,
        sim,
        script: env.BENCH_WORKER_SCRIPT?.trim() || undefined,
        env: { SUBMIT_CONCURRENCY: '64', CUSTODY_CONNECTIONS: '64', TRACK_POLL_MIN: '10m', TRACK_POLL_MAX: '10m' },
      }),
    );
    const names = scriptNames(privateRedis.url, prefix);
    await warmUp(redis, ours, payloads(WARMUP));

    await ours.queue.pause();
    const backlog = payloads(SUBMISSIONS);
    for (const payload of backlog) await ours.enqueue(payload);
    const before = await redis.xlen(ours.stream);
    await new Promise((resolve) => setTimeout(resolve, 500));

    const monitor = await redis.monitor();
    const counts = new Map<string, number>();
    let current = '';
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const command = String(args[0]).toLowerCase();
      if (source === 'lua') {
        const row = `${current}\t${command}`;
        counts.set(row, (counts.get(row) ?? 0) + 1);
        return;
      }
      if (PROBES.has(command)) {
        current = 'probe';
        return;
      }
      current = command === 'evalsha' ? scriptIssuer(names, args) : directIssuer(args, prefix);
      if (current.endsWith(': pause')) return; // the load generator's resume
      const row = `${current}\t${command}`;
      counts.set(row, (counts.get(row) ?? 0) + 1);
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const stats = await commandWindow(redis);
    await ours.queue.resume();
    await waitForStreamLength(redis, ours.stream, before + SUBMISSIONS, 120_000, 'profile backlog');
    // Let the last jobs' completion (after their event) reach Redis.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const commandstats = await stats.end(SUBMISSIONS);
    await monitor.disconnect();

    const rows = [...counts]
      .filter(([row]) => !row.startsWith('probe\t'))
      .map(([row, n]) => {
        const [issuer, command] = row.split('\t') as [string, string];
        return { issuer, command, perSubmission: n / SUBMISSIONS };
      })
      .filter((row) => row.perSubmission >= 0.005)
      .sort((a, b) => a.issuer.localeCompare(b.issuer) || b.perSubmission - a.perSubmission);
    const total = rows.reduce((sum, row) => sum + row.perSubmission, 0);
    const byIssuer = new Map<string, number>();
    for (const row of rows) byIssuer.set(row.issuer, (byIssuer.get(row.issuer) ?? 0) + row.perSubmission);
    const fmt = (n: number) => n.toFixed(2).replace(/\.?0+$/, '');
    if (MARKDOWN) {
      console.log('| issued by | commands per submission | total |');
      console.log('|---|---|---|');
      for (const [issuer, n] of byIssuer) {
        const commands = rows.filter((row) => row.issuer === issuer).map((row) => `${row.command.toUpperCase()} ${fmt(row.perSubmission)}`);
        console.log(`| ${issuer} | ${commands.join(', ')} | ${fmt(n)} |`);
      }
      console.log(`| **all** |  | **${fmt(total)}** |`);
    } else {
      for (const row of rows) console.log(`${row.issuer.padEnd(48)} ${row.command.padEnd(18)} ${fmt(row.perSubmission)}`);
      console.log(`${'total'.padEnd(67)} ${fmt(total)}`);
      for (const [issuer, n] of byIssuer) console.log(`  ${issuer.padEnd(48)} ${fmt(n)}`);
    }
    console.log(`\nINFO commandstats over the same window, per submission: ${describeCommands(commandstats, 40)}`);
    await ours.close();
  } finally {
    for (const child of children) await child.stop();
    redis.disconnect();
    await privateRedis.stop();
  }
}

await main();
