/**
 * `custody-worker ledger` as a real child process against the test Redis, each test on a fresh
 * QUEUE_PREFIX: the epoch of an empty ledger (none), `init` creating it once, a loss declared the way
 * a worker declares it (the epoch key gone, `mismatch()` writing a new epoch with a recovery window)
 * seen by `status`, `accept-epoch` ending that window, and the refusals, each checked against what
 * Redis holds, not only the exit code.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerAcceptResult, EpochView, LedgerInitResult } from '../../src/cli/commands/ledger.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger } from '../../src/ledger/ledger.ts';
import { killAllClis, runCli, type CliResult } from '../helpers/cli-process.ts';
import { closeAllRedis, newRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const HOUR_MS = 3_600_000;

/** For looking at (and deleting) the epoch key directly. */
let redis: Redis;

function env(prefix: string, extra: Record<string, string> = {}): Record<string, string> {
  return { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: prefix, ...extra };
}

function cli(prefix: string, args: string[], extra: Record<string, string> = {}): Promise<CliResult> {
  return runCli(['ledger', ...args], { env: env(prefix, extra) });
}

async function json<T>(prefix: string, args: string[], extra: Record<string, string> = {}): Promise<T> {
  const result = await cli(prefix, [...args, '--json'], extra);
  expect(result.stderr, args.join(' ')).toBe('');
  expect(result.code, args.join(' ')).toBe(0);
  return JSON.parse(result.stdout) as T;
}

function jsonError(result: CliResult): { code: string; message: string } {
  return (JSON.parse(result.stderr) as { error: { code: string; message: string } }).error;
}

function epochKey(prefix: string): string {
  return createKeys(prefix, `${prefix}:transfer-events`).epoch;
}

/** A worker's view of the ledger: knows its epoch from start-up (LEDGER_INIT=auto creates it). */
function workerLedger(prefix: string): Ledger {
  return new Ledger(newRedis(), createKeys(prefix, `${prefix}:transfer-events`), {
    eventsMaxLen: 1_000,
    retentionMs: HOUR_MS,
    epoch: { init: 'auto', recoveryWindowMs: HOUR_MS },
  });
}

/** A worker knew epoch `previous`; Redis lost it; the worker declared the loss (new epoch, recovery window). */
async function simulateLoss(prefix: string): Promise<{ previous: string; current: string; recoveryUntil: number }> {
  const ledger = workerLedger(prefix);
  const started = await ledger.epoch.start();
  expect(started.id).toBeDefined();
  await redis.del(epochKey(prefix));
  const lost = await ledger.epoch.mismatch();
  expect(lost.id).toBeDefined();
  expect(lost.id).not.toBe(started.id);
  expect(lost.supersedes).toEqual([started.id]);
  return { previous: started.id!, current: lost.id!, recoveryUntil: lost.recoveryUntil };
}

beforeAll(() => {
  redis = newRedis();
});

afterEach(async () => {
  await killAllClis();
});

afterAll(async () => {
  await killAllClis();
  await closeAllRedis();
});

// Each describe's time-out: its longest test's CLI runs one after another (test/helpers/timeouts.ts).
describe('ledger status', { timeout: processesTimeout(2) }, () => {
  it('says none on a ledger that was never initialised, and writes nothing', async () => {
    const prefix = uniquePrefix('cli-ledger-none');
    const text = await cli(prefix, ['status']);
    expect(text.code).toBe(0);
    expect(text.stderr).toBe('');
    expect(text.stdout).toMatch(/^epoch +none/m);
    expect(text.stdout).toMatch(/^recovery until +none/m);

    const view = await json<EpochView>(prefix, ['status']);
    expect(view).toMatchObject({ epoch: null, createdAt: null, recoveryUntil: null, recoveryActive: false, supersedes: [] });
    expect(Number.isNaN(Date.parse(view.now))).toBe(false);
    expect(await redis.exists(epochKey(prefix))).toBe(0);
  });
});

describe('ledger init', { timeout: processesTimeout(4) }, () => {
  it('creates the first epoch, and a second init reports the existing one unchanged', async () => {
    const prefix = uniquePrefix('cli-ledger-init');
    const first = await json<LedgerInitResult>(prefix, ['init'], { LEDGER_INIT: 'manual' });
    expect(first.created).toBe(true);
    expect(first.epoch).toMatch(/^[0-9a-f]{12}$/);
    expect(first).toMatchObject({ recoveryUntil: null, recoveryActive: false, supersedes: [] });
    expect(first.createdAt).toBe(first.now);
    expect(await redis.hget(epochKey(prefix), 'id')).toBe(first.epoch);

    const second = await cli(prefix, ['init'], { LEDGER_INIT: 'manual' });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain(`no: the ledger already has epoch ${first.epoch} (unchanged)`);
    const third = await json<LedgerInitResult>(prefix, ['init']);
    expect(third).toMatchObject({ created: false, epoch: first.epoch, createdAt: first.createdAt });

    const status = await json<EpochView>(prefix, ['status']);
    expect(status).toMatchObject({ epoch: first.epoch, createdAt: first.createdAt, recoveryActive: false });
  });

  it('says in text that it created the epoch', async () => {
    const prefix = uniquePrefix('cli-ledger-init-text');
    const result = await cli(prefix, ['init']);
    expect(result.code).toBe(0);
    const id = await redis.hget(epochKey(prefix), 'id');
    expect(result.stdout).toContain(`yes: created epoch ${id}`);
  });
});

describe('after the ledger was lost', { timeout: processesTimeout(6) }, () => {
  it('init --after-loss declares it: a new epoch superseding the one the ledger holds, with a recovery window', async () => {
    const prefix = uniquePrefix('cli-ledger-after-loss');
    // On an empty Redis (every process restarted onto it): a first epoch, but with the window open.
    const empty = await json<LedgerInitResult>(prefix, ['init', '--after-loss'], { LEDGER_INIT: 'manual', LEDGER_RECOVERY_WINDOW: '2h' });
    expect(empty).toMatchObject({ created: true, afterLoss: true, recoveryActive: true, supersedes: [] });
    expect(Date.parse(empty.recoveryUntil!) - Date.parse(empty.now)).toBe(2 * HOUR_MS);
    // On a ledger that has an epoch (a worker with LEDGER_INIT=auto initialised the older copy).
    const again = await json<LedgerInitResult>(prefix, ['init', '--after-loss']);
    expect(again.epoch).not.toBe(empty.epoch);
    expect(again).toMatchObject({ created: true, afterLoss: true, recoveryActive: true, supersedes: [empty.epoch] });
    expect(await redis.hget(epochKey(prefix), 'id')).toBe(again.epoch);
    const text = await cli(prefix, ['init', '--after-loss']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/after a loss: created epoch [0-9a-f]{12}; every transfer is looked up before its first send until /);
  });

  it('init takes --fresh or --after-loss, not both, and neither with another subcommand', async () => {
    const prefix = uniquePrefix('cli-ledger-init-flags');
    expect((await cli(prefix, ['init', '--fresh', '--after-loss'])).code).toBe(2);
    expect((await cli(prefix, ['status', '--after-loss'])).code).toBe(2);
    expect(await redis.exists(epochKey(prefix))).toBe(0);
    expect(await json<LedgerInitResult>(prefix, ['init', '--fresh'])).toMatchObject({
      created: true,
      afterLoss: false,
      recoveryActive: false,
    });
  });

  it('status shows the recovery window open and the epoch it supersedes; accept-epoch ends it', async () => {
    const prefix = uniquePrefix('cli-ledger-lost');
    const loss = await simulateLoss(prefix);

    const text = await cli(prefix, ['status']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^epoch +${loss.current}$`, 'm'));
    expect(text.stdout).toMatch(/^recovery active +yes/m);
    expect(text.stdout).toMatch(new RegExp(`^supersedes +${loss.previous}$`, 'm'));

    const during = await json<EpochView>(prefix, ['status']);
    expect(during).toMatchObject({
      epoch: loss.current,
      recoveryUntil: new Date(loss.recoveryUntil).toISOString(),
      recoveryActive: true,
      supersedes: [loss.previous],
    });
    expect(Date.parse(during.recoveryUntil!)).toBeGreaterThan(Date.parse(during.now));

    const accepted = await json<LedgerAcceptResult>(prefix, ['accept-epoch']);
    expect(accepted).toMatchObject({
      ended: true,
      previousRecoveryUntil: during.recoveryUntil,
      epoch: loss.current,
      recoveryUntil: null,
      recoveryActive: false,
      supersedes: [loss.previous],
    });
    const stored = await redis.hgetall(epochKey(prefix));
    expect(stored).toMatchObject({ id: loss.current, recoveryUntil: '0' });
    expect(Number(stored.acceptedAt)).toBeGreaterThan(0);

    const after = await cli(prefix, ['status']);
    expect(after.code).toBe(0);
    expect(after.stdout).toMatch(/^recovery active +no$/m);
    expect(after.stdout).toMatch(/^recovery until +none$/m);
    expect(await json<EpochView>(prefix, ['status'])).toMatchObject({
      epoch: loss.current,
      recoveryActive: false,
      supersedes: [loss.previous],
    });

    // Again: nothing left to end, still exit 0.
    const again = await cli(prefix, ['accept-epoch']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('no recovery window was open');
  });

  it('a worker that still knows the epoch adopts the window the CLI ended', async () => {
    const prefix = uniquePrefix('cli-ledger-adopt');
    const loss = await simulateLoss(prefix);
    const other = workerLedger(prefix);
    expect((await other.epoch.start()).recoveryUntil).toBe(loss.recoveryUntil);
    expect((await cli(prefix, ['accept-epoch'])).code).toBe(0);
    const state = await other.epoch.refresh();
    expect(state).toMatchObject({ id: loss.current, recoveryUntil: 0 });
  });
});

describe('refusals', { timeout: processesTimeout(2) }, () => {
  it('accept-epoch without an epoch exits 4 (NO_EPOCH) and writes nothing', async () => {
    const prefix = uniquePrefix('cli-ledger-noepoch');
    const result = await cli(prefix, ['accept-epoch', '--json']);
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('');
    const error = jsonError(result);
    expect(error.code).toBe('NO_EPOCH');
    expect(error.message).toContain('ledger init');
    expect(await redis.exists(epochKey(prefix))).toBe(0);

    const text = await cli(prefix, ['accept-epoch']);
    expect(text.code).toBe(4);
    expect(text.stderr).toMatch(/^error: the ledger has no epoch.*\(NO_EPOCH\)$/m);
  });

  it('an unknown, missing or extra subcommand is a usage error (exit 2) before any configuration is needed', async () => {
    const cases = [['frobnicate'], [], ['status', 'extra'], ['status', '--bogus']];
    const results = await Promise.all(cases.map((args) => runCli(['ledger', ...args], { env: {} })));
    results.forEach((result, i) => {
      expect(result.code, cases[i]!.join(' ')).toBe(2);
      expect(result.stdout, cases[i]!.join(' ')).toBe('');
      expect(result.stderr, cases[i]!.join(' ')).toMatch(/^error: /);
    });
    expect(results[0]!.stderr).toContain('unknown ledger subcommand "frobnicate"');
    expect(results[1]!.stderr).toContain('missing <subcommand>');
    const json = await runCli(['ledger', 'frobnicate', '--json'], { env: {} });
    expect(json.code).toBe(2);
    expect(jsonError(json).code).toBe('USAGE');
  });

  it('exits 78 naming LEDGER_INIT and LEDGER_RECOVERY_WINDOW when they are malformed, never their values', async () => {
    const prefix = uniquePrefix('cli-ledger-config');
    const result = await cli(prefix, ['init', '--json'], { LEDGER_INIT: 'sometimes', LEDGER_RECOVERY_WINDOW: 'forever' });
    expect(result.code).toBe(78);
    const error = JSON.parse(result.stderr) as { error: { code: string; issues: Array<{ path: string }> } };
    expect(error.error.code).toBe('CONFIG');
    expect(error.error.issues.map((issue) => issue.path).sort()).toEqual(['LEDGER_INIT', 'LEDGER_RECOVERY_WINDOW']);
    expect(result.stderr).not.toContain('sometimes');
    expect(result.stderr).not.toContain('forever');
    expect(await redis.exists(epochKey(prefix))).toBe(0);
  });
});

describe('usage', { timeout: processesTimeout(1) }, () => {
  it('lists ledger and its subcommands in the usage and in help ledger', async () => {
    const [usage, detail, flag] = await Promise.all([
      runCli(['help'], { env: {} }),
      runCli(['help', 'ledger'], { env: {} }),
      runCli(['ledger', '--help'], { env: {} }),
    ]);
    expect(usage.stdout).toMatch(/^ {2}ledger status\|init\|accept-epoch +\S/m);
    expect(usage.stdout).toMatch(/^ {6}\(ledger accept-epoch\)/m);
    for (const result of [detail, flag]) {
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('Usage: custody-worker ledger status|init|accept-epoch');
      for (const sub of ['status', 'init', 'accept-epoch']) expect(result.stdout).toMatch(new RegExp(`^ {2}${sub} {2,}`, 'm'));
      expect(result.stdout).toContain('LEDGER_RECOVERY_WINDOW');
    }
  });
});
