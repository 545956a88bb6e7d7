/**
 * A provider that answers a lookup by sequenceId with the wallet's transfers, none carrying a
 * sequenceId, lists an earlier transfer to the same address for the same amount (a twin) while ours
 * is not listed yet. The twin's record must never be taken for ours: not when the twin is our own
 * broadcast transfer (the ledger holds its record id and txid), not when it was sent by someone else
 * before our first send (its date says so). Real worker, real simulator over HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { samplePayload, sampleSend, type ValidSamplePayload } from '../../tools/sample-payloads.ts';
import { RECORD_DATE_SLACK_MS } from '../../src/timing.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { sleep, until } from '../helpers/wait.ts';

/** Polls of the later transfer watched before concluding that it was not taken for its twin. */
const POLLS = 5;

describe('an earlier twin transfer listed, ours not yet', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({
      name: 'twin',
      sim: { settings: { narrowResults: false, unmatchedListsWallet: true, includeSequenceIdInTransactions: false } },
      env: { TRACK_POLL_MIN: '50ms', TRACK_POLL_MAX: '100ms' },
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  const polls = () => h.sim.stats().requests.getTransfer['200'] ?? 0;

  /** Submits `later` (its own record never listed) and watches POLLS of its lookups: never broadcast. */
  async function neverTakesTheTwin(later: ValidSamplePayload, twinTxid: string): Promise<void> {
    h.sim.updateSettings({ visibleAfterMs: 24 * 3_600_000 });
    const sequenceId = later.halfSigned.sequenceId;
    await h.producer.submit(later);
    await h.waitForEvents((events) => events.some((e) => e.sequenceId === sequenceId && e.event === 'transfer.submitted'));
    const before = polls();
    await until(`${POLLS} polls of the later transfer`, 20_000, async () => (polls() - before >= POLLS ? true : undefined), 20);
    const events = (await h.eventsOf(sequenceId)).map((e) => e.event);
    expect(events).toEqual(['transfer.submitted']);
    const record = await h.redis.hgetall(`${h.prefix}:transfer:${sequenceId}`);
    expect(record.state).toBe('submitted');
    expect(record.txid).toBeUndefined();
    expect(record.matchTransactionId).toBeUndefined();
    expect(Object.values(record)).not.toContain(twinTxid);
  }

  it('our own earlier transfer, broadcast: its record and txid are held for it, never ours', async () => {
    h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 0 });
    const twin = samplePayload();
    await h.producer.submit(twin);
    const [broadcast] = (
      await h.waitForEvents((events) => events.some((e) => e.sequenceId === twin.halfSigned.sequenceId && e.event === 'transfer.broadcast'))
    ).filter((e) => e.sequenceId === twin.halfSigned.sequenceId && e.event === 'transfer.broadcast');
    const twinTxid = (broadcast!.data as { txid: string }).txid;
    // The same transaction (so the same destination and amount) under another sequenceId, right after.
    const later = samplePayload({ metadata: { twin: 'own' } });
    later.txHex = twin.txHex;
    later.halfSigned = { ...twin.halfSigned, sequenceId: later.halfSigned.sequenceId };
    await neverTakesTheTwin(later, twinTxid);
  }, 60_000);

  it('a transfer of the wallet sent by someone else before ours: dated earlier, never ours', async () => {
    h.sim.updateSettings({ visibleAfterMs: 0, txidAfterMs: 0 });
    const token = (await (
      await fetch(`${h.sim.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: h.sim.clientId, client_secret: h.sim.clientSecret }),
      })
    ).json()) as { access_token: string };
    const outside = sampleSend(`outside-${Date.now()}`);
    const sent = await fetch(`${h.sim.url}/api/wallet/310/sendTransaction`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(outside),
    });
    expect(sent.status).toBe(200);
    const twinTxid = await until('the outside transfer’s txid', 5_000, async () => h.sim.transfer(outside.halfSigned.sequenceId)?.txid);
    // Earlier than our first send by more than the clocks' slack, as an earlier transfer is.
    await sleep(RECORD_DATE_SLACK_MS + 200);
    const later = samplePayload({ metadata: { twin: 'outside' } });
    later.txHex = outside.txHex;
    later.halfSigned = { ...outside.halfSigned, sequenceId: later.halfSigned.sequenceId };
    await neverTakesTheTwin(later, twinTxid);
  }, 60_000);
});
