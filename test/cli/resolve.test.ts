/**
 * `custody-worker resolve` as a real child process against the test Redis: an operator settling a
 * transfer left in `submitting` (a send whose outcome is unknown, or a runner that died mid-send), and
 * every refusal (wrong state, a live send lease, unknown or malformed sequenceId, bad options), each
 * checked against the events stream and the ledger record, not only the exit code.
 */
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SubmitPayload } from '../../packages/producer/src/payload.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, TransferState } from '../../src/ledger/ledger.ts';
import type { TransferView } from '../../src/ledger/transfer-view.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { killAllClis, runCli, type CliResult } from '../helpers/cli-process.ts';
import { countBy, startHarness, versionProblems, type Harness } from '../helpers/harness.ts';
import { workerCustodyEnv } from '../../src/simulator/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { strandTransfer, type Strand } from '../helpers/strand.ts';
import { simulatorClient } from '../helpers/sim-client.ts';
import { until } from '../helpers/wait.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const REASON = 'found in the provider console, ticket OPS-4711';
const THIRTY_DAYS_MS = 30 * 24 * 3600 * 1000;

/** Shared by the tests that strand transfers by hand: no worker, so nothing races the operator. */
let h: Harness;
let ledger: Ledger;

function ledgerOf(harness: Harness): Ledger {
  return new Ledger(harness.redis, createKeys(harness.prefix, harness.config.queue.eventsStream), {
    eventsMaxLen: harness.config.queue.eventsMaxLen,
    retentionMs: harness.config.retention.transfersMs,
  });
}

/** Only what `resolve` needs: where Redis, the queues and the stream are, and the provider it checks with. */
function cliEnv(harness: Harness = h): Record<string, string> {
  return { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: harness.prefix, ...workerCustodyEnv(harness.sim), CUSTODY_TIMEOUT: '2s' };
}

function cli(args: string[], harness: Harness = h): Promise<CliResult> {
  return runCli(args, { env: cliEnv(harness) });
}

function jsonError(result: CliResult): { code: string; message: string; details?: Record<string, unknown> } {
  return (JSON.parse(result.stderr) as { error: { code: string; message: string; details?: Record<string, unknown> } }).error;
}

/**
 * A stranded transfer whose send the provider did accept (the dead runner's request got through):
 * sent to the simulator under the same payload, its txid shown. Returns the sequenceId and that txid.
 */
async function strandSent(options: Strand = {}): Promise<{ sequenceId: string; txid: string }> {
  const payload = samplePayload();
  const sequenceId = await strand({ ...options, payload: payload as SubmitPayload });
  const client = simulatorClient(h.sim);
  try {
    await client.sendTransaction(
      { walletId: payload.walletId, coin: payload.coin },
      { txHex: payload.txHex, halfSigned: payload.halfSigned },
    );
  } finally {
    await client.close();
  }
  h.sim.setTxid(sequenceId);
  return { sequenceId, txid: h.sim.transfer(sequenceId)!.txid };
}

/** Leaves a transfer as a runner that died mid-send would (test/helpers/strand.ts), on this file's ledger. */
function strand(options: Strand = {}): Promise<string> {
  return strandTransfer(ledger, options);
}

function sum(counts: Record<string, number> | undefined): number {
  return Object.values(counts ?? {}).reduce((a, b) => a + b, 0);
}

/** The audit entries of one transfer, oldest first. */
async function auditOf(sequenceId: string, harness: Harness = h): Promise<Array<Record<string, string>>> {
  const raw = await harness.redis.xrange(`${harness.prefix}:audit`, '-', '+');
  return raw
    .map(([, flat]) => Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!])))
    .filter((entry) => entry.sequenceId === sequenceId);
}

async function trackJob(harness: Harness, sequenceId: string) {
  const queue = new Queue(QueueName.TRACK, { connection: harness.redis, prefix: harness.prefix });
  try {
    const job = await queue.getJob(trackJobId(sequenceId));
    return job ? { name: job.name, data: job.data as unknown } : undefined;
  } finally {
    await queue.close();
  }
}

beforeAll(async () => {
  h = await startHarness({ name: 'resolve', worker: false });
  ledger = ledgerOf(h);
});

afterEach(async () => {
  await killAllClis();
});

afterAll(async () => {
  await killAllClis();
  await h?.close();
});

// Each describe's time-out: its longest test's CLI runs one after another (test/helpers/timeouts.ts), and
// for the first, the worker's own attempts (20 s) and its tracking to broadcast (15 s).
describe('resolve --as submitted', { timeout: processesTimeout(3, 60_000) }, () => {
  it('settles a send the worker left unresolved: one transfer.submitted by the operator, the tracker added, then broadcast once the provider shows a txid', async () => {
    // Every send is processed upstream and its answer lost; lookups never see it: the worker cannot settle it.
    const w = await startHarness({ name: 'resolve-live', env: { SUBMIT_ATTEMPTS: '2', UNRESOLVED_AFTER: '300' } });
    try {
      w.sim.setFault('sendTransaction', { probability: 1, kinds: ['timeout'] });
      w.sim.updateSettings({ visibleAfterMs: 3_600_000 });
      const wLedger = ledgerOf(w);
      const payload = samplePayload();
      const sequenceId = payload.halfSigned.sequenceId;
      await w.producer.submit(payload);
      await until(
        'transfer.unresolved',
        20_000,
        async () => {
          const record = await wLedger.get(sequenceId);
          return record?.unresolvedAt !== undefined && record.leaseOwner === undefined ? record : undefined;
        },
        50,
      );
      // The worker stops, so only the operator acts on the transfer from here.
      await w.app!.close();
      w.app = undefined;
      expect(w.sim.stats().sends[sequenceId]?.accepted).toBe(1);

      const status = await cli(['status', sequenceId, '--json'], w);
      expect(status.code).toBe(0);
      const view = JSON.parse(status.stdout) as TransferView;
      expect(view.state).toBe('submitting');
      expect(view.sendOutcomeUnknownSince).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(view.unresolvedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(Date.parse(view.unresolvedAt!)).toBeGreaterThanOrEqual(Date.parse(view.sendOutcomeUnknownSince!) + 300);
      expect(view.leaseUntil).toBeNull();
      const statusText = await cli(['status', sequenceId], w);
      expect(statusText.stdout).toMatch(/^outcome unknown since +\d{4}-.*may have gone out/m);
      expect(statusText.stdout).toMatch(/^unresolved +\d{4}-.*transfer\.unresolved published/m);
      const before = await w.eventsOf(sequenceId);
      expect(before.map((event) => event.event)).toEqual(['transfer.unresolved']);

      // The provider shows the txid; the operator resolves with it, and the CLI checks it with the provider.
      w.sim.setFault('sendTransaction', null);
      w.sim.setTxid(sequenceId);
      const txid = w.sim.transfer(sequenceId)!.txid;
      const result = await cli(['resolve', sequenceId, '--as', 'submitted', '--txid', txid, '--reason', REASON, '--json'], w);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({
        sequenceId,
        resolvedAs: 'submitted',
        version: 2,
        event: 'transfer.submitted',
        trackJobId: trackJobId(sequenceId),
        forced: false,
        checked: { finding: 'found', txid },
      });
      const after = await w.eventsOf(sequenceId);
      expect(after.map((event) => [event.event, event.version])).toEqual([
        ['transfer.unresolved', 1],
        ['transfer.submitted', 2],
      ]);
      expect(after[1]!.data).toEqual({ transfer: null, recoveredBy: 'operator', reason: REASON });
      expect(await trackJob(w, sequenceId)).toEqual({ name: QueueName.TRACK, data: { sequenceId } });
      const record = await wLedger.get(sequenceId);
      expect(record).toMatchObject({
        state: TransferState.SUBMITTED,
        leaseOwner: undefined,
        payload: undefined,
        lastError: undefined,
        txid,
      });
      expect(record!.match.transactionId).toBe((JSON.parse(result.stdout) as { checked: { transactionId: string } }).checked.transactionId);
      expect(record!.submittedAt).toBeGreaterThan(0);

      // A worker (back up) tracks the transfer to its txid.
      await w.startWorker();
      const outcome = await w.producer.waitForTerminal(sequenceId, 15_000);
      expect(outcome.event).toBe('transfer.broadcast');
      expect(outcome.version).toBe(3);
      const all = await w.eventsOf(sequenceId);
      expect(countBy(all, 'transfer.submitted').get(sequenceId)).toBe(1);
      expect(versionProblems(all)).toEqual([]);
      expect(w.sim.stats().sends[sequenceId]?.accepted).toBe(1);
    } finally {
      await w.close();
    }
  });

  it('settles with --force, without a txid and without asking the provider, audited as forced; a second resolve is refused and publishes nothing', async () => {
    const sequenceId = await strand();
    const requests = h.sim.requestCount();
    const first = await cli(['resolve', sequenceId, '--as', 'submitted', '--force', '--reason', REASON]);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^resolved as +submitted$/m);
    expect(first.stdout).toMatch(/^provider check +skipped \(--force\)/m);
    expect(h.sim.requestCount()).toBe(requests);
    expect(await auditOf(sequenceId)).toMatchObject([{ action: 'resolve', outcome: 'resolved', forced: 'true' }]);
    expect(first.stdout).toMatch(/^event +transfer\.submitted version 1 /m);
    expect(first.stdout).toContain(`job ${trackJobId(sequenceId)} added`);
    expect(await trackJob(h, sequenceId)).toEqual({ name: QueueName.TRACK, data: { sequenceId } });

    const again = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON, '--json']);
    expect(again.code).toBe(4);
    expect(again.stdout).toBe('');
    expect(jsonError(again)).toMatchObject({ code: 'WRONG_STATE', details: { state: 'submitted' } });
    expect(jsonError(again).message).toContain('is submitted');

    const events = await h.eventsOf(sequenceId);
    expect(events.map((event) => [event.event, event.version])).toEqual([['transfer.submitted', 1]]);
    expect(events[0]!.data).toEqual({ transfer: null, recoveredBy: 'operator', reason: REASON });
    expect((await ledger.get(sequenceId))?.state).toBe(TransferState.SUBMITTED);
  });
});

describe('resolve --as failed', { timeout: processesTimeout(2) }, () => {
  it('fails an unresolved transfer although a send may have gone out: one transfer.failed OPERATOR_RESOLVED with the reason, final', async () => {
    const sequenceId = await strand({ unresolved: true });
    expect((await ledger.get(sequenceId))?.unknownSince).toBeGreaterThan(0);
    const lookups = h.sim.stats().requests.getTransfer;
    const result = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON, '--json']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({
      sequenceId,
      resolvedAs: 'failed',
      version: 2,
      event: 'transfer.failed',
      forced: false,
      checked: { finding: 'absent' },
    });
    // Looked up by the CLI itself, under its own lease, before it failed the transfer.
    expect(sum(h.sim.stats().requests.getTransfer)).toBeGreaterThan(sum(lookups));
    expect(JSON.parse(result.stdout)).not.toHaveProperty('trackJobId');

    const events = await h.eventsOf(sequenceId);
    expect(events.map((event) => [event.event, event.version])).toEqual([
      ['transfer.unresolved', 1],
      ['transfer.failed', 2],
    ]);
    expect(events[1]!.data).toEqual({ code: 'OPERATOR_RESOLVED', httpStatus: null, message: REASON, attempts: 1, resolvedBy: 'operator' });
    const record = await ledger.get(sequenceId);
    expect(record).toMatchObject({ state: TransferState.FAILED, payload: undefined, leaseOwner: undefined });
    // Kept for RETENTION like any terminal record (the CLI passes the worker's retention, default 30d).
    const ttl = await h.redis.pttl(createKeys(h.prefix, h.config.queue.eventsStream).transfer(sequenceId));
    expect(ttl).toBeGreaterThan(THIRTY_DAYS_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(THIRTY_DAYS_MS);
    expect(await trackJob(h, sequenceId)).toBeUndefined();

    // Terminal: neither outcome can be recorded again.
    const again = await cli(['resolve', sequenceId, '--as', 'submitted', '--force', '--reason', REASON]);
    expect(again.code).toBe(4);
    expect(again.stderr).toMatch(/transfer \S+ is failed, not submitting: nothing to resolve \(WRONG_STATE\)/);
    expect((await h.eventsOf(sequenceId)).length).toBe(2);
  });
});

describe('the provider check', { timeout: processesTimeout(3) }, () => {
  it('refuses --as submitted with a txid the provider does not show for the transfer, audited, the ledger untouched; the right txid is accepted', async () => {
    const { sequenceId, txid } = await strandSent();
    const before = await ledger.get(sequenceId);
    const wrong = await cli(['resolve', sequenceId, '--as', 'submitted', '--txid', `0x${'ab'.repeat(32)}`, '--reason', REASON, '--json']);
    expect(wrong.code).toBe(4);
    expect(wrong.stdout).toBe('');
    expect(jsonError(wrong)).toMatchObject({ code: 'PROVIDER_DISAGREES', details: { finding: 'absent' } });
    expect(await ledger.get(sequenceId)).toEqual(before);
    expect(await h.eventsOf(sequenceId)).toEqual([]);
    expect(await trackJob(h, sequenceId)).toBeUndefined();
    expect(await auditOf(sequenceId)).toMatchObject([{ action: 'resolve', outcome: 'provider-disagrees', forced: 'false' }]);

    const right = await cli(['resolve', sequenceId, '--as', 'submitted', '--txid', txid, '--reason', REASON, '--json']);
    expect(right.stderr).toBe('');
    expect(right.code).toBe(0);
    expect(JSON.parse(right.stdout)).toMatchObject({
      resolvedAs: 'submitted',
      event: 'transfer.submitted',
      checked: { finding: 'found', txid },
    });
    expect(await ledger.get(sequenceId)).toMatchObject({ state: TransferState.SUBMITTED, txid });
    expect((await auditOf(sequenceId)).map((entry) => entry.outcome)).toEqual(['provider-disagrees', 'resolved']);
  });

  it('refuses --as failed when the provider holds the transfer, gives the lease back and publishes nothing', async () => {
    const { sequenceId, txid } = await strandSent({ unresolved: true });
    const result = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON, '--json']);
    expect(result.code).toBe(4);
    expect(jsonError(result)).toMatchObject({ code: 'PROVIDER_FOUND', details: { txid } });
    const record = await ledger.get(sequenceId);
    expect(record).toMatchObject({ state: TransferState.SUBMITTING, leaseOwner: undefined, leaseUntil: 0 });
    expect((await h.eventsOf(sequenceId)).map((event) => event.event)).toEqual(['transfer.unresolved']);
    expect(await auditOf(sequenceId)).toMatchObject([{ action: 'resolve', outcome: 'provider-found', forced: 'false' }]);
  });

  it('refuses when the provider cannot be asked (every lookup answered 500), nothing decided', async () => {
    const sequenceId = await strand({ unresolved: true });
    const before = await ledger.get(sequenceId);
    h.sim.setFault('getTransfer', { probability: 1, kinds: ['5xx'] });
    try {
      const result = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON, '--json']);
      expect(result.code).toBe(4);
      expect(jsonError(result)).toMatchObject({ code: 'PROVIDER_UNREACHABLE' });
    } finally {
      h.sim.setFault('getTransfer', null);
    }
    expect(await ledger.get(sequenceId)).toMatchObject({ state: TransferState.SUBMITTING, leaseOwner: undefined, sends: before!.sends });
    expect(await auditOf(sequenceId)).toMatchObject([{ action: 'resolve', outcome: 'provider-unreachable' }]);
  });
});

describe('refusals', { timeout: processesTimeout(5) }, () => {
  it('refuses while a runner holds a live send lease, saying how long to wait, and changes nothing', async () => {
    // Ten minutes: longer than any CLI start, so the lease is still held when the resolves look.
    const sequenceId = await strand({ unresolved: true, liveLeaseMs: 600_000 });
    const before = await ledger.get(sequenceId);

    const status = await cli(['status', sequenceId, '--json']);
    const leaseUntil = (JSON.parse(status.stdout) as TransferView).leaseUntil;
    expect(leaseUntil).not.toBeNull();
    expect(Date.parse(leaseUntil!)).toBe(before!.leaseUntil);

    const lookups = sum(h.sim.stats().requests.getTransfer);
    const asked = Date.now();
    const [text, json] = await Promise.all([
      cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON]),
      cli(['resolve', sequenceId, '--as', 'submitted', '--txid', '0xfeed', '--reason', REASON, '--json']),
    ]);
    const answered = Date.now();
    // What was left of the lease, in whole seconds rounded up, when the CLI looked: after `asked`, before
    // `answered` (however long its start took on a busy machine).
    const left = (at: number) => Math.ceil((before!.leaseUntil! - at) / 1000);
    expect(text.code).toBe(4);
    expect(text.stdout).toBe('');
    const seconds = Number(/a runner is resolving transfer \S+ right now .*try again in (\d+) s/.exec(text.stderr)?.[1]);
    expect(seconds).toBeGreaterThanOrEqual(left(answered));
    expect(seconds).toBeLessThanOrEqual(left(asked));
    expect(json.code).toBe(4);
    expect(jsonError(json)).toMatchObject({ code: 'LEASE_HELD', details: { state: 'submitting' } });
    expect(jsonError(json).details!.retryAfterSeconds).toBeGreaterThanOrEqual(left(answered));
    expect(jsonError(json).details!.retryAfterSeconds).toBeLessThanOrEqual(left(asked));

    expect(await ledger.get(sequenceId)).toEqual(before);
    expect((await h.eventsOf(sequenceId)).map((event) => event.event)).toEqual(['transfer.unresolved']);
    expect(await trackJob(h, sequenceId)).toBeUndefined();
    // Nothing looked up while the runner's lease runs: the check comes after it ended.
    expect(sum(h.sim.stats().requests.getTransfer)).toBe(lookups);
    expect((await auditOf(sequenceId)).map((entry) => entry.outcome)).toEqual(['lease-held', 'lease-held']);
  });

  it('refuses a transfer that is not in submitting, naming its state', async () => {
    const sequenceId = await strand({ state: 'gated' });
    const result = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON]);
    expect(result.code).toBe(4);
    expect(result.stderr).toContain(`transfer ${sequenceId} is gated, not submitting`);
    expect((await ledger.get(sequenceId))?.state).toBe(TransferState.GATED);
    expect(await h.eventsOf(sequenceId)).toEqual([]);
  });

  it('exits 3 for an unknown sequenceId and 2 for a malformed one', async () => {
    const [unknown, unknownJson, malformed] = await Promise.all([
      cli(['resolve', 'no-such-transfer', '--as', 'failed', '--reason', REASON]),
      cli(['resolve', 'no-such-transfer', '--as', 'failed', '--reason', REASON, '--json']),
      cli(['resolve', '../x', '--as', 'failed', '--reason', REASON]),
    ]);
    expect(unknown.code).toBe(3);
    expect(unknown.stderr).toContain('no transfer with sequenceId no-such-transfer');
    expect(unknownJson.code).toBe(3);
    expect(jsonError(unknownJson).code).toBe('NOT_FOUND');
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('sequenceId must be');
    expect(await ledger.get('no-such-transfer')).toBeUndefined();
  });

  it('exits 2 without a usable --reason or --as, and changes nothing; a reason of exactly 500 characters is taken', async () => {
    const sequenceId = await strand();
    const before = await ledger.get(sequenceId);
    const bad: Array<[string[], RegExp]> = [
      [['--as', 'failed'], /--reason is required/],
      [['--as', 'failed', '--reason', '   '], /--reason must not be empty/],
      [['--as', 'failed', '--reason', 'x'.repeat(501)], /--reason must be at most 500 characters/],
      [['--as', 'failed', '--reason', 'two\nlines'], /--reason must be one line/],
      [['--reason', REASON], /--as is required/],
      [['--as', 'broadcast', '--reason', REASON], /--as must be submitted or failed/],
      [['--as', 'submitted', '--reason', REASON], /--as submitted needs --txid/],
      [['--as', 'submitted', '--txid', '../x', '--reason', REASON], /--txid must be one token/],
      [['--as', 'failed', '--txid', '0xfeed', '--reason', REASON], /--txid goes with --as submitted only/],
      [['--as', 'failed', '--reason', REASON, '--frobnicate'], /Unknown option/],
    ];
    // A few at a time: a dozen CLI processes at once can outlast a process's time-out on a busy machine.
    const results: CliResult[] = [];
    for (let i = 0; i < bad.length; i += 4) {
      results.push(...(await Promise.all(bad.slice(i, i + 4).map(([args]) => cli(['resolve', sequenceId, ...args])))));
    }
    results.forEach((result, i) => {
      expect(result.code, bad[i]![0].join(' ')).toBe(2);
      expect(result.stderr, bad[i]![0].join(' ')).toMatch(bad[i]![1]);
    });
    expect(await ledger.get(sequenceId)).toEqual(before);
    expect(await h.eventsOf(sequenceId)).toEqual([]);

    const reason = 'ä'.repeat(500);
    const ok = await cli(['resolve', sequenceId, '--as', 'failed', '--reason', reason]);
    expect(ok.code).toBe(0);
    expect((await h.eventsOf(sequenceId))[0]!.data).toMatchObject({ code: 'OPERATOR_RESOLVED', message: reason });
  });

  it('exits 78 naming RETENTION and EVENTS_MAXLEN when they are malformed, before touching the transfer', async () => {
    const sequenceId = await strand();
    const result = await runCli(['resolve', sequenceId, '--as', 'failed', '--reason', REASON, '--json'], {
      env: { ...cliEnv(), RETENTION: 'forever', EVENTS_MAXLEN: '10', QUEUE_PREFIX: 'bad prefix' },
    });
    expect(result.code).toBe(78);
    const error = JSON.parse(result.stderr) as { error: { code: string; issues: Array<{ path: string }> } };
    expect(error.error.code).toBe('CONFIG');
    expect(error.error.issues.map((issue) => issue.path).sort()).toEqual(['EVENTS_MAXLEN', 'QUEUE_PREFIX', 'RETENTION']);
    expect(result.stderr).not.toContain('forever');
    expect((await ledger.get(sequenceId))?.state).toBe(TransferState.SUBMITTING);
  });

  it('lists resolve and exit code 4 in the usage', async () => {
    const [usage, detail] = await Promise.all([cli(['help']), cli(['resolve', '--help'])]);
    expect(usage.stdout).toMatch(/^ {2}resolve <sequenceId> --as submitted\|failed \[--txid TXID\] \[--force\] --reason TEXT/m);
    expect(usage.stdout).toMatch(/^ {2}4 +refused/m);
    expect(detail.code).toBe(0);
    expect(detail.stdout).toContain('exit code 4');
  });
});
