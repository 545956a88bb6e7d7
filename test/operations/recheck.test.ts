/**
 * An operator's recheck of a transfer (docs/contract.md section 10): its tracking polls now. A submitted
 * transfer's tracking job waiting for its next poll runs at once, a missing one is added; a state with
 * nothing to poll is refused; every request is on the audit stream. Real Redis and BullMQ, no worker:
 * the job states are BullMQ's own.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadLedgerConfig } from '../../src/config/config.ts';
import { cliOperations } from '../../src/cli/operator.ts';
import { cliLedger } from '../../src/cli/redis-run.ts';
import type { Ledger } from '../../src/ledger/ledger.ts';
import { AuditLog, type Actor } from '../../src/operations/audit.ts';
import { RecheckRefusedError } from '../../src/operations/errors.ts';
import { Operations } from '../../src/operations/operations.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { Trackers } from '../../src/queues/trackers.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { testRedisUrl } from '../helpers/redis.ts';
import { strandTransfer } from '../helpers/strand.ts';

const REASON = 'customer asks, ticket OPS-9';
const OPERATOR: Actor = { name: 'olga', role: 'operator', via: 'api', remote: '10.0.0.8' };

let h: Harness;
let ledger: Ledger;
let operations: Operations;
let queue: Queue;

beforeAll(async () => {
  h = await startHarness({ name: 'recheck', worker: false });
  const config = loadLedgerConfig({ REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix });
  ledger = cliLedger(h.redis, config);
  operations = cliOperations(h.redis, ledger, config);
  queue = new Queue(QueueName.TRACK, { connection: h.redis, prefix: h.prefix });
});
afterAll(async () => {
  await queue?.close();
  await h?.close();
});

async function auditOf(sequenceId: string): Promise<Array<Record<string, string>>> {
  const raw = await h.redis.xrange(`${h.prefix}:audit`, '-', '+');
  return raw
    .map(([, flat]) => Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!])))
    .filter((entry) => entry.sequenceId === sequenceId);
}

/** A submitted transfer (resolved by force) whose tracking job waits `firstPollMs` for its first poll. */
async function submitted(firstPollMs: number | undefined): Promise<string> {
  const sequenceId = await strandTransfer(ledger);
  await operations.resolve(OPERATOR, sequenceId, { outcome: 'submitted', force: true }, REASON);
  await (await queue.getJob(trackJobId(sequenceId)))?.remove();
  if (firstPollMs !== undefined) await new Trackers(queue, ledger, firstPollMs).ensure(sequenceId);
  return sequenceId;
}

describe('recheck', () => {
  it('runs a tracking job that waits for its next poll now, audited', async () => {
    const sequenceId = await submitted(3_600_000);
    expect(await (await queue.getJob(trackJobId(sequenceId)))!.getState()).toBe('delayed');
    const rechecked = await operations.recheck(OPERATOR, sequenceId, REASON);
    expect(rechecked).toEqual({ sequenceId, outcome: 'promoted', trackJobId: trackJobId(sequenceId) });
    expect(await (await queue.getJob(trackJobId(sequenceId)))!.getState()).toBe('waiting');
    expect((await auditOf(sequenceId)).at(-1)).toMatchObject({ action: 'recheck', outcome: 'promoted', user: 'olga', reason: REASON });

    // Due already: nothing to hurry.
    expect((await operations.recheck(OPERATOR, sequenceId, REASON)).outcome).toBe('polling');
  });

  it('adds the tracking job of a submitted transfer that has none, polling at once', async () => {
    const sequenceId = await submitted(undefined);
    expect(await queue.getJob(trackJobId(sequenceId))).toBeUndefined();
    expect((await operations.recheck(OPERATOR, sequenceId, REASON)).outcome).toBe('added');
    expect(await (await queue.getJob(trackJobId(sequenceId)))!.getState()).toBe('waiting');
    expect((await auditOf(sequenceId)).at(-1)).toMatchObject({ action: 'recheck', outcome: 'added' });
  });

  it('refuses a transfer with nothing to poll (not submitted, unknown), adding no job, audited', async () => {
    const sequenceId = await strandTransfer(ledger);
    const error = await operations.recheck(OPERATOR, sequenceId, REASON).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecheckRefusedError);
    expect(error).toMatchObject({ code: 'WRONG_STATE', details: { state: 'submitting' } });
    expect(await queue.getJob(trackJobId(sequenceId))).toBeUndefined();
    await expect(operations.recheck(OPERATOR, 'no-such-transfer', REASON)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(await auditOf(sequenceId)).toMatchObject([{ action: 'recheck', outcome: 'wrong-state', forced: 'false' }]);
    expect(await auditOf('no-such-transfer')).toMatchObject([{ action: 'recheck', outcome: 'not-found' }]);
  });

  it("with the worker's own Trackers (its first poll waits TRACK_POLL_MIN), still adds jobs that poll at once", async () => {
    // The worker passes its one Trackers (App.trackers), built with the first poll's delay of a new
    // submission: a recheck's or a resolve's job must not wait for it.
    const config = loadLedgerConfig({ REDIS_URL: testRedisUrl(), QUEUE_PREFIX: h.prefix });
    const worker = new Operations({
      redis: h.redis,
      ledger,
      audit: new AuditLog(h.redis, `${h.prefix}:audit`, config.audit.retentionMs),
      queuePrefix: h.prefix,
      replicas: config.replicas,
      trackers: new Trackers(queue, ledger, 3_600_000),
    });
    const resolved = await strandTransfer(ledger);
    await worker.resolve(OPERATOR, resolved, { outcome: 'submitted', force: true }, REASON);
    expect(await (await queue.getJob(trackJobId(resolved)))!.getState()).toBe('waiting');

    const sequenceId = await submitted(undefined);
    expect((await worker.recheck(OPERATOR, sequenceId, REASON)).outcome).toBe('added');
    expect(await (await queue.getJob(trackJobId(sequenceId)))!.getState()).toBe('waiting');
  });

  it('is refused to a viewer', async () => {
    const sequenceId = await submitted(3_600_000);
    await expect(operations.recheck({ ...OPERATOR, role: 'viewer' }, sequenceId, REASON)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await (await queue.getJob(trackJobId(sequenceId)))!.getState()).toBe('delayed');
  });
});
