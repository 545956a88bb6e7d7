import { ATTEMPTS_CAP } from '../../../packages/producer/src/transition.ts';
import type { TransferEvent } from '../../../packages/producer/src/events.ts';
import type { ListedTransfer } from '../../ledger/queries.ts';
import type { AttemptEntry } from '../../ledger/ledger.ts';
import type { TransferRecord } from '../../ledger/record.ts';
import type { StoredAuditEntry } from '../../operations/audit.ts';
import { redactStoredMetadata } from '../job-view.ts';

const iso = (ms: number | undefined) => (ms === undefined || ms === 0 ? null : new Date(ms).toISOString());

/**
 * A transfer as `/api/v1/transfers` lists it: what an operator reads, named as in
 * GET /transfers/:sequenceId; never the lease's owner (a runner's token), the payload, or the fields
 * the worker keeps for itself (match, pending, counters of polls).
 */
export function listedItem(record: ListedTransfer, metadataKeys: readonly string[]) {
  return {
    sequenceId: record.sequenceId,
    state: record.state,
    version: record.version,
    jobId: record.jobId,
    walletId: record.walletId,
    coin: record.coin,
    metadata: redactStoredMetadata(record.metadata, metadataKeys),
    attempts: record.sends,
    failures: record.failures,
    lastError: record.lastError ?? null,
    txid: record.txid ?? null,
    createdAt: iso(record.createdAt),
    updatedAt: iso(record.updatedAt),
    submittedAt: iso(record.submittedAt),
    broadcastAt: iso(record.broadcastAt),
    sendOutcomeUnknownSince: iso(record.unknownSince),
    unresolvedAt: iso(record.unresolvedAt),
    sequenceIdInUseSince: iso(record.inUseSince),
    haltedAs: record.haltedAs ?? null,
    haltedSince: iso(record.haltedSince),
    expiredCode: record.expiredCode ?? null,
  };
}

export interface TimelineItem {
  at: string;
  source: 'worker' | 'provider' | 'operator';
  kind: string;
  [detail: string]: unknown;
}

/** An event an operator's action published (a resolve, a cancel over HTTP or the CLI) is the operator's. */
function eventSource(event: TransferEvent): TimelineItem['source'] {
  const data = event.data as Record<string, unknown>;
  if (data.recoveredBy === 'operator' || data.resolvedBy === 'operator') return 'operator';
  if (event.event === 'transfer.cancelled' && typeof data.by === 'string' && (data.by === 'cli' || data.by.startsWith('http')))
    return 'operator';
  return 'worker';
}

/**
 * One transfer's timeline, oldest first: its events, its audit entries, every send attempt (with what
 * its answer proved) and every lookup made to settle a send (with what it found), from the attempts
 * list, and what the record holds about its provider states: the time a send's outcome became unknown,
 * the provider's halt and in-use answers, the broadcast. Polls are counted, not listed (attemptCounts).
 * The first send (`send.first`, with the count) is shown when the list does not cover every send
 * counted: a record written before the list existed, a send whose outcome was never recorded (a
 * crash), or a list past its cap.
 */
export function timeline(
  record: TransferRecord,
  events: readonly TransferEvent[],
  audit: readonly StoredAuditEntry[],
  attempts: readonly AttemptEntry[] = [],
): TimelineItem[] {
  const items: TimelineItem[] = [];
  let sends = 0;
  for (const attempt of attempts) {
    const when = iso(attempt.at) ?? '';
    if (attempt.kind === 'send') {
      sends++;
      const { outcome, proof = null, httpStatus = null, code = null } = attempt;
      items.push({ at: when, source: 'worker', kind: 'send.attempt', outcome, proof, httpStatus, code });
    } else {
      items.push({ at: when, source: 'provider', kind: 'lookup', finding: attempt.finding, code: attempt.code ?? null });
    }
  }
  const covered = sends > 0 && sends >= record.sends && attempts.length < ATTEMPTS_CAP;
  // After the attempts: at one millisecond, a send's answer comes before the event it led to.
  for (const event of events) {
    items.push({ at: event.at, source: eventSource(event), kind: event.event, version: event.version, streamId: event.id });
  }
  for (const entry of audit) {
    items.push({
      at: entry.at,
      source: 'operator',
      kind: `operator.${entry.action}`,
      outcome: entry.outcome,
      user: entry.user,
      role: entry.role,
      via: entry.via,
      reason: entry.reason,
      forced: entry.forced === 'true',
    });
  }
  const at = (ms: number | undefined) => iso(ms);
  const first = at(record.firstSentAt);
  if (first && !covered) items.push({ at: first, source: 'worker', kind: 'send.first', attempts: record.sends });
  const unknown = at(record.unknownSince);
  if (unknown) items.push({ at: unknown, source: 'worker', kind: 'send.outcome-unknown', attempts: record.sends });
  const inUse = at(record.inUseSince);
  if (inUse) items.push({ at: inUse, source: 'provider', kind: 'provider.sequence-id-in-use' });
  const halted = at(record.haltedSince);
  if (halted) items.push({ at: halted, source: 'provider', kind: 'provider.halted', providerState: record.haltedAs ?? null });
  const broadcast = at(record.broadcastAt);
  if (broadcast) items.push({ at: broadcast, source: 'provider', kind: 'provider.broadcast', txid: record.txid ?? null });
  // ISO 8601 in UTC sorts as text; a stable sort keeps each source's own order at the same millisecond.
  return items.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}

/** What the record counts of the transfer's calls (no time per call is kept). */
export function attemptCounts(record: TransferRecord) {
  return {
    sends: record.sends,
    failures: record.failures,
    pollFailures: record.pollFailures,
    unmatchedPolls: record.unmatchedPolls,
    enrichFailures: record.enrichFailures,
    upstreamCalls: record.calls,
    lastError: record.lastError ?? null,
  };
}
