/**
 * The operator/producer CLI as a real child process (`node src/cli/main.ts`) against the test Redis,
 * a real custody simulator and a real in-process worker: each command, its --json output parsed back,
 * its exit codes, and what it must never print (secrets, the person in raw.user, originator data).
 */
import { createServer } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TransferEvent } from '../../packages/producer/src/events.ts';
import type { TransferView } from '../../src/ledger/transfer-view.ts';
import { QueueName } from '../../src/queues/names.ts';
import type { Transaction, WalletTransaction } from '../../src/custody/wallet-service/schemas.ts';
import { killAllClis, runCli, spawnCli, type CliResult } from '../helpers/cli-process.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { dataOf } from '../helpers/json-schemas.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { newRedis, closeAllRedis, testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

/** Text that must never reach the CLI's output: the simulator's raw.user and travel-rule originator. */
const PERSONAL = [/jane\.doe@example\.com/i, /phoneNumber/, /displayName/, /Jane Doe/, /C01X00T47/, /Invalidenstrasse/];

/** Every run of this file, so the last test can check that none printed a secret or a person. */
const runs: CliResult[] = [];

let h: Harness;
/** A transfer the worker has taken to broadcast, shared by the status, events and upstream tests. */
let done: { sequenceId: string; txid: string; walletId: number; coin: string };
let tmp: string;

async function cli(args: string[], env: Record<string, string>, input?: string): Promise<CliResult> {
  const result = await runCli(args, input === undefined ? { env } : { env, input });
  runs.push(result);
  return result;
}

function queueEnv(prefix: string): Record<string, string> {
  return { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: prefix };
}

function jsonLines(text: string): unknown[] {
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as unknown);
}

beforeAll(async () => {
  h = await startHarness({ name: 'cli' });
  tmp = await mkdtemp(join(tmpdir(), 'cli-test-'));
  const payload = samplePayload();
  await h.producer.submit(payload);
  const broadcast = await h.producer.waitForTerminal(payload.halfSigned.sequenceId, 15_000);
  expect(broadcast.event).toBe('transfer.broadcast');
  done = { sequenceId: payload.halfSigned.sequenceId, txid: dataOf(broadcast, 'transfer.broadcast').txid, walletId: 310, coin: 'eth' };
});

afterEach(async () => {
  await killAllClis();
});

afterAll(async () => {
  await killAllClis();
  await closeAllRedis();
  await h?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

// Each describe's time-out: its longest test's CLI runs one after another (test/helpers/timeouts.ts).
describe('usage', { timeout: processesTimeout(3) }, () => {
  it('prints the usage with every command and the exit codes for help, --help and no arguments', async () => {
    const results = await Promise.all([cli([], {}), cli(['help'], {}), cli(['--help'], {})]);
    for (const result of results) {
      expect(result.code).toBe(0);
      expect(result.stderr).toBe('');
      for (const command of ['enqueue', 'status', 'events', 'get-transfer', 'wallet-transaction', 'travel-rule']) {
        expect(result.stdout).toContain(command);
      }
      expect(result.stdout).toMatch(/Exit codes:[\s\S]*\b2\b[\s\S]*\b3\b[\s\S]*\b78\b/);
    }
    const detail = await cli(['status', '--help'], {});
    expect(detail.code).toBe(0);
    expect(detail.stdout).toContain('Usage: custody-worker status <sequenceId>');
    expect((await cli(['help', 'events'], {})).stdout).toContain('--follow');
  });

  it('refuses an unknown command with the usage on stderr and exit code 2', async () => {
    const result = await cli(['frobnicate'], {});
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('unknown command "frobnicate"');
    expect(result.stderr).toContain('Exit codes:');
    const json = await cli(['frobnicate', '--json'], {});
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({ error: { code: 'USAGE', message: 'unknown command "frobnicate"' } });
  });

  it('refuses unknown options, missing and extra arguments with exit code 2, before any configuration is needed', async () => {
    const cases: string[][] = [
      ['status'],
      ['status', 'a', 'b'],
      ['events', '--bogus'],
      ['events', '--count', 'x'],
      ['events', '--from', '$'],
      ['enqueue', 'a.json', 'b.json'],
      ['get-transfer', '--coin', 'eth', '--txid', 'abc'],
      ['get-transfer', '--wallet', '310', '--txid', 'abc'],
      ['get-transfer', '--wallet', '310', '--coin', 'eth'],
      ['get-transfer', '--wallet', '310', '--coin', 'eth', '--txid', 'abc', '--sequence-id', 'abc'],
      ['wallet-transaction', '--wallet', '310'],
      ['wallet-transaction', '--txid', 'abc'],
      ['travel-rule', '--wallet', '310'],
    ];
    const results = await Promise.all(cases.map((args) => cli(args, {})));
    results.forEach((result, i) => {
      expect(result.code, cases[i]!.join(' ')).toBe(2);
      expect(result.stdout, cases[i]!.join(' ')).toBe('');
      expect(result.stderr, cases[i]!.join(' ')).toMatch(/^error: /);
    });
    expect(results[0]!.stderr).toContain('missing <sequenceId>');
    expect(results[9]!.stderr).toContain('exactly one of --sequence-id and --txid');
    expect(results[12]!.stderr).toContain('upstream API 4.4');
  });
});

describe('enqueue', { timeout: processesTimeout(2) }, () => {
  let prefix: string;
  let queue: Queue;
  beforeAll(() => {
    // A queue no worker reads: what enqueue added stays there to be looked at.
    prefix = uniquePrefix('cli-enqueue');
    queue = new Queue(QueueName.SUBMIT, { connection: newRedis(), prefix });
  });
  afterAll(async () => {
    await queue.close();
  });

  async function totalJobs(): Promise<number> {
    return Object.values(await queue.getJobCounts()).reduce((sum, n) => sum + n, 0);
  }

  it('enqueues a job from a file and prints its id, transfer-<sequenceId>', async () => {
    const payload = samplePayload({ walletId: '0310' });
    const file = join(tmp, 'job.json');
    await writeFile(file, JSON.stringify(payload));
    const result = await cli(['enqueue', file], queueEnv(prefix));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`transfer-${payload.halfSigned.sequenceId}\n`);
    const job = await queue.getJob(`transfer-${payload.halfSigned.sequenceId}`);
    expect(job?.name).toBe(QueueName.SUBMIT);
    expect(await job!.getState()).toBe('waiting');
    // Normalised by the producer's schema: a string of digits becomes the number.
    expect(job!.data).toEqual({ ...payload, walletId: 310 });
  });

  it('enqueues a job from stdin, with no file and with "-", and prints JSON with --json', async () => {
    const first = samplePayload();
    const second = samplePayload();
    const [a, b] = await Promise.all([
      cli(['enqueue', '--json'], queueEnv(prefix), JSON.stringify(first)),
      cli(['enqueue', '-'], queueEnv(prefix), JSON.stringify(second)),
    ]);
    expect(a.code).toBe(0);
    expect(JSON.parse(a.stdout)).toEqual({
      jobId: `transfer-${first.halfSigned.sequenceId}`,
      sequenceId: first.halfSigned.sequenceId,
      queue: 'submit-transaction',
    });
    expect(b.code).toBe(0);
    expect(b.stdout).toBe(`transfer-${second.halfSigned.sequenceId}\n`);
    for (const payload of [first, second]) {
      const job = await queue.getJob(`transfer-${payload.halfSigned.sequenceId}`);
      expect(job?.data.halfSigned).toEqual(payload.halfSigned);
    }
  });

  it('refuses text that is not JSON with exit code 1 and enqueues nothing', async () => {
    const before = await totalJobs();
    const result = await cli(['enqueue'], queueEnv(prefix), '{"walletId": 310,');
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error: input is not JSON: .*\(INVALID_JSON\)/);
    expect(await totalJobs()).toBe(before);
  });

  it('refuses an invalid payload naming every issue, with exit code 1, and enqueues nothing', async () => {
    const before = await totalJobs();
    const payload = { ...samplePayload({ walletId: -4, coin: 'ETH' }), txHex: 'not hex' };
    const result = await cli(['enqueue'], queueEnv(prefix), JSON.stringify(payload));
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('(INVALID_PAYLOAD)');
    expect(result.stderr).toMatch(/^ {2}walletId: \S/m);
    expect(result.stderr).toMatch(/^ {2}coin: must be 1-32 of a-z 0-9/m);
    expect(result.stderr).toMatch(/^ {2}txHex: must be hex/m);

    const missing = await cli(['enqueue', '--json'], queueEnv(prefix), JSON.stringify({ walletId: 310, coin: 'eth', halfSigned: {} }));
    expect(missing.code).toBe(1);
    const error = (JSON.parse(missing.stderr) as { error: { code: string; issues: Array<{ path: string }> } }).error;
    expect(error.code).toBe('INVALID_PAYLOAD');
    expect(error.issues.map((issue) => issue.path).sort()).toEqual([
      'halfSigned.sequenceId',
      'halfSigned.txBase64',
      'halfSigned.txHex',
      'txHex',
    ]);

    expect(await totalJobs()).toBe(before);
    expect(await queue.getJob(payload.halfSigned.sequenceId)).toBeUndefined();
  });

  it('refuses a file that cannot be read with exit code 1', async () => {
    const result = await cli(['enqueue', join(tmp, 'no-such-file.json')], queueEnv(prefix));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('ENOENT');
  });
});

describe('status', { timeout: processesTimeout(1) }, () => {
  it("shows a broadcast transfer's state, attempts, txid, gate decision and events", async () => {
    const result = await cli(['status', done.sequenceId], h.env);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^state +broadcast$/m);
    expect(result.stdout).toMatch(/^attempts +1 send request/m);
    expect(result.stdout).toMatch(new RegExp(`^txid +${done.txid}$`, 'm'));
    expect(result.stdout).toMatch(/^travel rule +passed \(rule does not apply/m);
    expect(result.stdout).toContain(`transfer.submitted ${done.sequenceId}`);
    expect(result.stdout).toContain(`transfer.broadcast ${done.sequenceId}`);
  });

  it('prints the same view as one JSON document with --json', async () => {
    const result = await cli(['status', done.sequenceId, '--json'], h.env);
    expect(result.code).toBe(0);
    const view = JSON.parse(result.stdout) as TransferView;
    expect(view).toMatchObject({
      sequenceId: done.sequenceId,
      state: 'broadcast',
      walletId: '310',
      coin: 'eth',
      attempts: 1,
      txid: done.txid,
      gate: { outcome: 'passed', applies: false },
      version: 2,
    });
    expect(view.events.map((event) => [event.event, event.version])).toEqual([
      ['transfer.submitted', 1],
      ['transfer.broadcast', 2],
    ]);
    // The submitted record travels without raw (contract v1.1: raw echoes our request and carries a person).
    const record = dataOf(view.events[0], 'transfer.submitted').transfer;
    expect(record?.sequenceId).toBe(done.sequenceId);
    expect(record).not.toHaveProperty('raw');
  });

  it('exits 3 for an unknown transfer and 2 for a malformed sequenceId', async () => {
    const [unknown, unknownJson, malformed] = await Promise.all([
      cli(['status', 'no-such-transfer'], h.env),
      cli(['status', 'no-such-transfer', '--json'], h.env),
      cli(['status', '../x'], h.env),
    ]);
    expect(unknown.code).toBe(3);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toContain('no transfer with sequenceId no-such-transfer');
    expect(unknownJson.code).toBe(3);
    expect(unknownJson.stdout).toBe('');
    expect(JSON.parse(unknownJson.stderr)).toMatchObject({ error: { code: 'NOT_FOUND' } });
    expect(malformed.code).toBe(2);
  });

  it('fails with exit code 1 and a Redis message when Redis does not answer', async () => {
    const port = await closedPort();
    const result = await cli(['status', done.sequenceId], { REDIS_URL: `redis://127.0.0.1:${port}`, QUEUE_PREFIX: h.prefix });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: redis: .*ECONNREFUSED.*\(REDIS_ERROR\)/);
  });
});

describe('events', { timeout: processesTimeout(3) }, () => {
  it('prints the stream one line per event, oldest first', async () => {
    const result = await cli(['events'], h.env);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    const submitted = lines.findIndex((line) => line.includes(`transfer.submitted ${done.sequenceId}`));
    const broadcast = lines.findIndex((line) => line.includes(`transfer.broadcast ${done.sequenceId}`));
    expect(submitted).toBeGreaterThanOrEqual(0);
    expect(broadcast).toBeGreaterThan(submitted);
    expect(lines[broadcast]).toContain(`txid ${done.txid}`);
  });

  it('prints one JSON object per line with --json, and pages with --count and --from', async () => {
    const all = jsonLines((await cli(['events', '--json'], h.env)).stdout) as TransferEvent[];
    const expected = await h.events();
    expect(all.length).toBeGreaterThanOrEqual(3);
    expect(all).toEqual(JSON.parse(JSON.stringify(expected.slice(0, all.length))));
    const mine = all.filter((event) => event.sequenceId === done.sequenceId);
    expect(mine.map((event) => event.event)).toEqual(['transfer.submitted', 'transfer.broadcast']);
    expect(dataOf(mine[1], 'transfer.broadcast').txid).toBe(done.txid);

    const first = jsonLines((await cli(['events', '--json', '--count', '1'], h.env)).stdout) as TransferEvent[];
    expect(first).toEqual([all[0]]);
    // --from is exclusive, like XREAD: resuming from the last id seen repeats nothing.
    const rest = jsonLines((await cli(['events', '--json', '--from', all[0]!.id], h.env)).stdout) as TransferEvent[];
    expect(rest.slice(0, all.length - 1)).toEqual(all.slice(1));
  });

  it('follows the stream: prints events that arrive after it started, then exits 0 on SIGTERM', async () => {
    const follower = spawnCli(['events', '--follow', '--json'], { env: h.env });
    await follower.waitFor('the following notice', (_, stderr) => stderr.includes('following '));
    const payload = samplePayload();
    const sequenceId = payload.halfSigned.sequenceId;
    await h.producer.submit(payload);
    await follower.waitFor('the broadcast event', (stdout) =>
      jsonLines(stdout).some(
        (event) => (event as TransferEvent).event === 'transfer.broadcast' && (event as TransferEvent).sequenceId === sequenceId,
      ),
    );
    expect(follower.child.kill('SIGTERM')).toBe(true);
    const result = await follower.exit();
    runs.push(result);
    expect(result).toMatchObject({ code: 0, signal: null });
    const events = jsonLines(result.stdout) as TransferEvent[];
    expect(events.filter((event) => event.sequenceId === sequenceId).map((event) => event.event)).toEqual([
      'transfer.submitted',
      'transfer.broadcast',
    ]);
    // Started at "$": nothing from before it started.
    expect(events.some((event) => event.sequenceId === done.sequenceId)).toBe(false);
  });

  it('stops following on SIGINT too', async () => {
    const follower = spawnCli(['events', '--follow'], { env: h.env });
    await follower.waitFor('the following notice', (_, stderr) => stderr.includes('following '));
    follower.child.kill('SIGINT');
    const result = await follower.exit();
    runs.push(result);
    expect(result).toMatchObject({ code: 0, signal: null, stdout: '' });
  });
});

describe('custody commands', { timeout: processesTimeout(2) }, () => {
  it('get-transfer by sequence id', async () => {
    const args = ['get-transfer', '--wallet', String(done.walletId), '--coin', done.coin, '--sequence-id', done.sequenceId];
    const [text, json] = await Promise.all([cli(args, h.env), cli([...args, '--json'], h.env)]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(done.txid);
    expect(json.code).toBe(0);
    const list = JSON.parse(json.stdout) as Transaction[];
    expect(list.find((tx) => tx.txid === done.txid)).toMatchObject({ type: 'send', wallet: done.walletId, coin: done.coin });
  });

  it('get-transfer by txid', async () => {
    const args = ['get-transfer', '--wallet', String(done.walletId), '--coin', done.coin, '--txid', done.txid];
    const [text, json] = await Promise.all([cli(args, h.env), cli([...args, '--json'], h.env)]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^ +txid +${done.txid}$`, 'm'));
    const list = JSON.parse(json.stdout) as Transaction[];
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ txid: done.txid, wallet: done.walletId });
    expect(list[0]!.valueString).toMatch(/^-?\d+\.\d{8}$/);
  });

  it('wallet-transaction, and exit code 3 when upstream answers 404', async () => {
    const args = ['wallet-transaction', '--wallet', String(done.walletId), '--txid', done.txid];
    const [text, json, missing] = await Promise.all([
      cli(args, h.env),
      cli([...args, '--json'], h.env),
      cli(['wallet-transaction', '--wallet', String(done.walletId), '--txid', '0xfeedface', '--json'], h.env),
    ]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^txid +${done.txid}$`, 'm'));
    expect(json.code).toBe(0);
    const record = JSON.parse(json.stdout) as WalletTransaction;
    expect(record).toMatchObject({ txid: done.txid, walletid: done.walletId, coin: done.coin });
    expect(missing.code).toBe(3);
    expect(missing.stdout).toBe('');
    expect(JSON.parse(missing.stderr)).toMatchObject({ error: { code: 'CUSTODY_NOT_FOUND', details: { httpStatus: 404 } } });
  });

  it('travel-rule: the setting and the decision, without the originator data', async () => {
    const [text, json] = await Promise.all([cli(['travel-rule'], h.env), cli(['travel-rule', '--json'], h.env)]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^travel rule +does not apply$/m);
    expect(JSON.parse(json.stdout)).toMatchObject({ applies: false, setting: { outgoingTxn: 0, mandatory: false, blockTxn: false } });
    expect(JSON.parse(json.stdout).setting).not.toHaveProperty('dataJson');

    const original = h.sim.settings().travelRule;
    h.sim.updateSettings({ travelRule: { outgoingTxn: 1, mandatory: true } });
    try {
      const applies = await cli(['travel-rule', '--json'], h.env);
      expect(JSON.parse(applies.stdout)).toMatchObject({ applies: true, setting: { outgoingTxn: 1, mandatory: true } });
    } finally {
      h.sim.updateSettings({ travelRule: { outgoingTxn: original.outgoingTxn, mandatory: original.mandatory } });
    }
  });

  it('reports an upstream failure by its code with exit code 1', async () => {
    h.sim.setFault('isEnabled', { sequence: ['5xx'] });
    try {
      const result = await cli(['travel-rule'], h.env);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr).toMatch(/^error: .*\(CUSTODY_UNAVAILABLE\)$/m);
      expect(result.stderr).toMatch(/^ {2}httpStatus: 5\d\d$/m);
    } finally {
      h.sim.setFault('isEnabled', null);
    }
  });

  it('refuses a malformed wallet id or txid with exit code 2 before any request reaches upstream', async () => {
    const before = h.sim.requestCount();
    const cases = [
      ['get-transfer', '--wallet', '../1', '--coin', 'eth', '--txid', done.txid],
      ['get-transfer', '--wallet', '310', '--coin', 'eth', '--txid', '../../admin'],
      ['get-transfer', '--wallet', '310', '--coin', 'ETH', '--txid', done.txid],
      ['wallet-transaction', '--wallet', '../1', '--txid', done.txid],
      ['wallet-transaction', '--wallet', '1/../2', '--txid', done.txid],
      ['wallet-transaction', '--wallet', '310', '--txid', '../sendTransaction'],
      ['wallet-transaction', '--wallet', '310', '--txid', 'a/b'],
    ];
    const results = await Promise.all(cases.map((args) => cli(args, h.env)));
    results.forEach((result, i) => {
      expect(result.code, cases[i]!.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
    });
    expect(results[0]!.stderr).toContain('--wallet must be a wallet id');
    expect(results[5]!.stderr).toContain('--txid must be one token');
    expect(h.sim.requestCount()).toBe(before);
  });

  it('exits 78 naming each missing CUSTODY_* variable, without printing the secret', async () => {
    const before = h.sim.requestCount();
    const secret = 'cli-test-secret-4f9a1c';
    const env = { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix, CUSTODY_CLIENT_ID: 'someone', CUSTODY_CLIENT_SECRET: secret };
    const [text, json] = await Promise.all([
      cli(['travel-rule'], env),
      cli(['wallet-transaction', '--wallet', '310', '--txid', done.txid, '--json'], env),
    ]);
    expect(text.code).toBe(78);
    expect(text.stdout).toBe('');
    for (const variable of ['CUSTODY_SDK_URL', 'CUSTODY_BASE_URL', 'CUSTODY_TOKEN_URL'])
      expect(text.stderr).toMatch(new RegExp(`^ {2}${variable}: `, 'm'));
    expect(text.stderr).not.toContain('CUSTODY_CLIENT_SECRET');
    expect(json.code).toBe(78);
    const error = (JSON.parse(json.stderr) as { error: { code: string; issues: Array<{ path: string }> } }).error;
    expect(error.code).toBe('CONFIG');
    expect(error.issues.map((issue) => issue.path)).toEqual(expect.arrayContaining(['CUSTODY_SDK_URL', 'CUSTODY_BASE_URL']));
    for (const result of [text, json]) expect(result.stdout + result.stderr).not.toContain(secret);
    expect(h.sim.requestCount()).toBe(before);
  });

  it('exits 78 for a malformed Redis setting of the queue commands, which need no CUSTODY_* variable', async () => {
    const result = await cli(['status', done.sequenceId], { REDIS_URL: 'http://127.0.0.1:1', QUEUE_PREFIX: h.prefix });
    expect(result.code).toBe(78);
    expect(result.stderr).toMatch(/^ {2}REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL$/m);
    expect(result.stderr).not.toContain('CUSTODY');
  });
});

describe('what is never printed', () => {
  it('no run of this file printed the client secret, a token or personal data', () => {
    expect(runs.length).toBeGreaterThan(30);
    for (const run of runs) {
      const text = run.stdout + run.stderr;
      expect(text).not.toContain(h.sim.clientSecret);
      expect(text).not.toContain(Buffer.from(`${h.sim.clientId}:${h.sim.clientSecret}`).toString('base64'));
      expect(text).not.toMatch(/Bearer [A-Za-z0-9._~+/-]{8,}/);
      for (const pattern of PERSONAL) expect(text).not.toMatch(pattern);
    }
  });
});

/** A loopback port nobody listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
