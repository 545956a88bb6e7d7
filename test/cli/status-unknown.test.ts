/**
 * "Outcome unknown since" is shown while the transfer is still `submitting` (a send may have gone out and
 * nothing settled it yet), and no longer once it is settled: a transfer whose outcome was unknown, then
 * found by a lookup (submitted) and broadcast keeps `unknownSince` on its record (sticky, the ledger
 * decides by it), but neither `GET /transfers/:sequenceId` nor `custody-worker status` says its outcome is
 * unknown. Records written as the ledger keeps them, so each state is exact.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import type { TransferView } from '../../src/ledger/transfer-view.ts';
import { createLogger } from '../../src/logger.ts';
import { runCli } from '../helpers/cli-process.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const UNKNOWN_SINCE = Date.parse('2026-11-20T10:00:00.000Z');
const SUBMITTED_AT = UNKNOWN_SINCE + 45_000;
const BROADCAST_AT = SUBMITTED_AT + 30_000;

let h: Harness;
let server: FastifyInstance;

/** Writes a ledger record of a transfer whose send outcome became unknown at UNKNOWN_SINCE. */
async function writeRecord(sequenceId: string, fields: Record<string, string | number>): Promise<void> {
  const keys = createKeys(h.prefix, h.config.queue.eventsStream);
  await h.redis.hset(keys.transfer(sequenceId), {
    jobId: `transfer-${sequenceId}`,
    walletId: '310',
    coin: 'eth',
    createdAt: UNKNOWN_SINCE - 5_000,
    updatedAt: UNKNOWN_SINCE,
    sends: 2,
    failures: 1,
    unknownSince: UNKNOWN_SINCE,
    ...fields,
  });
}

async function views(sequenceId: string): Promise<{ http: TransferView; json: TransferView; text: string }> {
  const http = await server.inject({ method: 'GET', url: `/transfers/${sequenceId}` });
  expect(http.statusCode, http.body).toBe(200);
  const [json, text] = await Promise.all([
    runCli(['status', sequenceId, '--json'], { env: h.env }),
    runCli(['status', sequenceId], { env: h.env }),
  ]);
  expect(json.stderr).toBe('');
  expect(json.code).toBe(0);
  expect(text.stderr).toBe('');
  expect(text.code).toBe(0);
  return { http: http.json<TransferView>(), json: JSON.parse(json.stdout) as TransferView, text: text.stdout };
}

beforeAll(async () => {
  h = await startHarness({ name: 'status-unknown', worker: false });
  await h.startWorker();
  // Paused: no handler touches the records this file writes.
  for (const queue of Object.values(h.app!.queues)) await queue.pause();
  server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
});
afterAll(async () => {
  await server?.close();
  await h?.close();
});

describe('outcome unknown since, in GET /transfers/:sequenceId and status', { timeout: processesTimeout(1) }, () => {
  it('is not shown once the unknown send was recovered by a lookup and broadcast', async () => {
    const sequenceId = `recovered-${Date.now()}`;
    await writeRecord(sequenceId, {
      state: 'broadcast',
      version: 2,
      updatedAt: BROADCAST_AT,
      submittedAt: SUBMITTED_AT,
      broadcastAt: BROADCAST_AT,
      txid: '0x' + 'ab'.repeat(32),
    });
    const { http, json, text } = await views(sequenceId);
    for (const view of [http, json]) expect(view).toMatchObject({ sequenceId, state: 'broadcast', attempts: 2 });
    expect(text).toMatch(/^state +broadcast$/m);
    expect({
      http: http.sendOutcomeUnknownSince,
      json: json.sendOutcomeUnknownSince,
      text: /^outcome unknown since.*$/m.exec(text)?.[0].replace(/ +/g, ' '),
    }).toEqual({ http: null, json: null, text: 'outcome unknown since -' });
    expect(text).not.toContain('may have gone out');
  });

  it('is shown while the transfer is still submitting', async () => {
    const sequenceId = `unsettled-${Date.now()}`;
    await writeRecord(sequenceId, { state: 'submitting', version: 0 });
    const { http, json, text } = await views(sequenceId);
    for (const view of [http, json]) {
      expect(view).toMatchObject({ sequenceId, state: 'submitting' });
      expect(view.sendOutcomeUnknownSince).toBe(new Date(UNKNOWN_SINCE).toISOString());
    }
    expect(text).toMatch(/^outcome unknown since +2026-11-20T10:00:00\.000Z \(a send may have gone out\)$/m);
  });
});
