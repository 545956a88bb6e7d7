/**
 * What an operator writes with the CLI (`resolve --as failed|submitted`, `ledger init`, `ledger
 * accept-epoch`) answers only once the replicas hold it (REDIS_MIN_REPLICAS, REDIS_REPLICA_TIMEOUT),
 * as `cancel` does: a resolve as failed that answered at once and died with the primary left the
 * promoted replica with the transfer in `submitting`, a runner sent it again, and the producer, told
 * it failed, resubmitted it: paid twice. A primary and one replica on loopback; the replica is frozen
 * (SIGSTOP, so it stays listed online but acknowledges nothing) for the NOT_REPLICATED cases, and each
 * healthy answer is checked by reading the replica itself right after the CLI exits. A command run
 * again after NOT_REPLICATED changes nothing, yet must not answer before the replicas hold what the
 * first run wrote (a fresh connection's WAIT alone answers at once): `cancel` included.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createKeys, type Keys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { loadLedgerConfig } from '../../src/config/config.ts';
import { cliLedger } from '../../src/cli/redis-run.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { killAllClis, runCli, type CliResult } from '../helpers/cli-process.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { recordUnknownSend } from '../helpers/unknown-send.ts';
import { sleep } from '../helpers/wait.ts';

const REASON = 'provider console checked, ticket OPS-4040';
const HOUR_MS = 3_600_000;
/** Short while the replica is frozen (the answer is NOT_REPLICATED anyway); long when it is healthy. */
const FROZEN_TIMEOUT = '300ms';
const HEALTHY_TIMEOUT = '10s';
/** Up to four CLI runs per test, each a Node start-up: seconds apiece on a loaded machine. */
const TIMEOUT = { timeout: 240_000 };

let primary: RedisServerHandle;
let replica: RedisServerHandle;
/** Reads on the replica (only while it runs). */
let onReplica: Redis;

beforeAll(async () => {
  primary = await startRedisServer();
  [replica] = (await startReplicas(primary, 1)) as [RedisServerHandle];
  onReplica = newRedis({ url: replica.url });
});

afterEach(async () => {
  await killAllClis();
});

afterAll(async () => {
  await killAllClis();
  await closeAllRedis();
  await replica?.stop();
  await primary?.stop();
});

function keysOf(prefix: string): Keys {
  return createKeys(prefix, `${prefix}:transfer-events`);
}

function ledgerOf(prefix: string): Ledger {
  return new Ledger(newRedis({ url: primary.url }), keysOf(prefix), {
    eventsMaxLen: 1_000,
    retentionMs: HOUR_MS,
    epoch: { init: 'auto', recoveryWindowMs: HOUR_MS },
  });
}

function cli(prefix: string, args: string[], replicaTimeout: string): Promise<CliResult> {
  return runCli([...args, '--json'], {
    env: { REDIS_URL: primary.url, QUEUE_PREFIX: prefix, REDIS_MIN_REPLICAS: '1', REDIS_REPLICA_TIMEOUT: replicaTimeout },
    // Node's start-up alone took over 20 s on a loaded two-core machine.
    timeoutMs: 60_000,
  });
}

/** Runs `task` while the replica is frozen: the primary still lists it online, but it acknowledges nothing. */
async function whileFrozen<T>(task: () => Promise<T>): Promise<T> {
  expect(process.kill(replica.pid, 'SIGSTOP')).toBe(true);
  try {
    return await task();
  } finally {
    process.kill(replica.pid, 'SIGCONT');
  }
}

function frozen(prefix: string, args: string[]): Promise<CliResult> {
  return cli(prefix, args, FROZEN_TIMEOUT);
}

function healthy(prefix: string, args: string[]): Promise<CliResult> {
  return cli(prefix, args, HEALTHY_TIMEOUT);
}

function expectNotReplicated(result: CliResult): void {
  expect(result.code, result.stderr).toBe(1);
  expect(result.stdout).toBe('');
  const { error } = JSON.parse(result.stderr) as { error: { code: string; message: string; details: Record<string, number> } };
  expect(error.code).toBe('NOT_REPLICATED');
  expect(error.details).toEqual({ acknowledged: 0, required: 1 });
  expect(error.message).toMatch(/again: it is safe/);
}

/** A transfer left in submitting by a runner that died mid-send (its 1 ms lease long over). */
async function stranded(prefix: string): Promise<string> {
  const payload = samplePayload();
  await recordUnknownSend(ledgerOf(prefix), payload);
  await sleep(5);
  return payload.halfSigned.sequenceId;
}

describe('resolve waits for the replicas', TIMEOUT, () => {
  for (const outcome of ['failed', 'submitted'] as const) {
    it(`--as ${outcome}: NOT_REPLICATED while the replica is frozen, also for a resolve again; once it holds the resolution, refused as already ${outcome}`, async () => {
      const prefix = uniquePrefix(`resolve-${outcome}-frozen`);
      const sequenceId = await stranded(prefix);
      // --force: what is tested here is the wait for the replicas, not the provider check (test/cli/resolve.test.ts).
      const args = ['resolve', sequenceId, '--as', outcome, '--force', '--reason', REASON];

      await whileFrozen(async () => {
        expectNotReplicated(await frozen(prefix, args));
        // The resolution is on the primary only; a resolve again writes nothing, and still answers only
        // once the replicas hold what the primary has: NOT_REPLICATED while the replica stays frozen.
        expect((await ledgerOf(prefix).get(sequenceId))?.state).toBe(outcome);
        expectNotReplicated(await frozen(prefix, args));
      });

      const again = await healthy(prefix, args);
      expect(again.code, again.stderr).toBe(4);
      expect(JSON.parse(again.stderr)).toMatchObject({ error: { code: 'WRONG_STATE', details: { state: outcome } } });
      expect(await onReplica.hget(keysOf(prefix).transfer(sequenceId), 'state')).toBe(outcome);
    });

    it(`--as ${outcome}: with a healthy replica it answers once the replica holds the resolution`, async () => {
      const prefix = uniquePrefix(`resolve-${outcome}-healthy`);
      const sequenceId = await stranded(prefix);
      const result = await healthy(prefix, ['resolve', sequenceId, '--as', outcome, '--force', '--reason', REASON]);
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ sequenceId, resolvedAs: outcome });
      // Read on the replica at once: the answer came only after it acknowledged.
      expect(await onReplica.hget(keysOf(prefix).transfer(sequenceId), 'state')).toBe(outcome);
    });
  }
});

describe('ledger init and accept-epoch wait for the replicas', TIMEOUT, () => {
  it('init: NOT_REPLICATED while the replica is frozen, also for an init again; answers once the replica holds the epoch', async () => {
    const prefix = uniquePrefix('init-frozen');
    const written = await whileFrozen(async () => {
      expectNotReplicated(await frozen(prefix, ['ledger', 'init']));
      const epoch = await ledgerOf(prefix).epoch.peek();
      expect(epoch.id).toBeDefined();
      expectNotReplicated(await frozen(prefix, ['ledger', 'init']));
      return epoch;
    });

    const again = await healthy(prefix, ['ledger', 'init']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ created: false, epoch: written.id });
    expect(await onReplica.hget(keysOf(prefix).epoch, 'id')).toBe(written.id);
  });

  it('init: with a healthy replica the epoch it created is on the replica when it answers', async () => {
    const prefix = uniquePrefix('init-healthy');
    const result = await healthy(prefix, ['ledger', 'init']);
    expect(result.code, result.stderr).toBe(0);
    const { created, epoch } = JSON.parse(result.stdout) as { created: boolean; epoch: string };
    expect(created).toBe(true);
    expect(await onReplica.hget(keysOf(prefix).epoch, 'id')).toBe(epoch);
  });

  it('accept-epoch: NOT_REPLICATED while the replica is frozen; with a healthy one the window is ended on the replica', async () => {
    const prefix = uniquePrefix('accept');
    // A worker declared the ledger lost: a new epoch with a recovery window, on the replica too.
    const worker = ledgerOf(prefix);
    await worker.epoch.start();
    await newRedis({ url: primary.url }).del(keysOf(prefix).epoch);
    const lost = await worker.epoch.mismatch();
    expect(lost.recoveryUntil).toBeGreaterThan(lost.now);

    expectNotReplicated(await whileFrozen(() => frozen(prefix, ['ledger', 'accept-epoch'])));
    const accepted = await healthy(prefix, ['ledger', 'accept-epoch']);
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(JSON.parse(accepted.stdout)).toMatchObject({ epoch: lost.id, recoveryActive: false });
    expect(await onReplica.hmget(keysOf(prefix).epoch, 'id', 'recoveryUntil')).toEqual([lost.id, '0']);
  });
});

describe('cancel again waits for the replicas', TIMEOUT, () => {
  it('a cancel again answers already-ended only once the replica holds the first cancel', async () => {
    const prefix = uniquePrefix('cancel-again');
    // A cancel needs a ledger with an epoch (else too-late: it cannot vouch that no send was made).
    await ledgerOf(prefix).epoch.start();
    // What a worker with the CLI's settings records at start-up (a cancel from another process checks it).
    await cliLedger(newRedis({ url: primary.url }), loadLedgerConfig({ REDIS_URL: primary.url, QUEUE_PREFIX: prefix })).recordSettings(
      'replace',
    );
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const args = ['cancel', sequenceId, '--reason', REASON];
    await whileFrozen(async () => {
      expectNotReplicated(await frozen(prefix, args));
      expect(await ledgerOf(prefix).ended(sequenceId)).toMatchObject({ state: 'cancelled' });
      expectNotReplicated(await frozen(prefix, args));
    });

    const again = await healthy(prefix, args);
    expect(again.code, again.stderr).toBe(5);
    expect(JSON.parse(again.stdout)).toMatchObject({ outcome: 'already-ended', state: 'cancelled' });
    expect(await onReplica.get(keysOf(prefix).tombstone(sequenceId))).toBe('cancelled:1');
  });
});
