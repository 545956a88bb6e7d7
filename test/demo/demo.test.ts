/**
 * `npm run demo` as a real child process against the test Redis (REDIS_URL) with short settings, and once
 * with a Redis of its own: its exit codes, what it prints, what lands on the events stream, and that
 * Ctrl-C or the end stops everything it started.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  parseStreamEntry,
  TERMINAL_EVENTS,
  type EventData,
  type EventType,
  type TransferEvent,
} from '../../packages/producer/src/events.ts';
import { QueueName } from '../../src/queues/names.ts';
import { PROJECT_ROOT } from '../../tools/child-process.ts';
import { verifyRun } from '../../tools/demo/verify.ts';
import { buildSamples } from '../../tools/demo/samples.ts';
import { versionProblems } from '../helpers/harness.ts';
import { closeAllRedis, newRedis, testRedisUrl } from '../helpers/redis.ts';
import { killAllDemos, spawnDemo, type DemoResult } from './demo-process.ts';
import { startSentinel } from '../helpers/sentinel.ts';
import { startRedisServer } from '../../tools/redis/redis-server.ts';

/** What must never be printed: the simulator's client secret, the person in raw.user, travel-rule originator data. */
const FORBIDDEN = [/sim-secret/, /jane\.doe@example\.com/i, /phoneNumber/, /displayName/, /Jane Doe/, /C01X00T47/, /Invalidenstrasse/];

const EXPECTED: Record<string, string> = {
  normal: 'transfer.broadcast',
  duplicate: 'transfer.broadcast',
  blocked: 'transfer.blocked',
  invalid: 'transfer.rejected',
};

/** With --provider bitgo: no sample is blocked; an integer wallet id is rejected instead. */
const EXPECTED_BITGO: Record<string, string> = {
  normal: 'transfer.broadcast',
  duplicate: 'transfer.broadcast',
  'integer-wallet': 'transfer.rejected',
  invalid: 'transfer.rejected',
};

/** Short settings: the simulator gives a txid within ~100 ms, any free HTTP port. */
function fastEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { REDIS_URL: testRedisUrl(), DEMO_PACE: '100ms', DEMO_TIMEOUT: '30s', HTTP_PORT: '0', ...extra };
}

interface SummarySample {
  sequenceId: string;
  kind: string;
  jobs: number;
  expected: string;
  got: string | string[] | null;
  submitted: number;
  acceptedSends: number;
  ok: boolean;
  problems: string[];
  /** --provider bitgo, a sent transfer: its wait in pendingApproval at the simulator. */
  approval?: { waitedMs: number; seenWaiting: boolean };
}
interface Summary {
  type: 'summary';
  ok: boolean;
  prefix: string;
  eventsStream: string;
  dashboardUrl: string;
  samples: SummarySample[];
  problems: string[];
}

function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function stoppedSteps(stderr: string): string[] {
  return [...stderr.matchAll(/^stopped (.+)$/gm)].map((match) => match[1]!);
}

function expectNothingForbidden(result: DemoResult): void {
  for (const pattern of FORBIDDEN) {
    expect(result.stdout).not.toMatch(pattern);
    expect(result.stderr).not.toMatch(pattern);
  }
}

async function deleteKeys(prefix: string): Promise<void> {
  const redis = newRedis();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.unlink(...keys);
}

async function keyCount(prefix: string): Promise<number> {
  return (await newRedis().keys(`${prefix}:*`)).length;
}

/** Direct children of `pid` (the demo's redis-server, a testcontainers helper). */
function childPids(pid: number): number[] {
  const ps = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .map((line) => Number(line.trim()))
    .filter((n) => n > 0);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function refused(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(2_000) });
    return false;
  } catch {
    return true;
  }
}

const hasRedisServer = (() => {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

afterEach(async () => {
  await killAllDemos();
  await closeAllRedis();
});

afterAll(async () => {
  await killAllDemos();
});

describe('npm run demo', () => {
  it('runs end to end and exits 0 with every sample in its expected terminal state, each settled by exactly one event', async () => {
    const demo = spawnDemo(['--json'], fastEnv({ DEMO_TRANSFERS: '3', DEMO_KEEP_DATA: '1' }));
    const result = await demo.exit();
    expect(result.code, result.stderr).toBe(0);
    expectNothingForbidden(result);

    const lines = jsonLines(result.stdout);
    const summary = lines.find((line) => line.type === 'summary') as unknown as Summary;
    expect(summary.ok, JSON.stringify(summary.problems)).toBe(true);
    expect(summary.prefix).toMatch(/^demo-[0-9a-f]{8}$/);
    try {
      expect(summary.samples.map((sample) => sample.kind).sort()).toEqual([
        'blocked',
        'duplicate',
        'invalid',
        'normal',
        'normal',
        'normal',
      ]);
      for (const sample of summary.samples) {
        expect(sample.got, sample.sequenceId).toBe(EXPECTED[sample.kind]);
        expect(sample.ok, sample.problems.join('; ')).toBe(true);
        const sent = sample.kind === 'normal' || sample.kind === 'duplicate' ? 1 : 0;
        expect({ submitted: sample.submitted, acceptedSends: sample.acceptedSends }, sample.sequenceId).toEqual({
          submitted: sent,
          acceptedSends: sent,
        });
      }
      const duplicate = summary.samples.find((sample) => sample.kind === 'duplicate')!;
      expect(duplicate.jobs).toBe(2);

      // The stream itself, read back from Redis.
      const redis = newRedis();
      const entries = await redis.xrange(summary.eventsStream, '-', '+');
      const events: TransferEvent[] = entries.map((entry) => parseStreamEntry(entry as [string, string[]]));
      const transfers = events.filter((event) => event.event !== 'reconcile.completed');
      expect(new Set(transfers.map((event) => event.sequenceId))).toEqual(new Set(summary.samples.map((sample) => sample.sequenceId)));
      for (const sample of summary.samples) {
        const own = transfers.filter((event) => event.sequenceId === sample.sequenceId);
        expect(
          own.filter((event) => TERMINAL_EVENTS.has(event.event)).map((event) => event.event),
          sample.sequenceId,
        ).toEqual([EXPECTED[sample.kind]]);
        expect(
          own.filter((event) => event.event === 'transfer.submitted'),
          sample.sequenceId,
        ).toHaveLength(sample.submitted);
      }
      expect(versionProblems(events)).toEqual([]);

      // Every stream entry was printed, once, in stream order.
      const printed = lines.filter((line) => line.type === 'event').map((line) => line.id);
      expect(printed).toEqual(events.map((event) => event.id));

      // The duplicate's second job did run (and published nothing).
      const queue = new Queue(QueueName.SUBMIT, { connection: redis, prefix: summary.prefix });
      try {
        expect(await queue.getJobState(`${duplicate.sequenceId}-again`)).toBe('completed');
      } finally {
        await queue.close();
      }
    } finally {
      await deleteKeys(summary.prefix);
    }
  });

  it('runs against the master a Sentinel names (REDIS_SENTINELS), and deletes its keys there', async () => {
    const primary = await startRedisServer();
    const sentinel = await startSentinel(primary.port);
    try {
      const env = fastEnv({ DEMO_TRANSFERS: '1', REDIS_SENTINELS: `127.0.0.1:${sentinel.port}` });
      delete env.REDIS_URL;
      const result = await spawnDemo([], env).exit();
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/^ {2}redis {7}sentinel:\/\/127\.0\.0\.1:\d+\/mymaster \(REDIS_SENTINELS\)$/m);
      expect(result.stdout).toMatch(/^ok: all 4 transfers reached their expected outcome/m);
      expect(result.stderr).toMatch(/^deleted \d+ keys under demo-[0-9a-f]{8}: from the Sentinels' master/m);
      const direct = newRedis({ url: primary.url });
      expect(await direct.dbsize()).toBe(0);
    } finally {
      await sentinel.stop();
      await primary.stop();
    }
  }, 60_000);

  it('prints readable events, progress, a summary table and the dashboard URL, then deletes its keys from the shared Redis', async () => {
    const result = await spawnDemo([], fastEnv({ DEMO_TRANSFERS: '2' })).exit();
    expect(result.code, result.stderr).toBe(0);
    expectNothingForbidden(result);
    const { stdout, stderr } = result;

    const prefix = /queue prefix (demo-[0-9a-f]{8})/.exec(stdout)?.[1];
    expect(prefix).toBeDefined();
    expect(stdout).toMatch(/^ {2}redis {7}redis:\/\/.+\(REDIS_URL\)$/m);
    expect(stdout).toMatch(/enqueueing 6 jobs for 5 transfers: 2 normal, 1 duplicate \(2 jobs\), 1 no travel-rule ref, 1 invalid payload/);

    // One line per event: time, type, sequenceId, version, a short detail.
    const time = String.raw`^ {2}\d\d:\d\d:\d\d\.\d{3} {2}`;
    expect(stdout).toMatch(
      new RegExp(`${time}transfer\\.submitted +${prefix}-duplicate +v1 +upstream id \\d+, amount [\\d.]+ to \\S+$`, 'm'),
    );
    expect(stdout).toMatch(new RegExp(`${time}transfer\\.broadcast +${prefix}-normal-1 +v2 +txid \\S+$`, 'm'));
    expect(stdout).toMatch(new RegExp(`${time}transfer\\.blocked +${prefix}-blocked +v1 +TRAVEL_RULE_REQUIRED`, 'm'));
    expect(stdout).toMatch(
      new RegExp(`${time}transfer\\.rejected +${prefix}-invalid +v1 +INVALID_PAYLOAD \\(walletId, coin, txHex\\)$`, 'm'),
    );
    expect(stdout.match(/transfer\.submitted/g)).toHaveLength(3);

    // Progress on stderr (plain lines: stderr is not a terminal here).
    expect(stderr).toMatch(/^progress: 0\/5 transfers settled/m);
    expect(stderr).toMatch(/^progress: 5\/5 transfers settled/m);

    // The summary table.
    expect(stdout).toMatch(/^ {2}sequenceId +sample +jobs +expected +got +submitted +sends +ok$/m);
    const row = (id: string, label: string, jobs: number, expected: string, sends: number) =>
      new RegExp(
        `^ {2}${prefix}-${id} +${label.replace(/[()]/g, '\\$&')} +${jobs} +${expected} +${expected} +${sends} +${sends} +yes$`,
        'm',
      );
    expect(stdout).toMatch(row('normal-1', 'normal', 1, 'transfer.broadcast', 1));
    expect(stdout).toMatch(row('normal-2', 'normal', 1, 'transfer.broadcast', 1));
    expect(stdout).toMatch(row('duplicate', 'duplicate (2 jobs)', 2, 'transfer.broadcast', 1));
    expect(stdout).toMatch(row('blocked', 'no travel-rule ref', 1, 'transfer.blocked', 0));
    expect(stdout).toMatch(row('invalid', 'invalid payload', 1, 'transfer.rejected', 0));
    expect(stdout).toMatch(/^ok: all 5 transfers reached their expected outcome \(6 jobs, \d+ events, [\d.]+ s\)$/m);
    // No URL of a dashboard that is about to stop, and no stray warning about container runtimes.
    expect(stdout).not.toMatch(/^dashboard: /m);
    expect(stdout).toMatch(/^the dashboard stops with the demo; `npm run demo -- --keep` keeps it up$/m);
    expect(stdout + stderr).not.toContain('testcontainers:');

    // The excerpt docs/simulator.md shows as this command's output: every line has the shape of a
    // line this run printed (times, ids, amounts, counts and hex digits aside).
    const page = readFileSync(join(PROJECT_ROOT, 'docs/simulator.md'), 'utf8');
    const excerpt = /<!-- output: npm run demo -->\n```text\n([\s\S]*?)```/.exec(page)?.[1];
    expect(excerpt, 'docs/simulator.md marks an excerpt of the demo output').toBeDefined();
    const shape = (line: string) =>
      line
        .replace(/\d\d:\d\d:\d\d\.\d{3}/g, 'T')
        .replace(/demo-[0-9a-f]{8}/g, 'demo-P')
        .replace(/0x[0-9a-fA-F]+…[0-9a-fA-F]+/g, 'H')
        .replace(/\d+(\.\d+)?/g, 'N')
        .replace(/\s+/g, ' ')
        .trim();
    const printed = new Set(stdout.split('\n').map(shape));
    const unmatched = excerpt!
      .split('\n')
      .filter((line) => line.trim() !== '' && line.trim() !== '…')
      .filter((line) => !printed.has(shape(line)));
    expect(unmatched).toEqual([]);

    // Stopped in order; a Redis it did not start is left running, with the run's keys gone.
    expect(stoppedSteps(stderr)).toEqual(['worker', 'http server', 'demo connection', 'simulator']);
    expect(stderr).toMatch(new RegExp(`^deleted \\d+ keys under ${prefix}`, 'm'));
    expect(await keyCount(prefix!)).toBe(0);
  });

  it('runs against the BitGo simulator with --provider bitgo and exits 0, every sample in its expected state, one transfer having waited in pendingApproval', async () => {
    // DEMO_PACE 1s: each send waits 600 ms in pendingApproval, its txid shows 300 ms after signing.
    const result = await spawnDemo(['--json', '--provider', 'bitgo'], fastEnv({ DEMO_TRANSFERS: '2', DEMO_PACE: '1s' })).exit();
    expect(result.code, result.stderr).toBe(0);
    expectNothingForbidden(result);

    const lines = jsonLines(result.stdout);
    const start = lines.find((line) => line.type === 'start')!;
    expect(start).toMatchObject({
      samples: { normal: 2, duplicate: 1, 'integer-wallet': 1, invalid: 1 },
      jobs: 6,
      bitgo: { approvalAfterMs: 600, txidAfterMs: 300 },
    });
    const summary = lines.find((line) => line.type === 'summary') as unknown as Summary;
    expect(summary.ok, JSON.stringify(summary.problems)).toBe(true);
    expect(summary.samples.map((sample) => sample.kind).sort()).toEqual(['duplicate', 'integer-wallet', 'invalid', 'normal', 'normal']);
    for (const sample of summary.samples) {
      expect(sample.got, sample.sequenceId).toBe(EXPECTED_BITGO[sample.kind]);
      expect(sample.ok, sample.problems.join('; ')).toBe(true);
      const sent = sample.kind === 'normal' || sample.kind === 'duplicate' ? 1 : 0;
      expect({ submitted: sample.submitted, acceptedSends: sample.acceptedSends }, sample.sequenceId).toEqual({
        submitted: sent,
        acceptedSends: sent,
      });
      // Every accepted send waited in pendingApproval at the simulator; the rejected ones were never sent.
      if (sent === 1) expect(sample.approval?.waitedMs, sample.sequenceId).toBe(600);
      else expect(sample.approval, sample.sequenceId).toBeUndefined();
    }

    // Seen waiting: an `approval` line after the transfer's submitted event and before its broadcast.
    const events = lines.filter((line) => line.type === 'event') as unknown as Array<{ event: string; sequenceId: string; detail: string }>;
    expect(events.map((event) => event.event)).not.toContain('transfer.blocked');
    const integerWallet = events.find((event) => event.sequenceId.endsWith('-integer-wallet'))!;
    expect(integerWallet).toMatchObject({ event: 'transfer.rejected', detail: 'INVALID_PAYLOAD (walletId)' });
    const approvals = lines.filter((line) => line.type === 'approval') as unknown as Array<{ sequenceId: string; state: string }>;
    expect(approvals.length).toBeGreaterThan(0);
    const waited = approvals[0]!.sequenceId;
    expect(approvals[0]!.state).toBe('pendingApproval');
    expect(summary.samples.find((sample) => sample.sequenceId === waited)?.approval?.seenWaiting).toBe(true);
    const order = lines.flatMap((line) =>
      line.sequenceId === waited && (line.type === 'approval' || line.type === 'event')
        ? [line.type === 'approval' ? 'approval' : String(line.event)]
        : [],
    );
    expect(order).toEqual(['transfer.submitted', 'approval', 'transfer.broadcast']);
    expect(await keyCount(summary.prefix)).toBe(0);
  });

  it('CUSTODY_PROVIDER=bitgo selects BitGo too (text output shows the approval wait); an unknown provider is refused', async () => {
    const result = await spawnDemo([], fastEnv({ CUSTODY_PROVIDER: 'bitgo', DEMO_TRANSFERS: '1', DEMO_PACE: '1s' })).exit();
    expect(result.code, result.stderr).toBe(0);
    const { stdout } = result;
    const prefix = /queue prefix (demo-[0-9a-f]{8})/.exec(stdout)?.[1];
    expect(stdout).toMatch(
      /^ {2}simulator {3}http:\S+ {2}\(BitGo: a send waits 600 ms in pendingApproval, its txid 300 ms after signing; no travel-rule gate\)$/m,
    );
    expect(stdout).toMatch(/enqueueing 5 jobs for 4 transfers: 1 normal, 1 duplicate \(2 jobs\), 1 integer wallet id, 1 invalid payload$/m);
    const time = String.raw`^ {2}\d\d:\d\d:\d\d\.\d{3} {2}`;
    expect(stdout).toMatch(new RegExp(`${time}transfer\\.submitted +${prefix}-normal-1 +v1 +upstream id [0-9a-f]{32}$`, 'm'));
    expect(stdout).toMatch(
      new RegExp(`${time}pendingApproval +${prefix}-normal-1 +accepted, waiting for approval at BitGo: no txid yet$`, 'm'),
    );
    expect(stdout).toMatch(new RegExp(`${time}transfer\\.rejected +${prefix}-integer-wallet +v1 +INVALID_PAYLOAD \\(walletId\\)$`, 'm'));
    expect(stdout).toMatch(
      new RegExp(`^ {2}${prefix}-integer-wallet +integer wallet id +1 +transfer\\.rejected +transfer\\.rejected +0 +0 +yes$`, 'm'),
    );
    expect(stdout).toMatch(/^ok: all 4 transfers reached their expected outcome \(5 jobs, \d+ events, [\d.]+ s\)$/m);
    expect(stdout).toMatch(
      /^pendingApproval: 2 of 2 sent transfers waited for approval at BitGo \(600 ms\), [12] seen waiting at their transfer\.submitted$/m,
    );
    expect(stdout).not.toMatch(/travel rule applies|transfer\.blocked/);
    expect(stoppedSteps(result.stderr)).toEqual(['worker', 'http server', 'demo connection', 'simulator']);

    const env = await spawnDemo([], fastEnv({ CUSTODY_PROVIDER: 'nope' })).exit();
    expect(env.code).toBe(78);
    expect(env.stderr).toMatch(/^demo: CUSTODY_PROVIDER: must be one of wallet-service, bitgo$/m);
    expect(env.stdout).toBe('');
    const argv = await spawnDemo(['--provider', 'nope'], fastEnv()).exit();
    expect(argv.code).toBe(2);
    expect(argv.stderr).toMatch(/^demo: --provider: unknown provider "nope" \(wallet-service or bitgo\)$/m);
    expect(argv.stderr).toContain('--provider P');
  });

  it('exits 1 and says which samples differed when they do not settle in time', async () => {
    // The simulator takes about a minute per txid: the normal transfers cannot be broadcast within 4 s.
    const result = await spawnDemo(['--json'], fastEnv({ DEMO_TRANSFERS: '1', DEMO_PACE: '60s', DEMO_TIMEOUT: '4s' })).exit();
    expect(result.code, result.stderr).toBe(1);
    const summary = jsonLines(result.stdout).find((line) => line.type === 'summary') as unknown as Summary;
    expect(summary.ok).toBe(false);
    const byKind = Object.fromEntries(summary.samples.map((sample) => [sample.kind, sample]));
    expect(byKind.normal!.ok).toBe(false);
    expect(byKind.normal!.problems).toContain('no terminal event, expected transfer.broadcast');
    expect(byKind.blocked!.ok).toBe(true);
    expect(byKind.invalid!.ok).toBe(true);
    expect(result.stderr).toMatch(/^FAILED: 2 of 4 transfers did not reach their expected outcome before DEMO_TIMEOUT/m);
    expect(result.stderr).toContain(`${byKind.normal!.sequenceId}: no terminal event, expected transfer.broadcast`);
    expect(await keyCount(summary.prefix)).toBe(0);
  });

  it('refuses an unknown argument (exit 2) and a malformed setting (exit 78) before starting anything', async () => {
    const usage = await spawnDemo(['--bogus'], fastEnv()).exit();
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^demo: unknown argument "--bogus"$/m);
    expect(usage.stderr).toContain('npm run demo');

    const config = await spawnDemo([], fastEnv({ DEMO_PACE: 'soon', DEMO_TRANSFERS: '0' })).exit();
    expect(config.code).toBe(78);
    expect(config.stderr).toMatch(/^demo: DEMO_TRANSFERS: must be a whole number from 1 to 1000$/m);
    expect(config.stderr).toMatch(/^demo: DEMO_PACE: must be a duration/m);
    expect(config.stdout).toBe('');

    const help = await spawnDemo(['--help'], fastEnv()).exit();
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--keep[\s\S]*--json[\s\S]*Exit codes/);
  });

  it('with --keep stays up with the dashboard after the summary until Ctrl-C, then exits with the run result', async () => {
    const demo = spawnDemo(['--keep'], fastEnv({ DEMO_TRANSFERS: '1' }));
    // stdout and stderr are two pipes: wait for both, the summary's last line and the notice.
    await demo.waitFor(
      'the summary and the --keep notice',
      (stdout, stderr) => /^dashboard: /m.test(stdout) && stderr.includes('still running (--keep)'),
    );
    const dashboard = /^dashboard: (\S+)$/m.exec(demo.stdout())![1]!;
    const page = await fetch(dashboard);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<html/i);
    expect((await fetch(new URL('/readyz', dashboard))).status).toBe(200);

    demo.child.kill('SIGINT');
    const result = await demo.exit();
    expect(result.code, result.stderr).toBe(0);
    expect(stoppedSteps(result.stderr)).toEqual(['worker', 'http server', 'demo connection', 'simulator']);
    expect(await refused(dashboard)).toBe(true);
  });

  it('on Ctrl-C mid-run stops everything it started, in order, leaves no process behind and exits 130', async () => {
    // With redis-server on PATH the demo starts its own Redis, which must be gone afterwards too.
    const env = hasRedisServer
      ? { DEMO_NO_CONTAINERS: '1', DEMO_PACE: '60s', DEMO_TRANSFERS: '3', HTTP_PORT: '0' }
      : fastEnv({ DEMO_PACE: '60s', DEMO_TRANSFERS: '3' });
    const demo = spawnDemo([], env);
    await demo.waitFor('a transfer.submitted line', (stdout) => /transfer\.submitted/.test(stdout));
    const simulator = /^ {2}simulator {3}(\S+)/m.exec(demo.stdout())![1]!;
    const dashboard = /^ {2}dashboard {3}(\S+)/m.exec(demo.stdout())![1]!;
    const children = childPids(demo.child.pid!);
    if (hasRedisServer) expect(children.length).toBeGreaterThan(0);

    demo.child.kill('SIGINT');
    const result = await demo.exit();
    expect(result.code, result.stderr).toBe(130);
    expect(result.stderr).toMatch(/^SIGINT: stopping everything the demo started/m);
    expect(result.stdout).not.toMatch(/^summary$/m);
    expect(stoppedSteps(result.stderr)).toEqual(
      hasRedisServer
        ? ['worker', 'http server', 'demo connection', 'simulator', 'redis-server']
        : ['worker', 'http server', 'demo connection', 'simulator'],
    );
    for (const pid of children) expect(isAlive(pid), `child ${pid} still running`).toBe(false);
    expect(await refused(`${simulator}/_sim/stats`)).toBe(true);
    expect(await refused(dashboard)).toBe(true);
  });
});

/** One valid `data` per event type, for events made up in tests. */
const SAMPLE_DATA: EventData = {
  'transfer.submitted': {
    transfer: { id: 48213, sequenceId: 's-1', destinationAddress: '0x5b38da6a701c568545dcfcb03fcb875f56beddc4', amount: 0.0125 },
  },
  'transfer.unresolved': { code: 'SEND_OUTCOME_UNKNOWN', attempts: 3, lastError: 'CUSTODY_TIMEOUT' },
  'transfer.broadcast': {
    txid: '0x9f2c',
    transaction: {
      id: '1702233',
      type: 'send',
      txid: '0x9f2c',
      outputs: [{ address: '0x5b38da6a701c568545dcfcb03fcb875f56beddc4', amount: '0.0125' }],
    },
    walletTransaction: null,
  },
  'transfer.rejected': { code: 'INVALID_PAYLOAD', issues: [{ path: 'coin', message: 'required' }] },
  'transfer.blocked': { code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: 1, mandatory: true, blockTxn: false } },
  'transfer.cancelled': { reason: 'duplicate order', by: 'cli' },
  'transfer.failed': { code: 'CUSTODY_REJECTED', httpStatus: 422, message: 'send: HTTP 422, request refused', attempts: 1 },
  'transfer.expired': { code: 'TRACKING_DEADLINE', submittedAt: '2026-11-23T10:15:02.120Z', deadline: '2026-11-24T10:15:02.120Z' },
  'transfer.halted': { state: 'rejected', providerTransferId: '5f1e0c3b9a7d4e2f8c6b1a0d9e8f7a6b' },
  'reconcile.completed': {
    checked: 0,
    resubmitted: 0,
    trackersRestored: 0,
    unrecoverable: 0,
    verified: 0,
    mismatches: 0,
    verifyErrors: 0,
    retentionRemoved: 0,
    staleIndexRemoved: 0,
    interrupted: false,
    durationMs: 1,
  },
};

describe('the demo verdict', () => {
  const samples = buildSamples('demo-test', 1);
  // Built as the stream holds them, so each carries data of its type's shape (the verdict reads types only).
  const event = (sequenceId: string, type: EventType, version: number): TransferEvent =>
    parseStreamEntry([
      `${version}-0`,
      [
        'event',
        type,
        'sequenceId',
        sequenceId,
        'walletId',
        '310',
        'coin',
        'eth',
        'version',
        String(version),
        'at',
        '2025-01-01T00:00:00.000Z',
        'data',
        JSON.stringify(SAMPLE_DATA[type]),
        'metadata',
        '',
      ],
    ]);
  const good = (): TransferEvent[] => [
    event('demo-test-normal-1', 'transfer.submitted', 1),
    event('demo-test-normal-1', 'transfer.broadcast', 2),
    event('demo-test-duplicate', 'transfer.submitted', 1),
    event('demo-test-duplicate', 'transfer.broadcast', 2),
    event('demo-test-blocked', 'transfer.blocked', 1),
    event('demo-test-invalid', 'transfer.rejected', 1),
  ];
  const oneSendEach = (sequenceId: string) => (/normal|duplicate/.test(sequenceId) ? 1 : 0);

  it('passes a run where every sample got exactly its outcome', () => {
    expect(verifyRun(samples, good(), oneSendEach)).toMatchObject({ ok: true, problems: [] });
  });

  it('fails a second terminal event, a second submitted event or a second accepted send', () => {
    const twice = [...good(), event('demo-test-blocked', 'transfer.blocked', 2)];
    expect(verifyRun(samples, twice, oneSendEach).problems).toContain(
      'demo-test-blocked: 2 terminal events (transfer.blocked, transfer.blocked), expected exactly one',
    );

    const resubmitted = good();
    resubmitted.splice(3, 0, event('demo-test-duplicate', 'transfer.submitted', 2));
    resubmitted[4] = event('demo-test-duplicate', 'transfer.broadcast', 3);
    expect(verifyRun(samples, resubmitted, oneSendEach).problems).toContain('demo-test-duplicate: 2 transfer.submitted events, expected 1');

    const doubleSpend = verifyRun(samples, good(), (sequenceId) => (sequenceId === 'demo-test-duplicate' ? 2 : oneSendEach(sequenceId)));
    expect(doubleSpend.problems).toEqual(['demo-test-duplicate: the simulator accepted 2 sends, expected 1']);
  });

  it('builds BitGo samples: 32-hex wallet ids and testnet coins, an integer wallet id rejected in place of the blocked one', () => {
    const bitgo = buildSamples('demo-test', 2, 'bitgo');
    expect(bitgo.map((sample) => [sample.kind, sample.expected, sample.sends])).toEqual([
      ['normal', 'transfer.broadcast', 1],
      ['normal', 'transfer.broadcast', 1],
      ['duplicate', 'transfer.broadcast', 1],
      ['integer-wallet', 'transfer.rejected', 0],
      ['invalid', 'transfer.rejected', 0],
    ]);
    for (const sample of bitgo.filter((one) => one.sends === 1)) {
      const data = sample.jobs[0]!.data as { walletId: unknown; coin: string; travelRule?: unknown };
      expect(data.walletId).toMatch(/^[0-9a-f]{32}$/);
      expect(data.coin).toMatch(/^(t|ht)[a-z]+$/);
      expect(data.travelRule).toBeUndefined();
    }
    expect((bitgo[3]!.jobs[0]!.data as { walletId: unknown }).walletId).toBe(310);
  });

  it('fails a wrong outcome, a gap in versions and an event for a transfer it did not enqueue', () => {
    const events = good();
    events[5] = event('demo-test-invalid', 'transfer.blocked', 2);
    events.push(event('someone-else', 'transfer.broadcast', 1));
    expect(verifyRun(samples, events, oneSendEach).problems).toEqual([
      'demo-test-invalid: got transfer.blocked, expected transfer.rejected',
      'demo-test-invalid: transfer.blocked has version 2, expected 1',
      'someone-else: unexpected transfer.broadcast for a transfer the demo did not enqueue',
    ]);
  });
});
