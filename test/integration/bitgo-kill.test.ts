/**
 * The exactly-once guarantee with CUSTODY_PROVIDER=bitgo, against the crash that matters: the worker
 * process SIGKILLed twice while sends are in flight, restarted each time. BitGo itself refuses a second
 * send of a sequenceId (400 DuplicateSequenceIdError), so "one accepted send" alone proves little here;
 * what must hold is the worker's side: every transfer published `transfer.submitted` exactly once, none
 * reported `unresolved` or `failed` for a send that BitGo accepted (a resend's duplicate refusal must
 * read as "accepted earlier", and a lookup must find what a dead runner sent), versions without gaps.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer } from '../../packages/producer/src/producer.ts';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import { startBitgoSimulator, type BitgoSimulator } from '../../src/simulator/bitgo/index.ts';
import { workerBitgoEnv } from '../../src/simulator/worker-env.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { countBy, FAST_ENV, versionProblems } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';
import { killMidSend } from '../helpers/kill-mid-send.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { parseCheckedEntry } from '../helpers/json-schemas.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

const TRANSFERS = 300;
const KILL_AT = [80, 180];
const LATENCY_MS = 40;

let sim: BitgoSimulator;
let redis: Redis;
let producer: TransferProducer;
let env: Record<string, string>;
let stream: string;

beforeAll(async () => {
  // Tracking is not under test: transfers stay in approval for the whole run.
  sim = await startBitgoSimulator({ port: 0, settings: { latencyMs: LATENCY_MS, approvalAfterMs: 3_600_000 } });
  const prefix = uniquePrefix('bitgo-kill');
  stream = `${prefix}:transfer-events`;
  env = {
    REDIS_URL: testRedisUrl(),
    QUEUE_PREFIX: prefix,
    ...workerBitgoEnv(sim),
    HTTP_PORT: '0',
    ...FAST_ENV,
    SUBMIT_CONCURRENCY: '32',
    JOB_LOCK_DURATION: '2s',
    TRACK_POLL_MIN: '60s',
    TRACK_POLL_MAX: '60s',
    SHUTDOWN_TIMEOUT: '10s',
    LOG_LEVEL: 'info',
  };
  redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  producer = new TransferProducer({ connection: redis, prefix, eventsStream: stream });
});
afterAll(async () => {
  await killAllWorkers();
  await producer?.close();
  await redis?.quit();
  await sim?.close();
});

async function events(): Promise<TransferEvent[]> {
  const entries = await redis.xrange(stream, '-', '+');
  return entries.map((entry) => parseCheckedEntry(entry as [string, string[]]));
}

// Three worker starts, and the waits in between: two kills (30 s, then 5 s for a held send, each),
// every transfer submitted (90 s).
describe('CUSTODY_PROVIDER=bitgo: SIGKILL mid-send, twice', { timeout: processesTimeout(3, 160_000) }, () => {
  it('every transfer submitted exactly once, none unresolved or failed, versions without gaps', async () => {
    const payloads = Array.from({ length: TRANSFERS }, () =>
      samplePayload({ walletId: crypto.randomUUID().replaceAll('-', ''), coin: 'tbtc' }),
    );
    const sequenceIds = payloads.map((p) => p.halfSigned.sequenceId);
    await Promise.all(payloads.map((p) => producer.submit(p)));

    const workers: WorkerProcess[] = [];
    const start = async () => {
      const worker = spawnWorker(env, { name: `bitgo-kill-worker-${workers.length + 1}` });
      workers.push(worker);
      await worker.waitForLog('worker started', PROCESS_MS);
      return worker;
    };
    let worker = await start();
    const inFlightAtKill: number[] = [];
    for (const threshold of KILL_AT) {
      await until(
        `${threshold} submitted`,
        30_000,
        async () => ((await events()).filter((e) => e.event === 'transfer.submitted').length >= threshold ? true : undefined),
        20,
      );
      const { inFlight, exit } = await killMidSend(worker, {
        setSendLatency: (latencyMs) => sim.updateSettings({ latencyMs }),
        normalMs: LATENCY_MS,
        acceptedAts: () => sequenceIds.flatMap((id) => sim.transfer(id)?.acceptedAt ?? []),
      });
      inFlightAtKill.push(inFlight);
      expect(exit.signal).toBe('SIGKILL');
      worker = await start();
    }

    const all = await until(
      'every transfer submitted',
      90_000,
      async () => {
        const list = await events();
        const submitted = countBy(list, 'transfer.submitted');
        return sequenceIds.every((id) => submitted.has(id)) ? list : undefined;
      },
      100,
    );
    expect(inFlightAtKill.every((n) => n > 0)).toBe(true);
    const submitted = countBy(all, 'transfer.submitted');
    expect(sequenceIds.filter((id) => submitted.get(id) !== 1)).toEqual([]);
    expect(all.filter((e) => e.event === 'transfer.unresolved' || e.event === 'transfer.failed')).toEqual([]);
    expect(sequenceIds.filter((id) => sim.stats().sends[id]?.accepted !== 1)).toEqual([]);
    expect(versionProblems(all)).toEqual([]);
  });
});
