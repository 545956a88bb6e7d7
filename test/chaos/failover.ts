/**
 * A Redis failover under load (docs/contract.md sections 2 and 4): a primary, two replicas and three
 * Sentinels on loopback (down-after 1 s), two worker processes reaching Redis through the Sentinels, a
 * custody simulator that does NOT deduplicate sequenceIds (every send is accepted and counted, so a
 * second send would be a second payment), sends slowed so that many are in flight, and forced
 * failovers at random moments: the current master SIGKILLed (its unreplicated writes lost), a replica
 * promoted, the old master restarted as a replica. Measured after everything settles: accepted sends
 * per sequenceId, terminal events per transfer, event versions a live consumer saw against the final
 * stream, transfers lost. Run with REDIS_MIN_REPLICAS 1 and 0 (failover.test.ts).
 *
 * Volatile (Sentinel only): every data node keeps nothing on disk (no AOF, no RDB), so a node that
 * restarts comes back empty, and the workers run with REDIS_ALLOW_VOLATILE=1. Besides the failovers
 * above, the master is SIGKILLed and restarted at once, before the Sentinels see it down (`bounce`:
 * it comes back an empty master and its replicas resynchronise from it, empty too), and flushed once
 * (`flush`: an operator's FLUSHALL, or an empty node promoted). The ledger, the queues and the events
 * stream vanish; the workers notice from the ledger's epoch (src/ledger/epoch.ts). And a replica is
 * cut off from the master and promoted once the master and the other replica die (`lag`): the ledger
 * goes back in time under the same epoch; the workers notice from its tick. The producer then
 * does what a real one does: it enqueues again every transfer that shows neither a terminal event nor
 * `transfer.submitted` nor `transfer.unresolved` on the stream as it now is, every 10 s while the run
 * settles. A transfer whose events vanished counts as settled once its second life is.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { createKeys } from '../../src/ledger/keys.ts';
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
import { samplePayload, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { workerEnv } from '../helpers/harness.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { sleep, until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { seededRandom } from '../helpers/seeded-random.ts';

export type Topology = 'sentinel' | 'cluster';

export interface FailoverScenario {
  /** Sentinel: a primary, two replicas, three Sentinels. Cluster: three masters with a replica each. */
  topology: Topology;
  minReplicas: number;
  transfers: number;
  failovers: number;
  seed: number;
  settleTimeoutMs: number;
  /**
   * Sentinel only: no node keeps anything on disk, some failovers lose the whole dataset, and the
   * producer re-enqueues what it no longer sees an event for (see the file's comment).
   */
  volatile?: boolean;
}

export interface Failover {
  atMs: number;
  /**
   * How the master went: SIGKILL (restarted after), SIGSTOP until replaced (a stale master), or (Cluster) `CLUSTER FAILOVER FORCE` on its replica while it ran.
   * Volatile Sentinel only: `bounce`, SIGKILL and an immediate restart (no failover: the master comes back
   * empty and its replicas resynchronise from it), `flush`, FLUSHALL on the master, or `lag`, a replica
   * cut off from the master once the batch's jobs reached it (the workers held meanwhile), then the
   * master and the other replica SIGKILLed, so that the Sentinels promote the lagging one: it hands
   * out the jobs again, with none of their sends, under the same epoch.
   */
  how: 'kill' | 'stop' | 'force' | 'bounce' | 'flush' | 'lag';
  killedPort: number;
  newMasterPort: number;
  tookMs: number;
  /** The ledger's epoch was gone or replaced once the replicas were in sync again: the data vanished. */
  dataLost?: boolean;
  /** `lag`: how far (bytes of the replication stream) the promoted replica was behind the master it replaced. */
  laggedBytes?: number;
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
  /** Transfers with neither a terminal event nor `transfer.unresolved` on the final stream (the volatile notion of unsettled). */
  withoutTerminalOrUnresolved: number;
  /** The volatile variant's own figures (undefined otherwise). */
  volatile?: VolatileFigures;
}

export interface VolatileFigures {
  /** sequenceIds the live consumer saw events of under two epochs or more: a second life. */
  secondLives: number;
  /** Distinct epochs on the events the live consumer saw. */
  epochsSeen: number;
  /** custody_ledger_lost_total summed over the workers (scraped from /metrics), and the `ledger lost` log lines. */
  ledgerLost: number;
  ledgerLostLogged: number;
  /** custody_ledger_recovery_lookups_total summed over the workers, by what the lookups found. */
  recoveryLookups: Record<string, number>;
  /** submit() calls of the producer's re-enqueue sweeps, in all and per sweep. */
  reenqueued: number;
  sweeps: number[];
}

const SEND_LATENCY_MS = 300;
/** Volatile: how often the producer re-enqueues what the stream shows no sign of while the run settles. */
const SWEEP_EVERY_MS = 10_000;

/** What identifies an event (packages/producer/src/events.ts): its epoch, sequenceId and version. */
const eventKey = (e: TransferEvent) => `${e.epoch ?? ''}:${e.sequenceId}@${e.version}`;

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

/** startReplicas (test/helpers/replicas.ts) for a primary that keeps nothing on disk: replicas that keep nothing either. */
async function startVolatileReplicas(primary: RedisServerHandle, count: number): Promise<RedisServerHandle[]> {
  const replicas: RedisServerHandle[] = [];
  const probe = new Redis(primary.url);
  try {
    for (let i = 0; i < count; i++) {
      replicas.push(await startRedisServer({ appendonly: false, extraArgs: ['--replicaof', '127.0.0.1', String(primary.port)] }));
    }
    await until(
      `${count} replica(s) online`,
      10_000,
      async () => ((await probe.info('replication')).match(/slave\d+:[^\r\n]*state=online/g)?.length === count ? true : undefined),
      100,
    );
  } finally {
    probe.disconnect();
  }
  return replicas;
}

type Client = Redis | Cluster;

/** A field of a node's INFO replication, as a number (NaN when absent). */
async function replicationField(port: number, field: string): Promise<number> {
  const info = await rawRedisCommand(port, 'INFO replication');
  return Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? NaN);
}

/** The ports of the replicas the master on `port` lists online. */
async function onlineReplicaPorts(port: number): Promise<number[]> {
  const info = await rawRedisCommand(port, 'INFO replication');
  return [...info.matchAll(/slave\d+:ip=[^,]+,port=(\d+),state=online/g)].map((match) => Number(match[1]));
}

/** How a scenario reaches Redis and fails its master over. */
interface RedisSetup {
  /** What the worker needs to reach it. */
  workerEnv: Record<string, string>;
  /** The failovers, in turn. */
  modes: Array<Failover['how']>;
  /**
   * `lag` (Sentinel), once its batch is submitted and before any of it is taken: a replica that has
   * everything the master has is cut off from it, to be promoted by `failover('lag')`.
   */
  cutOffReplica?(): Promise<void>;
  /** A new connection (not closed here). */
  connect(): Client;
  /** Fails over the master that holds `key`; resolves once another node serves it. */
  failover(how: Failover['how'], key: string): Promise<Pick<Failover, 'how' | 'killedPort' | 'newMasterPort' | 'laggedBytes'>>;
  /** Resolves once the master of `key` has all its replicas in sync again (or after 30 s). */
  replicasInSync(key: string): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A primary, two replicas and three Sentinels (down-after 1 s). A failover SIGKILLs the master and
 * restarts it (its unreplicated writes lost), or SIGSTOPs it until a replica is promoted and lets it
 * run again: a stale primary, reconfigured as a replica by the Sentinels when they see it.
 */
async function sentinelSetup(dir: string, volatile: boolean): Promise<RedisSetup> {
  const nodes: RedisServerHandle[] = [];
  const sentinels: Array<{ port: number; child: ChildProcess }> = [];
  const clients: Redis[] = [];
  const primary = volatile ? await startRedisServer({ appendonly: false }) : await startRedisServer();
  nodes.push(primary);
  // Online, not only connected: a replica still loading its first sync acknowledges nothing.
  nodes.push(...(volatile ? await startVolatileReplicas(primary, 2) : await startReplicas(primary, 2)));
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

  /**
   * `lag`: a replica of the master, once it has everything the master has (the batch's jobs), is cut
   * off from it: told a wrong master password, its link killed, so that every reconnection fails at
   * AUTH and it applies nothing more while it keeps what it had (a SIGSTOPped replica would apply what
   * its socket buffered once it runs again). The master lists it no longer, so a WAIT counts only the
   * other replica: the batch's sends in flight, its sends and its events reach the master and the
   * other replica only.
   */
  let cutOff: { master: RedisServerHandle; lagging: RedisServerHandle; other: RedisServerHandle } | undefined;
  const cutOffReplica = async (): Promise<void> => {
    const current = await masterPort();
    const master = nodes.find((n) => n.port === current);
    if (!master) throw new Error('the Sentinels name no master of ours');
    const ports = await until(
      'two replicas online',
      30_000,
      async () => {
        const online = await onlineReplicaPorts(master.port);
        return online.length === 2 ? online : undefined;
      },
      200,
    );
    const [lagging, other] = ports.map((port) => nodes.find((n) => n.port === port)) as [RedisServerHandle, RedisServerHandle];
    const written = await replicationField(master.port, 'master_repl_offset');
    await until(
      'the replica to cut off has everything the master has',
      10_000,
      async () => ((await replicationField(lagging.port, 'slave_repl_offset')) >= written ? true : undefined),
      50,
    );
    for (const command of ['CONFIG SET masterauth not-the-master-password', 'CLIENT KILL TYPE master']) {
      const reply = await rawRedisCommand(lagging.port, command);
      if (reply.startsWith('-')) throw new Error(`${command} on ${lagging.port}: ${reply}`);
    }
    cutOff = { master, lagging, other };
  };
  /**
   * `lag`, the failover: the master and the other replica SIGKILLed, so that the Sentinels can promote
   * only the lagging one, whose ledger is older under the same epoch. Both come back as its replicas.
   */
  const promoteLagging = async (): Promise<Pick<Failover, 'how' | 'killedPort' | 'newMasterPort' | 'laggedBytes'>> => {
    if (!cutOff) throw new Error('`lag` fails over to the replica cutOffReplica() cut off');
    const { master, lagging, other } = cutOff;
    cutOff = undefined;
    const laggedBytes =
      (await replicationField(master.port, 'master_repl_offset')) - (await replicationField(lagging.port, 'slave_repl_offset'));
    await master.kill();
    await other.kill();
    const promoted = await until(
      'the lagging replica promoted',
      30_000,
      async () => {
        const port = await masterPort();
        return port !== undefined && port !== master.port ? port : undefined;
      },
      100,
    );
    if (promoted !== lagging.port) throw new Error(`the Sentinels promoted ${promoted}, not the lagging replica ${lagging.port}`);
    await rawRedisCommand(lagging.port, 'CONFIG SET masterauth ""');
    // Restarted with the arguments they were started with (see `bounce`): told at once whose replicas they are.
    for (const node of [master, other]) {
      await node.restart();
      await rawRedisCommand(node.port, `REPLICAOF 127.0.0.1 ${promoted}`);
    }
    return { how: 'lag', killedPort: master.port, newMasterPort: promoted, laggedBytes };
  };

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
    // Volatile: a SIGKILL with a failover (the empty node rejoins as a replica and resynchronises: no
    // data lost), one without (the data vanishes), a stale master, a FLUSHALL, a lagging replica promoted.
    // The lagging replica first: no loss before it opened a recovery window, in which every transfer
    // is looked up before its first send whether or not this loss is noticed.
    modes: volatile ? ['lag', 'kill', 'bounce', 'stop', 'flush'] : ['kill', 'stop'],
    connect,
    cutOffReplica,
    async failover(how) {
      if (how === 'lag') return promoteLagging();
      const current = await masterPort();
      const victim = nodes.find((n) => n.port === current);
      if (!victim) throw new Error(`the Sentinels name no master of ours (${current})`);
      if (how === 'bounce' || how === 'flush') {
        if (how === 'flush') {
          const reply = await rawRedisCommand(victim.port, 'FLUSHALL', '127.0.0.1', 5_000);
          if (reply !== 'OK') throw new Error(`FLUSHALL on ${victim.port}: ${reply}`);
        } else {
          // Back before down-after-milliseconds: the Sentinels see a reboot, not a master down.
          await victim.kill();
          await victim.restart();
          // A node the Sentinels promoted restarts with the arguments it was started with (no config
          // file took the promotion), `--replicaof` the first primary: a real one restarts from its
          // rewritten config, a master. Told at once, before its first sync could start.
          const reply = await rawRedisCommand(victim.port, 'REPLICAOF NO ONE');
          if (reply !== 'OK') throw new Error(`REPLICAOF NO ONE on ${victim.port}: ${reply}`);
        }
        // Past down-after-milliseconds, so that a failover the Sentinels started anyway shows here.
        await sleep(2_500);
        return { how, killedPort: victim.port, newMasterPort: (await masterPort()) ?? -1 };
      }
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
  const volatile = scenario.volatile === true;
  if (volatile && scenario.topology !== 'sentinel') throw new Error('the volatile variant runs through Sentinel only');
  const random = seededRandom(scenario.seed);
  const dir = await mkdtemp(join(tmpdir(), 'failover-'));
  const cleanup: Array<() => Promise<unknown>> = [];
  const workers: WorkerProcess[] = [];
  const clients: Client[] = [];
  let sim: Simulator | undefined;
  let producer: TransferProducer | undefined;
  try {
    const redis = scenario.topology === 'cluster' ? await clusterSetup() : await sentinelSetup(dir, volatile);
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
      LOG_LEVEL: process.env.FAILOVER_LOG_LEVEL ?? 'info',
      // The worker refuses a Redis that keeps nothing on disk unless told it may.
      ...(volatile ? { REDIS_ALLOW_VOLATILE: '1' } : {}),
    });
    delete (env as Record<string, string | undefined>).REDIS_URL;
    const unexpectedExits: string[] = [];
    for (let i = 0; i < 2; i++) {
      const name = `failover-${scenario.topology}-${scenario.minReplicas}${volatile ? '-volatile' : ''}-worker-${i + 1}`;
      const worker = spawnWorker(env, { name });
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
    // Keyed by (epoch, sequenceId, version), what identifies an event: a second life starts at version 1 again.
    const live = new Map<string, TransferEvent>();
    /** The epochs under which the live consumer saw each sequenceId's events. */
    const liveEpochs = new Map<string, Set<string>>();
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
              const key = eventKey(event);
              const seen = live.get(key);
              if (seen && seen.event !== event.event) liveTwiceDifferently++;
              live.set(key, event);
              liveEpochs.set(event.sequenceId, (liveEpochs.get(event.sequenceId) ?? new Set()).add(event.epoch ?? ''));
            }
          }
        } catch {
          await sleep(200);
        }
      }
    })();

    // Enqueue in batches, failing the master over at random moments meanwhile.
    const sequenceIds: string[] = [];
    const payloadOf = new Map<string, ValidSamplePayload>();
    /** Why submit() was retried, per sequenceId (for the samples of unsettled transfers). */
    const submitRetries = new Map<string, string[]>();
    const submit = async (payload: ValidSamplePayload) => {
      for (let attempt = 0; ; attempt++) {
        try {
          await producer!.submit(payload);
          break;
        } catch (error) {
          if (attempt > 40) throw error;
          const id = payload.halfSigned.sequenceId;
          submitRetries.set(id, [...(submitRetries.get(id) ?? []), `${(error as Error).name}: ${(error as Error).message.slice(0, 100)}`]);
          await sleep(250);
        }
      }
    };
    const keys = createKeys(prefix, `${prefix}:transfer-events`);
    const epochNow = () => connection.hget(keys.epoch, 'id').catch(() => 'unreadable');
    const failovers: FailoverFigures['failovers'] = [];
    const batches = 10;
    const failoverAt = new Set<number>();
    while (failoverAt.size < scenario.failovers) failoverAt.add(Math.floor(random() * batches));
    for (let batch = 0; batch < batches; batch++) {
      const payloads = Array.from({ length: scenario.transfers / batches }, () => samplePayload());
      sequenceIds.push(...payloads.map((p) => p.halfSigned.sequenceId));
      for (const payload of payloads) payloadOf.set(payload.halfSigned.sequenceId, payload);
      const how = redis.modes[failovers.length % redis.modes.length]!;
      // `lag`: the workers are held (SIGSTOP) while the batch is submitted, so that its jobs reach both
      // replicas before any is taken; one replica is then cut off, and the workers run again.
      const lag = failoverAt.has(batch) && how === 'lag';
      if (lag) for (const worker of workers) worker.kill('SIGSTOP');
      try {
        for (const payload of payloads) await submit(payload);
        if (lag) await redis.cutOffReplica?.();
      } finally {
        if (lag) for (const worker of workers) worker.kill('SIGCONT');
      }
      if (lag) {
        // The lagging replica holds the batch's jobs; the master and the other replica, their sends.
        const upstream = sim;
        await until(
          'the batch accepted upstream while the replica lags',
          30_000,
          async () => (payloads.every((p) => upstream.transfer(p.halfSigned.sequenceId)) ? true : undefined),
          50,
        );
      }
      if (failoverAt.has(batch)) {
        // Let sends get in flight, then fail the master over mid-stream.
        await sleep(Math.floor(random() * 2 * SEND_LATENCY_MS));
        const at = Date.now();
        const shardKey = `${prefix}:transfer:x`;
        const epochBefore = volatile ? await epochNow() : undefined;
        const done = await redis.failover(how, shardKey);
        const failover: Failover = { atMs: at - started, ...done, tookMs: Date.now() - at };
        failovers.push(failover);
        await redis.replicasInSync(shardKey);
        // `lag`: the promoted replica holds the same epoch, further back; the workers must see its tick
        // below the one they saw and declare the loss (a new epoch).
        if (volatile && done.how === 'lag') {
          await until(
            'the lagging ledger declared lost',
            30_000,
            async () => ((await epochNow()) !== epochBefore ? true : undefined),
            200,
          ).catch(() => undefined);
        }
        if (volatile) failover.dataLost = (await epochNow()) !== epochBefore;
      }
      await sleep(300);
    }

    // Settle: every transfer has a terminal event on the stream (volatile: or `transfer.unresolved`, which
    // waits for an operator), or the time is up. Volatile: the producer re-enqueues, every
    // SWEEP_EVERY_MS, each transfer the stream as it now is shows no sign of (neither a terminal event
    // nor `transfer.submitted` nor `transfer.unresolved`): its data may have vanished with Redis's.
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
    const settledOf = (list: TransferEvent[]) =>
      new Set(list.filter((e) => TERMINAL_EVENTS.has(e.event) || e.event === 'transfer.unresolved').map((e) => e.sequenceId));
    const sweeps: number[] = [];
    let nextSweep = Date.now() + SWEEP_EVERY_MS;
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
      if ((volatile ? settledOf : terminalOf)(events).size >= sequenceIds.length) break;
      if (volatile && Date.now() >= nextSweep) {
        const shown = new Set(
          events
            .filter((e) => TERMINAL_EVENTS.has(e.event) || e.event === 'transfer.submitted' || e.event === 'transfer.unresolved')
            .map((e) => e.sequenceId),
        );
        const missing = sequenceIds.filter((id) => !shown.has(id));
        for (const id of missing) await submit(payloadOf.get(id)!);
        sweeps.push(missing.length);
        nextSweep = Date.now() + SWEEP_EVERY_MS;
      }
      await sleep(1_000);
    }
    void sentTxids;
    consuming = false;
    await consumer;

    const stats = sim.stats();
    const acceptedTwice = sequenceIds.filter((id) => (stats.sends[id]?.accepted ?? 0) > 1);
    if (acceptedTwice.length > 0) await keepEvidence(acceptedTwice, workers, events, stats.sends, (id) => sim!.transfer(id));
    const byId = new Map<string, TransferEvent[]>();
    for (const event of events) byId.set(event.sequenceId, [...(byId.get(event.sequenceId) ?? []), event]);
    let withoutTerminal = 0;
    let withoutTerminalOrUnresolved = 0;
    const unsettled: Record<string, number> = {};
    const samples: string[] = [];
    const submitQueue = new Queue(QueueName.SUBMIT, { connection, prefix });
    const trackQueue = new Queue(QueueName.TRACK, { connection, prefix });
    let twoTerminal = 0;
    let twoTerminalDifferentTypes = 0;
    for (const id of sequenceIds) {
      const terminals = (byId.get(id) ?? []).filter((e) => TERMINAL_EVENTS.has(e.event));
      const unresolved = (byId.get(id) ?? []).some((e) => e.event === 'transfer.unresolved');
      if (terminals.length === 0 && !unresolved) withoutTerminalOrUnresolved++;
      if (terminals.length === 0) {
        withoutTerminal++;
        const state = (await connection.hget(`${prefix}:transfer:${id}`, 'state').catch(() => 'unreadable')) ?? 'no record';
        const last = volatile ? `, last event ${byId.get(id)?.at(-1)?.event ?? 'none'}` : '';
        const key = `${state}, ${stats.sends[id]?.accepted ? 'accepted' : 'not accepted'} upstream${last}`;
        unsettled[key] = (unsettled[key] ?? 0) + 1;
        // Volatile: the samples are of transfers not settled in its sense (no transfer.unresolved either).
        if (samples.length < 3 && !(volatile && unresolved)) {
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
    const finalByKey = new Map(events.map((e) => [eventKey(e), e]));
    let versionsChangedOrLost = 0;
    for (const [key, seen] of live) if (finalByKey.get(key)?.event !== seen.event) versionsChangedOrLost++;
    const replicaWaitRefusals = workers.reduce(
      (n, w) => n + w.output().split('replicas did not acknowledge the send in flight').length - 1,
      0,
    );

    const workersReplaced = workers.reduce((n, w) => n + w.output().split('while its queue had work due: replaced it').length - 1, 0);
    let volatileFigures: VolatileFigures | undefined;
    if (volatile) {
      const scraped = await Promise.all(workers.map((w) => scrapeMetrics(w)));
      const sum = (name: string) => scraped.reduce((n, metrics) => n + (metrics.get(name) ?? 0), 0);
      const recoveryLookups: Record<string, number> = {};
      for (const found of ['found', 'absent', 'ambiguous']) {
        recoveryLookups[found] = sum(`custody_ledger_recovery_lookups_total{found="${found}"}`);
      }
      volatileFigures = {
        secondLives: [...liveEpochs.values()].filter((epochs) => epochs.size > 1).length,
        epochsSeen: new Set([...liveEpochs.values()].flatMap((epochs) => [...epochs])).size,
        ledgerLost: sum('custody_ledger_lost_total'),
        ledgerLostLogged: workers.reduce((n, w) => n + w.output().split('"msg":"ledger lost: ').length - 1, 0),
        recoveryLookups,
        reenqueued: sweeps.reduce((n, count) => n + count, 0),
        sweeps,
      };
    }
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
      withoutTerminalOrUnresolved,
      ...(volatileFigures ? { volatile: volatileFigures } : {}),
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

/**
 * A double acceptance is a money bug: the workers' logs, the events and the upstream sends of each
 * such sequenceId are kept in a directory of their own (named in the test's output) for diagnosis.
 */
async function keepEvidence(
  ids: string[],
  workers: WorkerProcess[],
  events: TransferEvent[],
  sends: unknown,
  upstream: (sequenceId: string) => unknown,
): Promise<void> {
  const kept = await mkdtemp(join(tmpdir(), 'failover-accepted-twice-'));
  for (const worker of workers) await writeFile(join(kept, `${worker.name}.log`), worker.output());
  const wanted = new Set(ids);
  const evidence = {
    ids,
    events: events.filter((event) => wanted.has(event.sequenceId)),
    sends: Object.fromEntries(ids.map((id) => [id, (sends as Record<string, unknown>)[id]])),
    upstream: Object.fromEntries(ids.map((id) => [id, upstream(id)])),
  };
  await writeFile(join(kept, 'evidence.json'), JSON.stringify(evidence, null, 2));
  console.log(`[failover] accepted twice: ${ids.join(', ')}; evidence kept in ${kept}`);
}

export function describeFigures(f: FailoverFigures): string {
  const v = f.volatile;
  const lost = (x: Failover) =>
    `${x.laggedBytes === undefined ? '' : `, ${x.laggedBytes} bytes behind`}${x.dataLost === undefined ? '' : x.dataLost ? ', data lost' : ', data kept'}`;
  return [
    `[failover] ${f.topology}${v ? ' (volatile)' : ''}, REDIS_MIN_REPLICAS=${f.minReplicas}: ${f.transfers} transfers, ${f.failovers.length} failovers (${f.failovers.map((x) => `${x.how} ${(x.tookMs / 1000).toFixed(1)} s${lost(x)}`).join(', ')}), run ${(f.runMs / 1000).toFixed(0)} s`,
    `  accepted twice upstream: ${f.acceptedTwice.length}; without a terminal event: ${f.withoutTerminal} ${JSON.stringify(f.unsettled)}; two terminal events: ${f.twoTerminal} (different types: ${f.twoTerminalDifferentTypes})`,
    ...f.unsettledSamples.map((sample) => `  unsettled: ${sample}`),
    `  versions a live consumer saw that the final stream changed or lost: ${f.versionsChangedOrLost}; seen twice differently: ${f.versionsSeenTwiceDifferently}; sends refused for want of a replica's acknowledgement: ${f.replicaWaitRefusals}; workers replaced: ${f.workersReplaced}; unexpected worker exits: ${f.unexpectedExits.length}`,
    ...(v
      ? [
          `  volatile: without a terminal event or transfer.unresolved: ${f.withoutTerminalOrUnresolved}; second lives: ${v.secondLives} (epochs seen: ${v.epochsSeen}); custody_ledger_lost_total: ${v.ledgerLost} (logged: ${v.ledgerLostLogged}); recovery lookups: ${JSON.stringify(v.recoveryLookups)}; re-enqueued: ${v.reenqueued} (sweeps: ${v.sweeps.join(', ') || 'none'})`,
        ]
      : []),
  ].join('\n');
}

/**
 * A worker's /metrics, scraped at the address its `worker started` line gives: value by series
 * (`name` or `name{labels}`). Empty when it cannot be read.
 */
async function scrapeMetrics(worker: WorkerProcess): Promise<Map<string, number>> {
  const values = new Map<string, number>();
  try {
    const startedLine = worker
      .output()
      .split('\n')
      .find((line) => line.includes('"msg":"worker started"'));
    const { http } = JSON.parse(startedLine ?? '{}') as { http?: string };
    if (!http) return values;
    const text = await (await fetch(`${http}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const at = line.lastIndexOf(' ');
      values.set(line.slice(0, at), Number(line.slice(at + 1)));
    }
  } catch {
    // unreadable: the figures say 0
  }
  return values;
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
