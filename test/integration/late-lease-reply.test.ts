/**
 * A send lease whose reply arrives after the lease has run out. Worker A's lease command (the
 * transition that takes the send lease and marks a send pending) reaches Redis and is executed, but its
 * reply is late: held by a proxy (a network partition), or waiting in the socket of a process frozen
 * by SIGSTOP. Meanwhile A's job lock expires, worker B recovers the job, waits out the lease
 * (sendLeaseMs(1 s) = 17 s), looks the transfer up (nothing upstream: A has sent nothing), and sends.
 * Then A gets its reply. The simulator runs without duplicate rejection (a provider that does not
 * deduplicate): a second send by A is a second accepted transfer of the same sequenceId, a double spend.
 *
 * Both tests fail on the code before the fix (accepted twice) and pass once a late lease is not acted on.
 */
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { startRedisProxy, type RedisProxy } from '../helpers/redis-proxy.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

/** In the transition request of createAndTakeSend / takeSend / takeLease: the lease being taken. */
const LEASE_TAKE = Buffer.from('"mode":"take"');
const TERMINAL = new Set(['transfer.broadcast', 'transfer.rejected', 'transfer.blocked', 'transfer.failed', 'transfer.expired']);
/** Two worker starts, then A's lease command (15 s), B's send (40 s), A settling (10 s) and the checks. */
const TEST_TIMEOUT_MS = processesTimeout(2, 90_000);

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  // Workers first (SIGKILL also ends a stopped process), then the proxy, the queue, the harness.
  await killAllWorkers();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

interface Setup {
  h: Harness;
  proxy: RedisProxy;
  /** Worker A's environment: the test Redis through the proxy. */
  envA: Record<string, string>;
  /** Worker B's: the test Redis directly. */
  envB: Record<string, string>;
}

async function setUp(name: string): Promise<Setup> {
  const h = await startHarness({
    name,
    worker: false,
    sim: { settings: { rejectDuplicates: false } },
    // CUSTODY_TIMEOUT=1s (FAST_ENV): the lease is 5 + 2×1 + 10 = 17 s. 'worker started' is an info line.
    // One submit job at a time: A, its connection held, cannot fetch the job again once B's stalled
    // check puts it back (its fetch would be executed by Redis and its answer held).
    env: { LOG_LEVEL: 'info', SUBMIT_CONCURRENCY: '1' },
  });
  cleanups.push(() => h.close());
  const target = new URL(testRedisUrl());
  const proxy = await startRedisProxy(Number(target.port || 6379), target.hostname.replace(/^\[|\]$/g, ''));
  cleanups.push(() => proxy.close());
  const viaProxy = new URL(target.href);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  return { h, proxy, envA: { ...h.env, REDIS_URL: viaProxy.href }, envB: h.env };
}

async function startWorker(env: Record<string, string>, name: string): Promise<WorkerProcess> {
  const worker = spawnWorker(env, { name });
  await worker.waitForLog('worker started', PROCESS_MS);
  return worker;
}

/** Sends of `sequenceId` the simulator accepted. */
function accepted(h: Harness, sequenceId: string): number {
  return h.sim.stats().sends[sequenceId]?.accepted ?? 0;
}

/** Rejects after `ms` unless `promise` settles first. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** submit-transaction jobs the worker process finished (any outcome), from its /metrics. */
async function submitJobsFinished(worker: WorkerProcess): Promise<number> {
  const started = JSON.parse(await worker.waitForLog('worker started')) as { http: string };
  const response = await fetch(`${started.http}/metrics`, { signal: AbortSignal.timeout(3_000) });
  const text = await response.text();
  let finished = 0;
  for (const [, labels, value] of text.matchAll(/^custody_worker_jobs_total\{([^}]*)\} (\S+)$/gm)) {
    if (labels!.includes(`queue="${QueueName.SUBMIT}"`)) finished += Number(value);
  }
  return finished;
}

/**
 * Starts A (through the proxy), enqueues one transfer, and waits until A's lease command has gone out
 * with its reply held; calls `onLeaseCommand` at once. Then checks that the lease really was taken in
 * Redis and that nothing was sent yet.
 */
async function leaseTakenByA(
  s: Setup,
  name: string,
  onLeaseCommand: (a: WorkerProcess) => void = () => {},
): Promise<{ a: WorkerProcess; sequenceId: string }> {
  const a = await startWorker(s.envA, `${name}-A`);
  const held = s.proxy.holdRepliesAfter((bytes) => bytes.includes(LEASE_TAKE));
  const payload = samplePayload();
  const sequenceId = payload.halfSigned.sequenceId;
  await s.h.producer.submit(payload);
  await within(held, 15_000, "worker A's lease command");
  onLeaseCommand(a);
  const key = createKeys(s.h.config.queue.prefix, s.h.config.queue.eventsStream).transfer(sequenceId);
  const record = await until(
    'the lease command executed by Redis',
    5_000,
    async () => {
      const [state, pending, leaseUntil] = await s.h.redis.hmget(key, 'state', 'pending', 'leaseUntil');
      return state === 'submitting' ? { state, pending, leaseUntil } : undefined;
    },
    20,
  );
  expect(record.pending, 'A took the send lease with a send pending').toBe('1');
  expect(Number(record.leaseUntil)).toBeGreaterThan(0);
  expect(accepted(s.h, sequenceId), 'nothing sent before A got its lease reply').toBe(0);
  return { a, sequenceId };
}

/** Waits until B's send (the only one possible while A's reply is held) is accepted upstream. */
async function waitForSendByB(s: Setup, sequenceId: string, b: WorkerProcess): Promise<void> {
  try {
    // B recovers the job once A's lock (2 s) has lapsed, waits for the lease (17 s), looks up, sends.
    await until(
      'a send of the transfer accepted upstream (by worker B)',
      40_000,
      async () => (accepted(s.h, sequenceId) >= 1 ? true : undefined),
      50,
    );
  } catch (error) {
    throw new Error(`${(error as Error).message}; worker B's last output:\n${b.tail(15)}`, { cause: error });
  }
}

/** Once A has its late reply: until A's submit job has ended (any outcome), or 10 s. */
async function settleA(s: Setup, a: WorkerProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const finished = await submitJobsFinished(a).catch(() => 0);
    if (finished > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Exactly-once, as upstream and the event stream show it. */
async function expectOneSend(s: Setup, sequenceId: string): Promise<void> {
  const sends = s.h.sim.stats().sends[sequenceId];
  const count = sends?.accepted ?? 0;
  expect(
    count,
    `sequenceId ${sequenceId} was accepted ${count} time(s) by a provider without duplicate protection (sends: ${JSON.stringify(sends)}); ` +
      'more than 1 is a double send: worker A sent on a lease reply that came after its lease had expired and B had sent',
  ).toBe(1);

  const events: TransferEvent[] = await s.h.eventsOf(sequenceId);
  const described = events.map((e) => `${e.event} v${e.version}`).join(', ');
  expect(versionProblems(events), described).toEqual([]);
  expect(events.filter((e) => e.event === 'transfer.submitted').length, described).toBe(1);
  const terminal = events.filter((e) => TERMINAL.has(e.event));
  expect(terminal.length, described).toBeLessThanOrEqual(1);
  if (terminal.length === 0) {
    // Not ended yet: then it must still be tracked.
    const track = new Queue(QueueName.TRACK, { connection: s.h.redis, prefix: s.h.prefix });
    try {
      const state = await track.getJobState(trackJobId(sequenceId));
      if (!['active', 'waiting', 'delayed', 'prioritized', 'waiting-children'].includes(state)) {
        // The simulator gives the txid at once: tracking may have ended between the two reads. Then
        // its terminal event is there now; a tracker that ended without one fails here.
        const again = await s.h.eventsOf(sequenceId);
        const ended = again.filter((e) => TERMINAL.has(e.event)).map((e) => `${e.event} v${e.version}`);
        expect(ended, `${described}; tracking job ${state}`).toHaveLength(1);
      }
    } finally {
      await track.close();
    }
  }
}

describe('a lease reply that arrives after the lease expired and another worker sent', () => {
  it(
    "partition: A's replies held from its lease command until B has sent → accepted once",
    async () => {
      const name = 'late-lease-partition';
      const s = await setUp(name);
      const { a, sequenceId } = await leaseTakenByA(s, name);
      const b = await startWorker(s.envB, `${name}-B`);
      await waitForSendByB(s, sequenceId, b);
      expect(accepted(s.h, sequenceId)).toBe(1);

      s.proxy.release();
      await settleA(s, a);
      await expectOneSend(s, sequenceId);
      // A refused to write (its log says so), rather than, say, never getting that far.
      await a.waitForLog('send lease may have ended before the send was written', 5_000);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'SIGSTOP: A frozen right after its lease command left, continued after B has sent → accepted once',
    async () => {
      const name = 'late-lease-sigstop';
      const s = await setUp(name);
      let stopped = false;
      const { a, sequenceId } = await leaseTakenByA(s, name, (worker) => {
        stopped = worker.kill('SIGSTOP');
      });
      expect(stopped, 'SIGSTOP worker A').toBe(true);
      // The reply now waits in A's socket, unread by a stopped process.
      s.proxy.release();
      const b = await startWorker(s.envB, `${name}-B`);
      await waitForSendByB(s, sequenceId, b);
      expect(accepted(s.h, sequenceId)).toBe(1);

      expect(a.kill('SIGCONT'), 'SIGCONT worker A').toBe(true);
      await settleA(s, a);
      await expectOneSend(s, sequenceId);
      await a.waitForLog('send lease may have ended before the send was written', 5_000);
    },
    TEST_TIMEOUT_MS,
  );
});
