import type { TransferEvent } from '../../packages/producer/src/events.ts';
import type { App } from '../app.ts';
import { AuditReader, type AuditEntry } from '../operations/audit.ts';
import { ATTENTION_REASONS, type AttentionReason, type Counts, type ListedTransfer, type TransferQueries } from '../ledger/queries.ts';
import { TERMINAL_STATES, TransferState, type AttemptEntry, type TransferRecord } from '../ledger/ledger.ts';
import { QueueName, trackJobId } from '../queues/names.ts';
import { DASHBOARD_PATH } from '../http/dashboard.ts';
import { redactStoredMetadata } from '../http/job-view.ts';

/**
 * What each console page shows, read through the ledger's named queries (TransferQueries) and its
 * public reads only: the templates get plain values, never a Redis client.
 */

export interface PageDeps {
  app: App;
  queries: TransferQueries;
  /** The audit stream's key (`<QUEUE_PREFIX>:audit`). */
  auditKey: string;
  /** DASHBOARD_METADATA_KEYS: the metadata keys shown as they are; every other value is redacted. */
  metadataKeys: readonly string[];
}

/** How much of a list the home page shows; the list page pages through the rest. */
export const HOME_ATTENTION_LIMIT = 50;
export const LIST_PAGE_SIZE = 50;

const REASON_TEXT: Record<AttentionReason, string> = {
  unresolved: 'unresolved: a send may have gone out, nothing settles it',
  halted: 'halted upstream: it gets no txid unless someone acts',
  'send-unknown': 'send outcome unknown longer than UNRESOLVED_AFTER',
  'expired-unknown': 'expired with SEND_OUTCOME_UNKNOWN (last 7 days)',
  approval: 'waiting for a provider approval longer than CONSOLE_APPROVAL_WAIT',
};

export interface Banner {
  level: 'warning' | 'info';
  text: string;
}

export interface AttentionRow {
  sequenceId: string;
  reason: AttentionReason;
  reasonText: string;
  since: string;
  age: string;
}

export interface Summary {
  counts: Counts;
  attention: AttentionRow[];
}

/** The figures the home page and the live updates share: counts and the needs-attention list, oldest first. */
export async function summary(deps: PageDeps): Promise<Summary> {
  const [counts, items, now] = await Promise.all([
    deps.queries.counts(),
    deps.queries.attention(HOME_ATTENTION_LIMIT),
    deps.app.ledger.now(),
  ]);
  return {
    counts,
    attention: items.map((item) => ({
      sequenceId: item.sequenceId,
      reason: item.reason,
      reasonText: REASON_TEXT[item.reason],
      since: iso(item.since)!,
      age: age(now - item.since),
    })),
  };
}

/** The ledger's recovery window and the provider's pause: what makes every transfer slower right now. */
export async function banners(app: App): Promise<Banner[]> {
  const [epoch, pausedUntil] = await Promise.all([app.ledger.epoch.peek(), app.budget.pausedUntil().catch(() => 0)]);
  const found: Banner[] = [];
  if (epoch.id === undefined) {
    found.push({ level: 'warning', text: 'The ledger has no epoch: no transfer is sent until an operator runs `ledger init`.' });
  } else if (epoch.recoveryUntil > epoch.now) {
    found.push({
      level: 'warning',
      text: `The ledger is in recovery until ${iso(epoch.recoveryUntil)}: every transfer is looked up before its first send.`,
    });
  }
  if (pausedUntil > Date.now())
    found.push({ level: 'info', text: `Calls to the provider are paused until ${iso(pausedUntil)} (it answered 429).` });
  return found;
}

export interface ListedRow {
  sequenceId: string;
  state: string;
  walletId: string;
  coin: string;
  updatedAt: string;
}

export function listedRow(record: ListedTransfer): ListedRow {
  return {
    sequenceId: record.sequenceId,
    state: record.state,
    walletId: record.walletId,
    coin: record.coin,
    updatedAt: iso(record.updatedAt) ?? '',
  };
}

export const STATES: readonly TransferState[] = Object.values(TransferState);
export { ATTENTION_REASONS };

export interface Stage {
  name: string;
  status: 'done' | 'current' | 'pending' | 'branch';
  at: string | null;
  note?: string;
}

/** The states on the way to the chain, in order: one stage each. */
const STAGE_STATES = [
  TransferState.RECEIVED,
  TransferState.GATED,
  TransferState.SUBMITTING,
  TransferState.SUBMITTED,
  TransferState.BROADCAST,
] as const satisfies readonly TransferState[];

/**
 * The vertical stage view: received → gated → submitting → submitted → broadcast, one stage per state
 * a transfer passes on its way to the chain. The stage named after the record's state is the current
 * one (exactly one while the state is not terminal); a terminal transfer has none: broadcast is done,
 * any other end is a branch named after it. Branches: a send whose outcome nothing settled (while
 * submitting), the provider's approval a submitted transfer waits for (not a ledger state), the end.
 */
export function stages(record: TransferRecord): Stage[] {
  const state = record.state;
  const terminal = TERMINAL_STATES.has(state);
  const position = (STAGE_STATES as readonly TransferState[]).indexOf(state);
  // Before the state: done. A terminal state other than broadcast is not on the way: what the record
  // holds says how far the transfer got.
  const status = (stage: (typeof STAGE_STATES)[number], reached: boolean): Stage['status'] => {
    if (state === TransferState.BROADCAST) return 'done';
    if (position >= 0) {
      const at = STAGE_STATES.indexOf(stage);
      return at < position ? 'done' : at === position ? 'current' : 'pending';
    }
    return reached ? 'done' : 'pending';
  };
  const list: Stage[] = [
    { name: TransferState.RECEIVED, status: status(TransferState.RECEIVED, true), at: iso(record.createdAt) },
    {
      name: TransferState.GATED,
      status: status(TransferState.GATED, record.gate !== undefined),
      at: record.gate ? record.gate.checkedAt : null,
    },
    { name: TransferState.SUBMITTING, status: status(TransferState.SUBMITTING, record.sends > 0), at: iso(record.firstSentAt) },
  ];
  if (state === TransferState.SUBMITTING && (record.unknownSince !== undefined || record.inUseSince !== undefined)) {
    list.push({
      name: record.unresolvedAt !== undefined ? 'unresolved' : 'send outcome unknown',
      status: 'branch',
      at: iso(record.unresolvedAt ?? record.unknownSince ?? record.inUseSince),
      note:
        record.inUseSince !== undefined
          ? 'the sequenceId is in use upstream by another transaction: an operator settles it'
          : 'a send may have gone out and no lookup found it: resolve it once you know',
    });
  }
  list.push({
    name: TransferState.SUBMITTED,
    status: status(TransferState.SUBMITTED, record.submittedAt !== undefined),
    at: iso(record.submittedAt),
  });
  if (state === TransferState.SUBMITTED && record.approvalSince !== undefined) {
    list.push({
      name: 'pending approval',
      status: 'branch',
      at: iso(record.approvalSince),
      note: 'the provider waits for an approval (or signing) before it broadcasts',
    });
  }
  list.push({ name: TransferState.BROADCAST, status: status(TransferState.BROADCAST, false), at: iso(record.broadcastAt) });
  if (terminal && state !== TransferState.BROADCAST) {
    list.push({
      name: state,
      status: 'branch',
      at: iso(record.updatedAt),
      note: record.expiredCode ?? record.lastError ?? record.haltedAs,
    });
  }
  return list;
}

/** What an operator may do to a transfer in this state (the operations module decides again). */
export function possibleActions(record: TransferRecord): { cancel: boolean; resolve: boolean } {
  return {
    cancel: record.state === TransferState.RECEIVED || record.state === TransferState.GATED,
    resolve: record.state === TransferState.SUBMITTING,
  };
}

export interface Detail {
  record: Omit<TransferRecord, 'payload' | 'metadata'> & { metadata: string };
  stages: Stage[];
  events: Array<{ id: string; at: string; event: string; version: number; data: string }>;
  audit: AuditEntry[];
  /** Each send attempt and each lookup made to settle a send (Keys.attempts), oldest first. */
  attempts: Array<{ at: string; what: string; result: string; proof: string; httpStatus: string; code: string }>;
  jobs: Array<{ label: string; href: string }>;
  actions: { cancel: boolean; resolve: boolean };
}

export async function detail(deps: PageDeps, sequenceId: string): Promise<Detail | undefined> {
  const record = await deps.app.ledger.get(sequenceId);
  if (!record) return undefined;
  const [events, audit, attempts] = await Promise.all([
    deps.app.ledger.events(sequenceId),
    new AuditReader(deps.app.redis, deps.auditKey).forTransfer(sequenceId, record.createdAt).then((found) => found.entries),
    deps.app.ledger.attempts(sequenceId),
  ]);
  const { payload: _payload, metadata, ...rest } = record;
  const jobs = [{ label: `submit job ${record.jobId}`, href: jobHref(QueueName.SUBMIT, record.jobId) }];
  if (record.submittedAt !== undefined)
    jobs.push({ label: `tracking job ${trackJobId(sequenceId)}`, href: jobHref(QueueName.TRACK, trackJobId(sequenceId)) });
  return {
    record: { ...rest, metadata: JSON.stringify(redactStoredMetadata(metadata, deps.metadataKeys)) },
    stages: stages(record),
    events: events.map(eventRow),
    audit,
    attempts: attempts.map(attemptRow),
    jobs,
    actions: possibleActions(record),
  };
}

/** One row of the sends and lookups table: a send with what its answer proved, a lookup with what it found. */
function attemptRow(attempt: AttemptEntry) {
  const at = iso(attempt.at) ?? '';
  if (attempt.kind === 'lookup')
    return { at, what: 'lookup', result: attempt.finding, proof: '', httpStatus: '', code: attempt.code ?? '' };
  const { outcome, proof = '', httpStatus, code = '' } = attempt;
  return { at, what: 'send', result: outcome, proof, httpStatus: httpStatus === undefined ? '' : String(httpStatus), code };
}

/** An event without its metadata: each echoes the transfer's, which the page shows once, redacted. */
function eventRow(event: TransferEvent) {
  return { id: event.id, at: event.at, event: event.event, version: event.version, data: JSON.stringify(event.data) };
}

function jobHref(queue: string, jobId: string): string {
  return `${DASHBOARD_PATH}/queue/${encodeURIComponent(queue)}/${encodeURIComponent(jobId)}`;
}

export function iso(ms: number | undefined | null): string | null {
  return ms === undefined || ms === null || ms === 0 ? null : new Date(ms).toISOString();
}

/** A duration as people read it: 45 s, 12 min, 3 h 5 min, 2 d 4 h. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return `${h} h ${min % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}
