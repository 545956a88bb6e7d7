import { describe, expect, it } from 'vitest';
import { parseStreamEntry, type EventData, type EventType, type TransferEvent } from '../../packages/producer/src/events.ts';
import { eventPhrase } from '../../src/events/format.ts';

/** An event as the stream holds it (so its data is checked against its schema on the way). */
function event<K extends EventType>(type: K, data: EventData[K]): TransferEvent {
  return parseStreamEntry([
    '1-0',
    [
      'event',
      type,
      'sequenceId',
      's-1',
      'walletId',
      '310',
      'coin',
      'eth',
      'version',
      '1',
      'at',
      '2026-11-23T10:15:02.120Z',
      'data',
      JSON.stringify(data),
      'metadata',
      '',
    ],
  ]);
}

const TXID = '0x9f2c4d3a1b0e8f7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5ae41a';
const ADDRESS = '0x5b38da6a701c568545dcfcb03fcb875f56beddc4';

describe('the phrase of each event type (CLI in full, demo brief)', () => {
  it.each<[string, TransferEvent, string, string]>([
    [
      'submitted with its record',
      event('transfer.submitted', { transfer: { id: 48213, sequenceId: 's-1', destinationAddress: ADDRESS, amount: 0.0125, userid: 7 } }),
      `upstream id 48213, amount 0.0125 to ${ADDRESS}`,
      'upstream id 48213, amount 0.0125 to 0x5b38da6a70…56beddc4',
    ],
    [
      'submitted, found by lookup',
      event('transfer.submitted', {
        transfer: null,
        recoveredBy: 'get-transfer',
        transaction: { id: '1702233', type: 'send', txid: '', outputs: [] },
      }),
      'recovered by lookup, upstream id 1702233',
      'recovered by lookup, upstream id 1702233',
    ],
    [
      'submitted, answered 409',
      event('transfer.submitted', { transfer: null, recoveredBy: 'duplicate' }),
      'recovered by a 409 answer: accepted earlier',
      'recovered by a 409 answer: accepted earlier',
    ],
    [
      'submitted by an operator',
      event('transfer.submitted', { transfer: null, recoveredBy: 'operator', reason: 'seen in the console' }),
      'resolved by an operator: seen in the console',
      'resolved by an operator',
    ],
    [
      'broadcast',
      event('transfer.broadcast', { txid: TXID, transaction: { id: '1', type: 'send', txid: TXID, outputs: [] }, walletTransaction: null }),
      `txid ${TXID}`,
      `txid ${TXID.slice(0, 12)}…${TXID.slice(-8)}`,
    ],
    [
      'rejected',
      event('transfer.rejected', {
        code: 'INVALID_PAYLOAD',
        issues: [
          { path: 'coin', message: 'required' },
          { path: 'coin', message: 'again' },
          { path: 'txHex', message: 'must be hex' },
        ],
      }),
      'INVALID_PAYLOAD (coin: required; coin: again; txHex: must be hex)',
      'INVALID_PAYLOAD (coin, txHex)',
    ],
    [
      'blocked',
      event('transfer.blocked', { code: 'TRAVEL_RULE_REQUIRED', setting: { outgoingTxn: 1, mandatory: true, blockTxn: false } }),
      'TRAVEL_RULE_REQUIRED (outgoingTxn 1, mandatory true, blockTxn false)',
      'TRAVEL_RULE_REQUIRED (outgoingTxn 1, mandatory true, blockTxn false)',
    ],
    [
      'failed',
      event('transfer.failed', {
        code: 'CUSTODY_REJECTED',
        httpStatus: 422,
        message: 'sendTransaction: HTTP 422, request refused',
        attempts: 1,
      }),
      'CUSTODY_REJECTED, http 422, after 1 send: sendTransaction: HTTP 422, request refused',
      'CUSTODY_REJECTED, http 422, after 1 send',
    ],
    [
      'failed before any answer',
      event('transfer.failed', { code: 'TRAVEL_RULE_UNAVAILABLE', httpStatus: null, message: '', attempts: 0 }),
      'TRAVEL_RULE_UNAVAILABLE, http -, after 0 sends',
      'TRAVEL_RULE_UNAVAILABLE, http -, after 0 sends',
    ],
    [
      'expired',
      event('transfer.expired', {
        code: 'TRACKING_DEADLINE',
        submittedAt: '2026-11-23T10:15:02.120Z',
        deadline: '2026-11-24T10:15:02.120Z',
      }),
      'TRACKING_DEADLINE, submitted 2026-11-23T10:15:02.120Z, deadline 2026-11-24T10:15:02.120Z',
      'TRACKING_DEADLINE, submitted 2026-11-23T10:15:02.120Z, deadline 2026-11-24T10:15:02.120Z',
    ],
    [
      'unresolved',
      event('transfer.unresolved', { code: 'SEND_OUTCOME_UNKNOWN', attempts: 3, lastError: 'CUSTODY_TIMEOUT' }),
      'SEND_OUTCOME_UNKNOWN after 3 sends, last error CUSTODY_TIMEOUT: an operator may resolve it',
      'SEND_OUTCOME_UNKNOWN after 3 sends, last error CUSTODY_TIMEOUT: an operator may resolve it',
    ],
    [
      'halted by the provider',
      event('transfer.halted', { state: 'rejected', providerTransferId: '5f1e0c3b9a7d4e2f8c6b1a0d9e8f7a6b' }),
      'rejected by the provider, upstream id 5f1e0c3b9a7d4e2f8c6b1a0d9e8f7a6b: never sent again',
      'rejected by the provider, upstream id 5f1e0c3b9a7d…9e8f7a6b: never sent again',
    ],
    [
      'reconcile.completed',
      event('reconcile.completed', {
        checked: 0,
        resubmitted: 1,
        trackersRestored: 0,
        unrecoverable: 0,
        verified: 40,
        mismatches: 0,
        verifyErrors: 0,
        retentionRemoved: 0,
        staleIndexRemoved: 0,
        interrupted: true,
        durationMs: 84.4,
      }),
      'checked 0, resubmitted 1, verified 40 in 84 ms, interrupted',
      'checked 0, resubmitted 1, verified 40 in 84 ms, interrupted',
    ],
  ])('%s', (_name, given, full, brief) => {
    expect(eventPhrase(given)).toBe(full);
    expect(eventPhrase(given, { brief: true })).toBe(brief);
  });
});
