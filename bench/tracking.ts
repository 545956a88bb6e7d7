/**
 * Tracking polls per second: K transfers that the simulator accepted but never gives a txid
 * (SIM_TXID_AFTER far away), each polled again 10 ms after its last poll (the configuration's floor),
 * so the worker polls as fast as it can. Polls are counted where they land, at the simulator
 * (get-transfer requests, `/_sim/stats`).
 *
 * The bare counterpart polls as many accepted transfers with one get-transfer per job and
 * re-delays the job by the same interval (moveToDelayed + DelayedError), at the same concurrency.
 *
 * Both workers run at once with their tracking queue paused; a round resumes one queue, lets it run
 * for a warm-up, counts the polls over a window and pauses it again. run.ts alternates the two.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ValidSamplePayload } from '../tools/sample-payloads.ts';
import { cpuWindow, type CpuShare } from './cpu.ts';
import { commandWindow, type CommandCounts } from './redis-stats.ts';
import type { WalletServiceSimulatorChild } from './processes.ts';
import { forEachLimited, sleep, TRACK_QUEUE, waitForStreamLength, type SubmitTarget } from './load.ts';

export interface TrackingRound {
  transfers: number;
  seconds: number;
  polls: number;
  pollsPerSecond: number;
  /** get-transfer answers other than 200 in the window. */
  errors: number;
  cpu: CpuShare | undefined;
  /** Redis commands per poll (INFO commandstats; commands inside scripts included). */
  redisCommands: CommandCounts;
}

interface GetTransferCount {
  total: number;
  ok: number;
}

async function getTransferCount(simUrl: string): Promise<GetTransferCount> {
  const response = await fetch(`${simUrl}/_sim/stats`);
  const stats = (await response.json()) as { requests: { getTransfer: Record<string, number> } };
  const byStatus = stats.requests.getTransfer;
  const total = Object.values(byStatus).reduce((sum, count) => sum + count, 0);
  return { total, ok: byStatus['200'] ?? 0 };
}

export function trackQueue(redis: Redis, prefix: string): Queue {
  return new Queue(TRACK_QUEUE, { connection: redis, prefix });
}

/**
 * Ours: K transfers through the real submit path into tracking, with the tracking queue paused (the
 * running worker has TRACK_POLL_MIN = TRACK_POLL_MAX = the poll interval).
 */
export async function prepareOurTracking(redis: Redis, target: SubmitTarget, queue: Queue, transfers: ValidSamplePayload[]): Promise<void> {
  await queue.pause();
  const start = await redis.xlen(target.stream);
  await forEachLimited(transfers, 128, target.enqueue);
  await waitForStreamLength(redis, target.stream, start + transfers.length, 60_000 + transfers.length * 20, 'ours tracking set-up');
}

/**
 * Has the simulator accept `transfers` (sendTransaction straight from the load generator), so that
 * the bare tracker's get-transfer finds each one as ours does.
 */
export async function acceptTransfers(sim: WalletServiceSimulatorChild, transfers: ValidSamplePayload[]): Promise<void> {
  const token = (await (
    await fetch(`${sim.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: sim.clientId, client_secret: sim.clientSecret }),
    })
  ).json()) as { access_token: string };
  await forEachLimited(transfers, 32, async (payload) => {
    const response = await fetch(`${sim.url}/api/wallet/${String(payload.walletId)}/sendTransaction`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token.access_token}` },
      body: JSON.stringify({ txHex: payload.txHex, halfSigned: payload.halfSigned }),
    });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`sendTransaction for the bare tracker: HTTP ${response.status}`);
  });
}

/** Bare: one tracking job per transfer (accepted by the simulator beforehand, see acceptTransfers). */
export async function prepareBareTracking(queue: Queue, transfers: ValidSamplePayload[]): Promise<void> {
  await queue.pause();
  const jobs = transfers.map((payload) => ({
    name: TRACK_QUEUE,
    data: { sequenceId: payload.halfSigned.sequenceId, walletId: payload.walletId, coin: payload.coin },
    opts: { jobId: `track-${payload.halfSigned.sequenceId}` },
  }));
  const chunks: (typeof jobs)[] = [];
  for (let i = 0; i < jobs.length; i += 500) chunks.push(jobs.slice(i, i + 500));
  await forEachLimited(chunks, 4, async (chunk) => {
    await queue.addBulk(chunk);
  });
}

export async function trackingRound(
  redis: Redis,
  simUrl: string,
  queue: Queue,
  transfers: number,
  warmupSeconds: number,
  seconds: number,
): Promise<TrackingRound> {
  await queue.resume();
  try {
    await sleep(warmupSeconds * 1000);
    const commands = await commandWindow(redis);
    const first = await getTransferCount(simUrl);
    const cpu = cpuWindow();
    const startedAt = performance.now();
    await sleep(seconds * 1000);
    const last = await getTransferCount(simUrl);
    const elapsed = (performance.now() - startedAt) / 1000;
    const share = cpu.end();
    const polls = last.total - first.total;
    const redisCommands = await commands.end(Math.max(1, polls));
    return {
      transfers,
      seconds: elapsed,
      polls,
      pollsPerSecond: polls / elapsed,
      errors: polls - (last.ok - first.ok),
      cpu: share,
      redisCommands,
    };
  } finally {
    await queue.pause();
  }
}
