/**
 * Every operator action, allowed or refused, from the CLI or over HTTP, leaves exactly one entry on the
 * audit stream `<QUEUE_PREFIX>:audit` with the contract's fields (docs/contract.md, "Operator console
 * and audit"), and the stream is trimmed by age (AUDIT_RETENTION), never by count. The CLI runs as a
 * real child process; HTTP through the real server; the worker against the simulator.
 */
import { userInfo } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keySlot } from '../../packages/producer/src/redis-slot.ts';
import { loadLedgerConfig } from '../../src/config/config.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { TransferState } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import { cliOperations } from '../../src/cli/operator.ts';
import { cliLedger } from '../../src/cli/redis-run.ts';
import { AuditLog, type Actor, type AuditEntry } from '../../src/operations/audit.ts';
import { ForbiddenError } from '../../src/operations/errors.ts';
import { workerCustodyEnv } from '../../src/simulator/index.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { killAllClis, runCli, type CliResult } from '../helpers/cli-process.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { testRedisUrl, uniquePrefix } from '../helpers/redis.ts';
import { strandTransfer } from '../helpers/strand.ts';
import { processesTimeout } from '../helpers/timeouts.ts';
import { until } from '../helpers/wait.ts';

const REASON = 'duplicate of order A-1001, ticket OPS-77';
const USER = 'ops-desk';
const PASSWORD = 'audit-test-password';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let h: Harness;
let server: FastifyInstance;
let base: string;

beforeAll(async () => {
  h = await startHarness({ name: 'audit', env: { DASHBOARD_USER: USER, DASHBOARD_PASSWORD: PASSWORD } });
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  base = await server.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await killAllClis();
  await server?.close();
  await h?.close();
});

type Entry = AuditEntry & { id: string };

/** The audit stream of `prefix`, oldest first. */
async function auditEntries(prefix = h.prefix): Promise<Entry[]> {
  const raw = await h.redis.xrange(`${prefix}:audit`, '-', '+');
  return raw.map(([id, flat]) => {
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
    return { id, ...fields } as Entry;
  });
}

async function entriesOf(sequenceId: string): Promise<Entry[]> {
  return (await auditEntries()).filter((entry) => entry.sequenceId === sequenceId);
}

/** Redis's clock (ms): what `at` and the stream ids are stamped with. */
async function redisNow(): Promise<number> {
  const [seconds, micros] = await h.redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * `at` is Redis's clock at the append, read in the script that appends: the entry's stream id, stamped
 * by the XADD a moment later in the same script, is of that millisecond or the next one or two.
 */
function expectStamped(entry: Entry, before: number, after: number): void {
  expect(entry.at).toMatch(ISO);
  const idMs = Number(entry.id.split('-')[0]);
  expect(idMs - Date.parse(entry.at)).toBeGreaterThanOrEqual(0);
  expect(idMs - Date.parse(entry.at)).toBeLessThanOrEqual(2);
  expect(Date.parse(entry.at)).toBeGreaterThanOrEqual(before);
  expect(Date.parse(entry.at)).toBeLessThanOrEqual(after);
}

function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  // The simulator's settings: a resolve checks with the provider.
  return runCli(args, { env: { REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix, ...workerCustodyEnv(h.sim), ...env } });
}

/** The value of one sample of /metrics, 0 when absent. */
async function sample(name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? Number.NaN : Number(line.split(' ')[1]);
}

describe('the audit key', () => {
  it('is <QUEUE_PREFIX>:audit, in the Cluster slot of every other key under a hash-tagged prefix', () => {
    for (const prefix of ['{wtx}', 'x{wtx}', '{wtx}:{other}']) {
      const keys = createKeys(prefix, `${prefix}:transfer-events`);
      expect(keys.audit).toBe(`${prefix}:audit`);
      expect(keySlot(keys.audit)).toBe(keySlot(keys.transfer('a88a1846-b23d-f7e8-2344-f2bddb0c16f9')));
    }
  });
});

describe('one entry per action', { timeout: processesTimeout(2, 30_000) }, () => {
  it('custody-worker cancel: one entry with who (--by, else the OS user), why and what came of it', async () => {
    const first = samplePayload().halfSigned.sequenceId;
    const second = samplePayload().halfSigned.sequenceId;
    const before = await redisNow();
    const [named, unnamed] = await Promise.all([
      cli(['cancel', first, '--reason', REASON, '--by', 'alice', '--json']),
      cli(['cancel', second, '--reason', REASON, '--json']),
    ]);
    const after = await redisNow();
    expect(named.code, named.stderr).toBe(0);
    expect(unnamed.code, unnamed.stderr).toBe(0);

    const [entry, ...more] = await entriesOf(first);
    expect(more).toEqual([]);
    expect(entry).toEqual({
      id: entry!.id,
      at: entry!.at,
      user: 'alice',
      role: 'operator',
      via: 'cli',
      remote: '',
      action: 'cancel',
      sequenceId: first,
      reason: REASON,
      outcome: 'cancelled',
      forced: 'false',
    });
    expectStamped(entry!, before, after);
    expect(await entriesOf(second)).toMatchObject([{ user: userInfo().username, via: 'cli', outcome: 'cancelled' }]);
    // The event says who as it always did.
    expect(await h.eventsOf(first)).toMatchObject([{ event: 'transfer.cancelled', data: { reason: REASON, by: 'cli' } }]);
  });

  it('POST /transfers/:sequenceId/cancel: one entry with the Basic-auth user, via api, the peer address; counted', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const auth = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
    const post = () =>
      fetch(`${base}/transfers/${sequenceId}/cancel`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({ reason: REASON }),
      });
    const counted = () => sample('custody_console_actions_total', 'action="cancel",outcome="cancelled"');
    const countedBefore = await counted();
    expect(countedBefore).toBe(0);
    const before = await redisNow();
    const answer = await post();
    const after = await redisNow();
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ outcome: 'cancelled', state: 'cancelled', version: 1 });

    const entries = await entriesOf(sequenceId);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      user: USER,
      role: 'operator',
      via: 'api',
      action: 'cancel',
      sequenceId,
      reason: REASON,
      outcome: 'cancelled',
      forced: 'false',
    });
    expect(entries[0]!.remote).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
    expectStamped(entries[0]!, before, after);
    expect(await counted()).toBe(1);

    // A second cancel is an action too: audited with its own outcome.
    expect(await (await post()).json()).toEqual({ outcome: 'already-ended', state: 'cancelled' });
    expect((await entriesOf(sequenceId)).map((entry) => entry.outcome)).toEqual(['cancelled', 'already-ended']);
    expect(await sample('custody_console_actions_total', 'action="cancel",outcome="already-ended"')).toBe(1);
  });

  it('custody-worker resolve: one entry when it resolves, and one with the outcome when the rules refuse it', async () => {
    const ledger = h.app!.ledger;
    const [stuck, gated] = [await strandTransfer(ledger), await strandTransfer(ledger, { state: 'gated' })];
    const [resolved, refused] = await Promise.all([
      cli(['resolve', stuck, '--as', 'failed', '--reason', 'provider: never received, OPS-124', '--by', 'bob', '--json']),
      cli(['resolve', gated, '--as', 'submitted', '--txid', '0xfeed', '--reason', 'in provider console, OPS-125', '--by', 'bob', '--json']),
    ]);
    expect(resolved.code, resolved.stderr).toBe(0);
    expect(refused.code, refused.stderr).toBe(4);
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: { code: 'WRONG_STATE' } });

    expect(await entriesOf(stuck)).toMatchObject([
      {
        user: 'bob',
        role: 'operator',
        via: 'cli',
        remote: '',
        action: 'resolve',
        reason: 'provider: never received, OPS-124',
        outcome: 'resolved',
        forced: 'false',
      },
    ]);
    expect((await ledger.get(stuck))?.state).toBe(TransferState.FAILED);
    expect(await entriesOf(gated)).toMatchObject([{ user: 'bob', action: 'resolve', outcome: 'wrong-state', forced: 'false' }]);
    expect((await ledger.get(gated))?.state).toBe(TransferState.GATED);
  });

  it('a viewer is refused every action, changing nothing, each refusal audited as forbidden', async () => {
    const config = loadLedgerConfig({ REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix });
    const operations = cliOperations(h.redis, cliLedger(h.redis, config), config);
    const viewer: Actor = { name: 'victor', role: 'viewer', via: 'console', remote: '10.0.0.7' };
    const stuck = await strandTransfer(h.app!.ledger);
    const fresh = samplePayload().halfSigned.sequenceId;

    await expect(operations.cancel(viewer, fresh, REASON)).rejects.toBeInstanceOf(ForbiddenError);
    await expect(operations.resolve(viewer, stuck, { outcome: 'not-sent', force: true }, REASON)).rejects.toBeInstanceOf(ForbiddenError);
    const epochEntries = (await auditEntries()).filter((entry) => entry.action === 'accept-epoch').length;
    await expect(operations.acceptEpoch(viewer, REASON)).rejects.toBeInstanceOf(ForbiddenError);

    expect(await h.app!.ledger.get(fresh)).toBeUndefined();
    expect(await h.app!.ledger.ended(fresh)).toBeUndefined();
    expect((await h.app!.ledger.get(stuck))?.state).toBe(TransferState.SUBMITTING);
    const who = { user: 'victor', role: 'viewer', via: 'console', remote: '10.0.0.7', reason: REASON, outcome: 'forbidden' };
    expect(await entriesOf(fresh)).toMatchObject([{ ...who, action: 'cancel', forced: 'false' }]);
    expect(await entriesOf(stuck)).toMatchObject([{ ...who, action: 'resolve', forced: 'true' }]);
    const epoch = (await auditEntries()).filter((entry) => entry.action === 'accept-epoch');
    expect(epoch).toHaveLength(epochEntries + 1);
    expect(epoch.at(-1)).toMatchObject({ ...who, action: 'accept-epoch', sequenceId: '', forced: 'false' });
  });
});

describe('retention', () => {
  it('trims the entries older than AUDIT_RETENTION (Redis time) as new ones come, keeping the young ones', async () => {
    const prefix = uniquePrefix('audit-retention');
    const config = loadLedgerConfig({ REDIS_URL: testRedisUrl(), QUEUE_PREFIX: prefix, AUDIT_RETENTION: '1s' });
    const operations = cliOperations(h.redis, cliLedger(h.redis, config), config);
    const viewer: Actor = { name: 'victor', role: 'viewer', via: 'api' };
    const act = async (n: number) => {
      for (let i = 0; i < n; i++) await operations.cancel(viewer, `seq-${i}`, REASON).catch(() => undefined);
    };
    // More than one stream node of entries (MINID ~ trims whole nodes).
    await act(150);
    const old = await auditEntries(prefix);
    expect(old).toHaveLength(150);
    const lastOld = Number(old.at(-1)!.id.split('-')[0]);
    await until(
      'redis time past the old entries’ retention',
      5_000,
      async () => ((await redisNow()) > lastOld + 1_000 ? true : undefined),
      50,
    );

    await act(5);
    const kept = await auditEntries(prefix);
    const young = kept.filter((entry) => Number(entry.id.split('-')[0]) > lastOld);
    expect(young).toHaveLength(5);
    expect(kept.map((entry) => entry.id)).not.toContain(old[0]!.id);
    expect(kept.length).toBeLessThan(150);
  });

  it('never trims by count: with the default (365d), every entry stays', async () => {
    const prefix = uniquePrefix('audit-count');
    const config = loadLedgerConfig({ REDIS_URL: testRedisUrl(), QUEUE_PREFIX: prefix });
    expect(config.audit.retentionMs).toBe(365 * 86_400_000);
    const audit = new AuditLog(h.redis, createKeys(prefix, `${prefix}:transfer-events`).audit, config.audit.retentionMs);
    const entry = {
      user: 'u',
      role: 'operator',
      via: 'cli',
      remote: '',
      action: 'cancel',
      sequenceId: 's',
      reason: REASON,
      outcome: 'too-late',
      forced: 'false',
    } as const;
    for (let i = 0; i < 1_200; i++) await audit.append(entry);
    expect(await h.redis.xlen(`${prefix}:audit`)).toBe(1_200);
  });
});
