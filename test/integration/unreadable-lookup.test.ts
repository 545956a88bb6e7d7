/**
 * A send of unknown outcome whose lookup answer holds our record, carrying our sequenceId, in a form
 * the adapter cannot read (it fails the schema and is skipped). The port's finding is `unreadable`:
 * the transfer stays unknown, never resent and never claimed. Before matching moved behind the port
 * (port.ts findTransfer), the domain saw an empty list, read it as "absent" and sent again; and until
 * matching counted an unreadable record of a narrowed answer as ours, so did one without a sequenceId.
 * Real parts: the first provider's adapter over HTTP (a scripted server plays the provider), the
 * submit handler, the ledger in a private Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseStreamEntry } from '../../packages/producer/src/events.ts';
import { CustodyClient } from '../../src/custody/wallet-service/client.ts';
import { createSubmitHandler } from '../../src/jobs/submit-transaction/handler.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { Ledger, TransferState } from '../../src/ledger/ledger.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { RetryLater } from '../../src/queues/outcomes.ts';
import type { JobContext } from '../../src/queues/processor.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startScriptedServer, type RecordedRequest, type ScriptedServer } from '../fuzz/scripted-server.ts';
import { closeAllRedis, newRedis, uniquePrefix } from '../helpers/redis.ts';
import { recordUnknownSend } from '../helpers/unknown-send.ts';

const log = createLogger({ level: 'silent' });
let server: ScriptedServer;
let lookups: RecordedRequest[] = [];
let sends = 0;
let listed: (sequenceId: string) => unknown[] = () => [];

beforeAll(async () => {
  server = await startScriptedServer((request) => {
    if (request.url.endsWith('/sendTransaction')) {
      sends += 1;
      return { status: 503, body: '' };
    }
    lookups.push(request);
    const { sequenceId } = JSON.parse(request.body) as { sequenceId: string };
    return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(listed(sequenceId)) };
  });
});
afterAll(async () => {
  await server.close();
  await closeAllRedis();
});

/** `narrows`: whether the adapter knows this provider's lookups to be narrowed to the sequenceId. */
async function run(listing: (sequenceId: string) => unknown[], narrows = false) {
  listed = listing;
  lookups = [];
  sends = 0;
  const redis = newRedis();
  const prefix = uniquePrefix('unreadable-lookup');
  let clock = 1_700_000_000_000;
  const ledger = new Ledger(redis, createKeys(prefix, `${prefix}:events`), {
    eventsMaxLen: 1_000,
    retentionMs: 60_000,
    clock: () => clock,
  });
  const payload = samplePayload();
  // A runner sent and died (the answer never came): its lease ran out, the outcome is unknown.
  await recordUnknownSend(ledger, payload);
  clock += 60_000;
  const custody = new CustodyClient({
    sdkUrl: server.url,
    baseUrl: server.url,
    clientId: 'id',
    clientSecret: 'secret',
    accessToken: 'token',
    timeoutMs: 2_000,
    connectTimeoutMs: 2_000,
    connections: 2,
    ...(narrows ? { narrowing: { narrows: async () => true } } : {}),
  });
  const handler = createSubmitHandler({
    ledger,
    travelRule: { setting: async () => null },
    custody,
    trackers: { ensure: async () => 'added' as const },
    attempts: 5,
    retry: { name: 'test', baseMs: 10, maxMs: 10 },
    sendDeadlineMs: 5_000,
    sendLeaseMs: 10_000,
    unresolvedAfterMs: 3_600_000,
    deadlineMs: 24 * 3_600_000,
    now: () => clock,
  });
  let outcome: unknown;
  try {
    outcome = await handler({
      job: { id: 'job-1', name: QueueName.SUBMIT, data: payload, attemptsStarted: 2 },
      token: undefined,
      log,
    } as unknown as JobContext);
  } catch (error) {
    outcome = error;
  } finally {
    await custody.close();
  }
  const events = (await redis.xrange(`${prefix}:events`, '-', '+')).map((entry) => parseStreamEntry(entry as [string, string[]]).event);
  const record = await ledger.get(payload.halfSigned.sequenceId);
  return { outcome, events, record };
}

/** Our record as the provider lists it, except its id, which no schema can read. */
const unreadableOurs = (sequenceId: string) => [
  { coin: 'eth', id: { nested: true }, wallet: 310, txid: '', type: 'send', sequenceId, outputs: [{ address: '0xabc', amount: '1.0' }] },
];

/** The same record as the spec lists transfers, without a sequenceId. */
const unreadableUnlabelled = () => [
  { coin: 'eth', id: { nested: true }, wallet: 310, txid: '', type: 'send', outputs: [{ address: '0xabc', amount: '1.0' }] },
];

describe('a lookup answer holding our record, unreadable', () => {
  it('leaves the send unknown: no resend, no claim, no event', async () => {
    const { outcome, events, record } = await run(unreadableOurs);
    expect(lookups.length).toBeGreaterThan(0);
    expect(sends, 'sendTransaction requests after the unreadable answer').toBe(0);
    expect(outcome).toBeInstanceOf(RetryLater);
    expect(events).toEqual([]);
    expect(record?.state).not.toBe(TransferState.SUBMITTED);
    expect(record?.unknownSince).toBeDefined();
  });

  it('without a sequenceId on the record, from a provider that narrows: still no resend, no claim', async () => {
    // As the spec lists transfers (no sequenceId), in an answer narrowed to ours: the one record is ours.
    const { outcome, events, record } = await run(unreadableUnlabelled, true);
    expect(lookups.length).toBeGreaterThan(0);
    expect(sends, 'sendTransaction requests after the unreadable answer').toBe(0);
    expect(outcome).toBeInstanceOf(RetryLater);
    expect(events).toEqual([]);
    expect(record?.unknownSince).toBeDefined();
  });

  it('an empty answer, by contrast, lets the worker send again (the test can tell the two apart)', async () => {
    const { events } = await run(() => []);
    expect(sends).toBeGreaterThan(0);
    expect(events).not.toContain('transfer.submitted');
  });
});
