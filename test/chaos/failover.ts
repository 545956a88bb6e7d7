/**
 * A Redis failover under load (docs/contract.md sections 2 and 4): a primary, two replicas and three
 * Sentinels on loopback (down-after 1 s), two worker processes reaching Redis through the Sentinels, a
 * custody simulator that does NOT deduplicate sequenceIds (every send is accepted and counted, so a
 * second send would be a second payment), sends slowed so that many are in flight, and forced
 * failovers at random moments: the current master SIGKILLed (its unreplicated writes lost), a replica
 * promoted, the old master restarted as a replica. Measured after everything settles: accepted sends
 * per sequenceId, terminal events per transfer, event versions a live consumer saw against the final
 * stream, transfers lost. Run with REDIS_MIN_REPLICAS 1 and 0 (failover.test.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { parseStreamEntry, TERMINAL_EVENTS, type TransferEvent } from '../../packages/producer/src/events.ts';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import { jobIdFor } from '../../packages/producer/src/job-id.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import {
  getFreePort,
  rawRedisCommand,
  REDIS_SERVER_BIN,
  startRedisServer,
  type RedisServerHandle,
} from '../../tools/redis/redis-server.ts';
import { startRedisCluster } from '../helpers/redis-cluster.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { workerEnv } from '../helpers/harness.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { seededRandom } from './run-chaos.ts';

export type Topology = 'sentinel' | 'cluster';

export interface FailoverScenario {
  /** Sentinel: a primary, two replicas, three Sentinels. Cluster: three masters with a replica each. */
  topology: Topology;
  minReplicas: number;
  transfers: number;
  failovers: number;
  seed: number;
  settleTimeoutMs: number;
}

export interface Failover {
  atMs: number;
  /** How the master went: SIGKILL (restarted after), SIGSTOP until replaced (a stale master), or (Cluster) `CLUSTER FAILOVER FORCE` on its replica while it ran. */
  how: 'kill' | 'stop' | 'force';
  killedPort: number;
  newMasterPort: number;
  tookMs: number;
}

export interface FailoverFigures {
  topology: Topology;
  minReplicas: number;
  transfers: number;
  failovers: Failover[];
  /** sequenceIds the simulator accepted more than once: a second payment. */
  acceptedTwice: string[];
  /** Transfers with no terminal event on the final stream when the run stopped, and where they were. */
  withoutTerminal: number;
  unsettled: Record<string, number>;
  /** Up to three unsettled transfers: their ledger record and their submit job's state. */
  unsettledSamples: string[];
  /** Transfers with two terminal events (of any types) on the final stream, and of different types. */
  twoTerminal: number;
  twoTerminalDifferentTypes: number;
  /** (sequenceId, version) pairs a live consumer saw whose final stream entry differs or is gone. */
  versionsChangedOrLost: number;
  /** (sequenceId, version) pairs seen twice by the live consumer with different events. */
  versionsSeenTwiceDifferently: number;
  /** Sends refused because replicas did not acknowledge (worker logs). */
  replicaWaitRefusals: number;
  /** Workers replaced by the watchdog for taking no job while their queue had work due (worker logs). */
  workersReplaced: number;
  unexpectedExits: string[];
  runMs: number;
}

const SEND_LATENCY_MS = 300;

async function startSentinel(primaryPort: number, dir: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await getFreePort();
  const conf = join(dir, `sentinel-${port}.conf`);
  await writeFile(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${primaryPort} 2`,
      'sentinel down-after-milliseconds mymaster 1000',
      'sentinel failover-timeout mymaster 4000',
      'sentinel parallel-syncs mymaster 2',
      '',
    ].join('\n'),
  );
  const child = spawn(REDIS_SERVER_BIN, [conf, '--sentinel'], { stdio: 'ignore' });
  return { port, child };
}

type Client = Redis | Cluster;

/** How a scenario reaches Redis and fails its master over. */
interface RedisSetup {
  /** What the worker needs to reach it. */
  workerEnv: Record<string, string>;
  /** The failovers, in turn. */
  modes: Array<Failover['how']>;
  /** A new connection (not closed here). */
  connect(): Client;
  /** Fails over the master that holds `key`; resolves once another node serves it. */
  failover(how: Failover['how'], key: string): Promise<Pick<Failover, 'how' | 'killedPort' | 'newMasterPort'>>;
  /** Resolves once the master of `key` has all its replicas in sync again (or after 30 s). */
  replicasInSync(key: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A primary, two replicas and three Sentinels (down-after 1 s). A failover SIGKILLs the master and
 * restarts it (its unreplicated writes lost), or SIGSTOPs it until a replica is promoted and lets it
 * run again: a stale primary, reconfigured as a replica by the Sentinels when they see it.
 */
async function sentinelSetup(dir: string): Promise<RedisSetup> {
  const nodes: RedisServerHandle[] = [];
  const sentinels: Array<{ port: number; child: ChildProcess }> = [];
  const clients: Redis[] = [];
  const primary = await startRedisServer();
  nodes.push(primary);
  // Online, not only connected: a replica still loading its first sync acknowledges nothing.
  nodes.push(...(await startReplicas(primary, 2)));
  for (let i = 0; i < 3; i++) sentinels.push(await startSentinel(primary.port, dir));
  const sentinelList = sentinels.map((s) => ({ host: '127.0.0.1', port: s.port }));
  const ask = new Redis({ port: sentinels[0]!.port, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  ask.on('error', () => undefined);
  clients.push(ask);
  const masterPort = async (): Promise<number | undefined> => {
    try {
      const addr = (await ask.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')) as string[] | null;
      return addr ? Number(addr[1]) : undefined;
    } catch {
      return undefined;
    }
  };
  await until('the Sentinels know the master', 15_000, async () => ((await masterPort()) === primary.port ? true : undefined), 100);
  // A failover needs a majority of Sentinels that know each other and the replicas (hello messages
  // every 2 s): wait until each one sees the two others and both replicas.
  for (const sentinel of sentinels) {
    const one = new Redis({ port: sentinel.port, maxRetriesPerRequest: 1 });
    one.on('error', () => undefined);
    await until(
      `Sentinel ${sentinel.port} sees its peers and the replicas`,
      30_000,
      async () => {
        const flat = (await one.call('SENTINEL', 'master', 'mymaster')) as string[];
        const info = Object.fromEntries(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1]]] : [])));
        return info['num-other-sentinels'] === '2' && info['num-slaves'] === '2' ? true : undefined;
      },
      200,
    );
    one.disconnect();
  }

  const connect = (): Redis => {
    const client = new Redis({ sentinels: sentinelList, name: 'mymaster', maxRetriesPerRequest: null });
    client.on('error', () => undefined);
    return client;
  };
  return {
    workerEnv: {
      REDIS_URL: '',
      REDIS_SENTINELS: sentinelList.map((s) => `${s.host}:${s.port}`).join(','),
      REDIS_SENTINEL_MASTER: 'mymaster',
    },
    modes: ['kill', 'stop'],
    connect,
    async failover(how) {
      const current = await masterPort();
      const victim = nodes.find((n) => n.port === current);
      if (!victim) throw new Error(`the Sentinels name no master of ours (${current})`);
      if (how === 'stop') process.kill(victim.pid, 'SIGSTOP');
      else await victim.kill();
      const promoted = await until(
        'a new master',
        30_000,
        async () => {
          const port = await masterPort();
          return port !== undefined && port !== victim.port ? port : undefined;
        },
        100,
      );
      // The old master comes back: Sentinel makes it a replica of the new one.
      if (how === 'stop') process.kill(victim.pid, 'SIGCONT');
      else await victim.restart();
      return { how, killedPort: victim.port, newMasterPort: promoted };
    },
    async replicasInSync() {
      const port = await masterPort();
      const master = new Redis({ port, maxRetriesPerRequest: 1 });
      master.on('error', () => undefined);
      await until(
        'two replicas in sync again',
        30_000,
        async () => ((await master.info('replication')).match(/slave\d+:.*state=online/g)?.length === 2 ? true : undefined),
        200,
      ).catch(() => undefined);
      master.disconnect();
    },
    async stop() {
      for (const client of clients) client.disconnect();
      for (const s of sentinels) s.child.kill('SIGKILL');
      for (const node of nodes) await node.stop().catch(() => undefined);
    },
  };
}

/**
 * Three masters with a replica each (cluster-node-timeout 1 s, so a replica takes over about 2 s after
 * its master stops answering). A failover SIGKILLs the master of the worker's shard and restarts it, or
 * SIGSTOPs it until its replica took over, or has its replica take over while it runs
 * (`CLUSTER FAILOVER FORCE`: no hand-shake, so writes the master took meanwhile are lost). The old
 * master then rejoins as the new one's replica. WAIT applies per shard: the shard's one replica.
 */
async function clusterSetup(): Promise<RedisSetup> {
  const cluster = await startRedisCluster({ replicas: 1, extraArgs: ['--cluster-node-timeout', '1000'] });
  return {
    workerEnv: { REDIS_URL: '', REDIS_CLUSTER_NODES: cluster.nodesEnv },
    modes: ['kill', 'force', 'stop'],
    connect() {
      const client = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: null } });
      client.on('error', () => undefined);
      return client;
    },
    async failover(how, key) {
      const { master, replicas } = await cluster.shardOf(key);
      if (how === 'force') await rawRedisCommand(replicas[0]!.port, 'CLUSTER FAILOVER FORCE');
      else if (how === 'stop') process.kill(master.pid, 'SIGSTOP');
      else await master.kill();
      const promoted = await until(
        'another master for the shard',
        30_000,
        async () => {
          const now = await cluster.shardOf(key).catch(() => undefined);
          return now && now.master.port !== master.port ? now.master.port : undefined;
        },
        100,
      );
      if (how === 'stop') process.kill(master.pid, 'SIGCONT');
      else if (how === 'kill') await master.restart();
      return { how, killedPort: master.port, newMasterPort: promoted };
    },
    async replicasInSync(key) {
      await until(
        'the shard has its replica in sync again',
        30_000,
        async () => {
          const { master, replicas } = await cluster.shardOf(key);
          const info = await rawRedisCommand(master.port, 'INFO replication');
          return replicas.length === 1 && /slave0:[^\r\n]*state=online/.test(info) ? true : undefined;
        },
        200,
      ).catch(() => undefined);
    },
    stop: () => cluster.stop(),
  };
}

export async function runFailover(scenario: FailoverScenario): Promise<FailoverFigures> {
  const started = Date.now();
  const random = seededRandom(scenario.seed);
  const dir = await mkdtemp(join(tmpdir(), 'failover-'));
  const cleanup: Array<() => Promise<unknown>> = [];
  const workers: WorkerProcess[] = [];
  const clients: Client[] = [];
  let sim: Simulator | undefined;
  let producer: TransferProducer | undefined;
  try {
    const redis = scenario.topology === 'cluster' ? await clusterSetup() : await sentinelSetup(dir);
    cleanup.push(() => redis.stop());
    sim = await startSimulator({ port: 0, settings: { rejectDuplicates: false, latencyMs: { sendTransaction: SEND_LATENCY_MS } } });
    // On a Cluster every key of the worker shares the prefix's hash tag: one shard, the one failed over.
    const prefix = uniquePrefix('failover', { hashTag: scenario.topology === 'cluster' });
    const env = workerEnv(sim, prefix, {
      ...redis.workerEnv,
      REDIS_MIN_REPLICAS: String(scenario.minReplicas),
      REDIS_REPLICA_TIMEOUT: '500ms',
      SUBMIT_CONCURRENCY: '32',
      CUSTODY_TIMEOUT: '2s',
      JOB_LOCK_DURATION: '3s',
      RECONCILE_EVERY: '5s',
      RECONCILE_GRACE: '3s',
      TRACK_POLL_MIN: '200ms',
      TRACK_POLL_MAX: '1s',
      SUBMIT_RETRY_MAX: '500ms',
      LOG_LEVEL: 'info',
    });
    delete (env as Record<string, string | undefined>).REDIS_URL;
    const unexpectedExits: string[] = [];
    for (let i = 0; i < 2; i++) {
      const worker = spawnWorker(env, { name: `failover-${scenario.topology}-${scenario.minReplicas}-worker-${i + 1}` });
      workers.push(worker);
      void worker.exited.then((info) => unexpectedExits.push(`${worker.name}: ${JSON.stringify(info)}`));
      await worker.waitForLog('worker started', 60_000);
    }

    const connection = redis.connect();
    clients.push(connection);
    // The producer waits for the same replicas as the worker (minReplicas): an add the old master took
    // but no replica had is refused (NotReplicatedError) and submitted again below, not lost.
    producer = new TransferProducer({
      connection,
      prefix,
      eventsStream: `${prefix}:transfer-events`,
      submitTimeoutMs: 20_000,
      minReplicas: scenario.minReplicas,
    });

    // A live consumer: every entry as it was read, before any failover could take it back.
    const live = new Map<string, TransferEvent>();
    let liveTwiceDifferently = 0;
    let consuming = true;
    const reader = redis.connect();
    clients.push(reader);
    const consumer = (async () => {
      let cursor = '0';
      while (consuming) {
        try {
          const answer = (await reader.xread('COUNT', 1000, 'BLOCK', 500, 'STREAMS', `${prefix}:transfer-events`, cursor)) as Array<
            [string, Array<[string, string[]]>]
          > | null;
          for (const [, entries] of answer ?? []) {
            for (const entry of entries) {
              cursor = entry[0];
              const event = parseStreamEntry(entry);
              if (!event.sequenceId) continue;
              const key = `${event.sequenceId}@${event.version}`;
              const seen = live.get(key);
              if (seen && seen.event !== event.event) liveTwiceDifferently++;
              live.set(key, event);
            }
          }
        } catch {
          await sleep(200);
        }
      }
    })();

    // Enqueue in batches, failing the master over at random moments meanwhile.
    const sequenceIds: string[] = [];
    /** Why submit() was retried, per sequenceId (for the samples of unsettled transfers). */
    const submitRetries = new Map<string, string[]>();
    const failovers: FailoverFigures['failovers'] = [];
    const batches = 10;
    const failoverAt = new Set<number>();
    while (failoverAt.size < scenario.failovers) failoverAt.add(Math.floor(random() * batches));
    for (let batch = 0; batch < batches; batch++) {
      const payloads = Array.from({ length: scenario.transfers / batches }, () => samplePayload());
      sequenceIds.push(...payloads.map((p) => p.halfSigned.sequenceId));
      for (const payload of payloads) {
        for (let attempt = 0; ; attempt++) {
          try {
            await producer.submit(payload);
            break;
          } catch (error) {
            if (attempt > 40) throw error;
            const id = payload.halfSigned.sequenceId;
            submitRetries.set(id, [
              ...(submitRetries.get(id) ?? []),
              `${(error as Error).name}: ${(error as Error).message.slice(0, 100)}`,
            ]);
            await sleep(250);
          }
        }
      }
      if (failoverAt.has(batch)) {
        // Let sends get in flight, then fail the master over mid-stream.
        await sleep(Math.floor(random() * 2 * SEND_LATENCY_MS));
        const at = Date.now();
        const shardKey = `${prefix}:transfer:x`;
        const done = await redis.failover(redis.modes[failovers.length % redis.modes.length]!, shardKey);
        failovers.push({ atMs: at - started, ...done, tookMs: Date.now() - at });
        await redis.replicasInSync(shardKey);
      }
      await sleep(300);
    }

    // Settle: every transfer has a terminal event on the stream, or the time is up.
    const settleDeadline = Date.now() + scenario.settleTimeoutMs;
    const final = async () => {
      for (;;) {
        try {
          const entries = (await connection.xrange(`${prefix}:transfer-events`, '-', '+')) as Array<[string, string[]]>;
          return entries.map(parseStreamEntry).filter((e) => e.sequenceId !== '');
        } catch {
          await sleep(250);
        }
      }
    };
    let events = await final();
    const terminalOf = (list: TransferEvent[]) => new Set(list.filter((e) => TERMINAL_EVENTS.has(e.event)).map((e) => e.sequenceId));
    let sentTxids = 0;
    while (Date.now() < settleDeadline) {
      // Txids appear once a transfer is accepted, so tracking can end it.
      for (const id of sequenceIds) {
        if (sim.transfer(id) && !sim.transfer(id)!.txid) {
          sim.setTxid(id);
          sentTxids++;
        }
      }
      events = await final();
      if (terminalOf(events).size >= sequenceIds.length) break;
      await sleep(1_000);
    }
    void sentTxids;
    consuming = false;
    await consumer;

    const stats = sim.stats();
    const acceptedTwice = sequenceIds.filter((id) => (stats.sends[id]?.accepted ?? 0) > 1);
    const byId = new Map<string, TransferEvent[]>();
    for (const event of events) byId.set(event.sequenceId, [...(byId.get(event.sequenceId) ?? []), event]);
    let withoutTerminal = 0;
    const unsettled: Record<string, number> = {};
    const samples: string[] = [];
    const submitQueue = new Queue(QueueName.SUBMIT, { connection, prefix });
    const trackQueue = new Queue(QueueName.TRACK, { connection, prefix });
    let twoTerminal = 0;
    let twoTerminalDifferentTypes = 0;
    for (const id of sequenceIds) {
      const terminals = (byId.get(id) ?? []).filter((e) => TERMINAL_EVENTS.has(e.event));
      if (terminals.length === 0) {
        withoutTerminal++;
        const state = (await connection.hget(`${prefix}:transfer:${id}`, 'state').catch(() => 'unreadable')) ?? 'no record';
        const key = `${state}, ${stats.sends[id]?.accepted ? 'accepted' : 'not accepted'} upstream`;
        unsettled[key] = (unsettled[key] ?? 0) + 1;
        if (samples.length < 3) {
          // What a next look needs: the ledger record and where its submit job is.
          const record = await connection.hgetall(`${prefix}:transfer:${id}`).catch(() => ({}));
          // Without a record, the job the producer added (its id is derived from the sequenceId).
          const jobId = (record as Record<string, string>).jobId ?? jobIdFor(id);
          const jobState = await submitQueue.getJobState(jobId).catch((error: Error) => `unreadable: ${error.message}`);
          const trackState = await trackQueue.getJobState(trackJobId(id)).catch((error: Error) => `unreadable: ${error.message}`);
          const retries = JSON.stringify(submitRetries.get(id) ?? []);
          samples.push(
            `${id}: job ${jobId} ${jobState}, tracker ${trackState}, submit retried after ${retries}; ${JSON.stringify({ ...record, payload: undefined })}`,
          );
        }
      }
      if (terminals.length > 1) {
        twoTerminal++;
        if (new Set(terminals.map((e) => e.event)).size > 1) twoTerminalDifferentTypes++;
      }
    }
    if (withoutTerminal > 0) {
      // Where the trackers are, and whether the workers still take jobs.
      const counts = await trackQueue.getJobCounts('active', 'wait', 'delayed', 'prioritized', 'completed', 'failed').catch(() => ({}));
      const workersSeen = await trackQueue.getWorkersCount().catch(() => -1);
      const paused = await trackQueue.isPaused().catch(() => 'unreadable');
      const limited = await trackQueue.getRateLimitTtl().catch(() => 'unreadable');
      samples.push(
        `track queue: ${JSON.stringify(counts)}, workers connected: ${workersSeen}, paused: ${paused}, rate limit ttl: ${limited}`,
      );
      samples.push(`worker warnings and errors: ${JSON.stringify(warnings(workers))}`);
    }
    await submitQueue.close().catch(() => undefined);
    await trackQueue.close().catch(() => undefined);
    const finalByKey = new Map(events.map((e) => [`${e.sequenceId}@${e.version}`, e]));
    let versionsChangedOrLost = 0;
    for (const [key, seen] of live) if (finalByKey.get(key)?.event !== seen.event) versionsChangedOrLost++;
    const replicaWaitRefusals = workers.reduce(
      (n, w) => n + w.output().split('replicas did not acknowledge the send in flight').length - 1,
      0,
    );

    const workersReplaced = workers.reduce((n, w) => n + w.output().split('while its queue had work due: replaced it').length - 1, 0);
    return {
      workersReplaced,
      topology: scenario.topology,
      minReplicas: scenario.minReplicas,
      transfers: sequenceIds.length,
      failovers,
      acceptedTwice,
      withoutTerminal,
      unsettled,
      unsettledSamples: samples,
      twoTerminal,
      twoTerminalDifferentTypes,
      versionsChangedOrLost,
      versionsSeenTwiceDifferently: liveTwiceDifferently,
      replicaWaitRefusals,
      unexpectedExits: [...unexpectedExits],
      runMs: Date.now() - started,
    };
  } finally {
    await producer?.close().catch(() => undefined);
    await killAllWorkers();
    for (const client of clients) client.disconnect();
    await sim?.close().catch(() => undefined);
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

export function describeFigures(f: FailoverFigures): string {
  return [
    `[failover] ${f.topology}, REDIS_MIN_REPLICAS=${f.minReplicas}: ${f.transfers} transfers, ${f.failovers.length} failovers (${f.failovers.map((x) => `${x.how} ${(x.tookMs / 1000).toFixed(1)} s`).join(', ')}), run ${(f.runMs / 1000).toFixed(0)} s`,
    `  accepted twice upstream: ${f.acceptedTwice.length}; without a terminal event: ${f.withoutTerminal} ${JSON.stringify(f.unsettled)}; two terminal events: ${f.twoTerminal} (different types: ${f.twoTerminalDifferentTypes})`,
    ...f.unsettledSamples.map((sample) => `  unsettled: ${sample}`),
    `  versions a live consumer saw that the final stream changed or lost: ${f.versionsChangedOrLost}; seen twice differently: ${f.versionsSeenTwiceDifferently}; sends refused for want of a replica's acknowledgement: ${f.replicaWaitRefusals}; workers replaced: ${f.workersReplaced}; unexpected worker exits: ${f.unexpectedExits.length}`,
  ].join('\n');
}

/** The workers' warn/error log lines, counted by message (and error message), most frequent first. */
function warnings(workers: WorkerProcess[]): Array<[string, number]> {
  const counts = new Map<string, number>();
  for (const worker of workers) {
    for (const line of worker.output().split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { level?: string | number; msg?: string; err?: { message?: string } };
        if (!['warn', 'error', 'fatal', 40, 50, 60].includes(entry.level ?? '')) continue;
        const key = `${entry.msg ?? ''}${entry.err?.message ? `: ${entry.err.message.slice(0, 120)}` : ''}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      } catch {
        // not a log line
      }
    }
  }
  return [...counts].sort((a, b) => b[1] - a[1]).slice(0, 8);
}
