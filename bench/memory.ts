/**
 * Redis memory per tracked transfer. N transfers go through the real path (producer → submit job →
 * ledger → sendTransaction → `transfer.submitted` → tracking job delayed by a long poll interval) on a
 * fresh prefix, with the worker configured as in production except TRACK_POLL_MIN/MAX (1 h, so the
 * trackers sit delayed). `used_memory` is read before and after, once everything is quiet; the
 * difference divided by N is the figure. A breakdown by key (MEMORY USAGE, SAMPLES 0) of one
 * transfer's own keys and of the shared collections says where the bytes are.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { acquireRedis } from '../tools/redis/private-redis.ts';
import { samplePayload, type ValidSamplePayload } from '../tools/sample-payloads.ts';
import { trackJobId } from '../src/queues/names.ts';
import { forEachLimited, oursTarget, sleep, SUBMIT_QUEUE, TRACK_QUEUE, waitForStreamLength, type SubmitTarget } from './load.ts';
import { startOurWorker, startSimulatorProcess } from './processes.ts';

export interface MemoryPart {
  part: string;
  key: string;
  bytesPerTransfer: number;
  /** OBJECT ENCODING: a hash turns from `listpack` into the much bigger `hashtable` once one value
   * exceeds hash-max-listpack-value (64 B by default). */
  encoding: string;
}

export interface FieldSize {
  key: string;
  field: string;
  bytes: number;
}

export interface MemoryResult {
  tracked: number;
  loadSeconds: number;
  usedMemoryBefore: number;
  usedMemoryAfter: number;
  bytesPerTransfer: number;
  /** The same without the events stream's share, which EVENTS_MAXLEN bounds rather than tracking. */
  bytesPerTransferWithoutEvents: number;
  /** Keys the benchmark's prefix gained per transfer. */
  keysPerTransfer: number;
  /** One transfer's own keys and each shared collection's share, per transfer. */
  breakdown: MemoryPart[];
  /** The biggest fields of one transfer's hashes (bytes of the value). */
  largestFields: FieldSize[];
}

/** A private redis-server (no AOF), the simulator and our worker on the prefix `name`: what a memory probe runs against. */
export interface MemoryRig {
  redis: Redis;
  target: SubmitTarget;
  stop(): Promise<void>;
}

export async function startMemoryRig(name: string, simEnv: Record<string, string>, workerEnv: Record<string, string>): Promise<MemoryRig> {
  const server = await acquireRedis({ noContainers: true, server: { appendonly: false } });
  const redis = new Redis(server.url, { maxRetriesPerRequest: null });
  const sim = await startSimulatorProcess(simEnv);
  const target = oursTarget(redis, name);
  const worker = await startOurWorker({ name, redisUrl: server.url, prefix: target.prefix, sim, env: workerEnv });
  return {
    redis,
    target,
    async stop() {
      await worker.stop(30_000);
      await sim.process.stop(10_000);
      await target.close();
      redis.disconnect();
      await server.stop();
    },
  };
}

export async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  const match = /^used_memory:(\d+)/m.exec(info);
  if (!match) throw new Error('INFO memory has no used_memory');
  return Number(match[1]);
}

async function memoryUsage(redis: Redis, key: string): Promise<number> {
  const bytes = (await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) as number | null;
  return bytes ?? 0;
}

/** Every key matching `pattern` (SCAN: a private Redis only). */
export async function keysMatching(redis: Redis, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 5_000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

async function countKeys(redis: Redis, prefix: string): Promise<number> {
  return (await keysMatching(redis, `${prefix}:*`)).length;
}

async function keysOf(redis: Redis, prefix: string, sequenceId: string): Promise<string[]> {
  return (await keysMatching(redis, `${prefix}:*${sequenceId}*`)).sort();
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`memory: ${what} not reached within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** The running worker (prefix = target.prefix) must have TRACK_POLL_MIN far in the future. */
export async function measureMemory(redis: Redis, target: SubmitTarget, tracked: number): Promise<MemoryResult> {
  const submitQueue = new Queue(SUBMIT_QUEUE, { connection: redis, prefix: target.prefix });
  const trackQueue = new Queue(TRACK_QUEUE, { connection: redis, prefix: target.prefix });
  try {
    await sleep(500);
    const keysBefore = await countKeys(redis, target.prefix);
    const before = await usedMemory(redis);
    const started = performance.now();

    // Payloads made on the fly: 100 000 of them held at once would only weigh on the load generator.
    function* generate(): Generator<ValidSamplePayload> {
      for (let i = 0; i < tracked; i++) yield samplePayload();
    }
    let sample = '';
    await forEachLimited(generate(), 128, async (payload) => {
      sample ||= payload.halfSigned.sequenceId;
      await target.enqueue(payload);
    });
    const timeoutMs = 120_000 + tracked * 20;
    await waitForStreamLength(redis, target.stream, tracked, timeoutMs, 'memory load');
    await waitFor(
      async () => {
        // Completed submit jobs are not counted: how many stay is the worker's retention policy.
        const [submit, track] = await Promise.all([
          submitQueue.getJobCounts('active', 'wait', 'prioritized'),
          trackQueue.getJobCounts('delayed'),
        ]);
        return submit.active === 0 && submit.wait === 0 && submit.prioritized === 0 && track.delayed === tracked;
      },
      timeoutMs,
      `an empty submit queue and ${tracked} delayed trackers`,
    );
    const loadSeconds = (performance.now() - started) / 1000;
    await sleep(1_000);
    const after = await usedMemory(redis);
    const keysAfter = await countKeys(redis, target.prefix);

    const breakdown: MemoryPart[] = [];
    const largestFields: FieldSize[] = [];
    // The tracking job's key holds a digest of the sequenceId, not the sequenceId (src/queues/names.ts).
    const own = [...(await keysOf(redis, target.prefix, sample)), `${target.prefix}:${TRACK_QUEUE}:${trackJobId(sample)}`];
    for (const key of own) {
      const bytes = await memoryUsage(redis, key);
      breakdown.push({ part: describeOwnKey(target.prefix, key), key, bytesPerTransfer: bytes, encoding: await encodingOf(redis, key) });
      if ((await redis.type(key)) === 'hash') {
        const fields = await redis.hkeys(key);
        for (const field of fields) largestFields.push({ key, field, bytes: await redis.hstrlen(key, field) });
      }
    }
    const shared: Array<[string, string]> = [
      ['events stream entry (EVENTS_MAXLEN bounds it)', target.stream],
      ['ledger index: active transfers (zset)', `${target.prefix}:transfers:active`],
      ...(await listingIndexes(redis, target.prefix)),
      ['submit queue: completed (zset)', `${target.prefix}:${SUBMIT_QUEUE}:completed`],
      ['track queue: delayed (zset)', `${target.prefix}:${TRACK_QUEUE}:delayed`],
      ['submit queue: BullMQ events stream (capped ~10k)', `${target.prefix}:${SUBMIT_QUEUE}:events`],
      ['track queue: BullMQ events stream (capped ~10k)', `${target.prefix}:${TRACK_QUEUE}:events`],
    ];
    for (const [part, key] of shared) {
      breakdown.push({ part, key, bytesPerTransfer: (await memoryUsage(redis, key)) / tracked, encoding: await encodingOf(redis, key) });
    }
    largestFields.sort((a, b) => b.bytes - a.bytes);
    const eventsShare = breakdown.find((part) => part.key === target.stream)?.bytesPerTransfer ?? 0;

    return {
      tracked,
      loadSeconds,
      usedMemoryBefore: before,
      usedMemoryAfter: after,
      bytesPerTransfer: (after - before) / tracked,
      bytesPerTransferWithoutEvents: (after - before) / tracked - eventsShare,
      keysPerTransfer: (keysAfter - keysBefore) / tracked,
      breakdown,
      largestFields: largestFields.slice(0, 8),
    };
  } finally {
    await submitQueue.close();
    await trackQueue.close();
  }
}

/** The console's listing indexes (src/ledger/keys.ts) that this run's transfers wrote to. */
async function listingIndexes(redis: Redis, prefix: string): Promise<Array<[string, string]>> {
  return (await keysMatching(redis, `${prefix}:transfers:*`))
    .filter((key) => key !== `${prefix}:transfers:active`)
    .map((key): [string, string] => [`listing index ${key.slice(prefix.length + 1)}`, key])
    .sort((a, b) => a[1].localeCompare(b[1]));
}

async function encodingOf(redis: Redis, key: string): Promise<string> {
  return String((await redis.call('OBJECT', 'ENCODING', key)) ?? 'none');
}

function describeOwnKey(prefix: string, key: string): string {
  const rest = key.slice(prefix.length + 1);
  if (rest.startsWith('transfer:')) return 'ledger hash';
  if (rest.startsWith(`${SUBMIT_QUEUE}:`)) return 'submit job hash (completed, kept by removeOnComplete)';
  if (rest.startsWith(`${TRACK_QUEUE}:`)) return 'tracking job hash (delayed)';
  return 'other key of the transfer';
}
