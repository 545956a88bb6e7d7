import { TERMINAL_STATES, type TerminalStateName, type TransferStateName } from './catalog.ts';
import type { EventData, EventOf } from './events.ts';
import { JOB_ID_PREFIX } from './job-id.ts';
import { TRANSITION_LUA_SOURCE } from './transition-lua.ts';

/**
 * The ledger's one transition script (transition.lua, shipped as text in transition-lua.ts) and the one
 * encoder of what a transition asks of it. The worker's ledger (src/ledger/request.ts) imports them from
 * here, so the package's `cancel()` and the worker's cancel (and every other transition) run the same
 * script with requests encoded the same way: a cancel and a send claim are decided by one atomic step,
 * whoever asks.
 */

/** `-` in an expected-state list: the transfer has no record yet. */
export const NO_RECORD = '-';

export type LeaseRequest =
  /** Acquire (or renew) the send lease for `ms`, unless someone else holds a live one. */
  | { mode: 'take'; owner: string; ms: number }
  /** Only the lease's owner may make this transition (whether or not the lease has expired since). */
  | { mode: 'own'; owner: string }
  /** Only while nobody holds a live lease (reconciliation, an operator, a cancel). */
  | { mode: 'free' }
  /**
   * To `submitted` only, whoever holds the lease: the caller's own send was proven accepted upstream
   * (its answer, or a lookup's finding), and the ledger no longer holds the caller's lease as it left
   * it (another runner took it over, or the ledger went back in time and a loss was declared).
   */
  | { mode: 'proven' };

/**
 * What a transition asks of the ledger, and how it travels to transition.lua: one JSON object (the
 * script decodes it with cjson), every part named. The worker's named operations (src/ledger/operations.ts)
 * build these; the cancel is built here (cancelRequest), for the worker and this package alike.
 */
export interface TransitionRequest {
  from: ReadonlyArray<TransferStateName | typeof NO_RECORD>;
  to: TransferStateName;
  set?: Record<string, string | number>;
  unset?: string[];
  /** Fields incremented by the given amount. */
  increment?: Record<string, number>;
  /** Fields set to the ledger's clock (Redis time); `once` ones only when absent. */
  stamp?: string[];
  stampOnce?: string[];
  /** Refused (reason `present`) when any of these fields exists. */
  requireAbsent?: string[];
  lease?: LeaseRequest;
  /** An operator's explicit resolution: may fail a transfer whose send may have gone out. */
  operator?: boolean;
  /** Checked against its type's schema before the script runs (checkEventData): a wrong shape throws, nothing changes. */
  event?: EventOf;
  /**
   * Records, in the same atomic step, that the transfer needs its tracking job (the tracker outbox):
   * the caller then adds it with Queue.add and calls trackerAdded; a sweep adds what a crash left.
   */
  trackerPending?: boolean;
  /**
   * The transition records a send in flight: the ledger adds the epoch this process knows, and the
   * script refuses it under another epoch ('epoch') or, while recovery lasts, unless `lookedUpAt`
   * (the ledger's time before the caller looked the transfer up upstream, ms) is one lease or more
   * after the loss was recorded ('recovery').
   */
  sendInFlight?: { lookedUpAt: number | undefined };
  /**
   * Refused (reason `ledger`) unless the ledger has an epoch and is not recovering from a loss
   * (epoch.ts): for a change that vouches for what never happened before it (a cancel says "no send of
   * this transfer was ever made"), which a ledger that may have lost its record of sends cannot do.
   */
  requireIntactLedger?: boolean;
  /**
   * The upstream record id and txid this change stores for the transfer, claimed for its sequenceId
   * in the same atomic step (the worker's ledger passes the claims hash after the indexes and the
   * fields in RequestTarget.claims; a cancel has none): refused (reason `claimed`) when another
   * sequenceId claimed one of them first.
   */
  claims?: { recordIds?: readonly string[]; txids?: readonly string[] };
  /**
   * The send attempt or lookup this change concludes, pushed on the transfer's attempts list (the
   * script's last key) in the same atomic step, with `at` = the change's time: what the transfer's
   * timeline shows (docs/contract.md section 5). Small and free of secrets: a kind, an outcome, codes.
   */
  attempt?: Readonly<Record<string, string | number>> & { kind: string };
}

/** Why transition.lua refused a transition (its header names each). */
export type RefusalReason =
  'state' | 'terminal' | 'lease' | 'owner' | 'present' | 'unknown' | 'ended' | 'epoch' | 'recovery' | 'ledger' | 'claimed';

/** The epoch part of a request: what the script checks a send in flight against. */
export interface EpochCheck {
  check: boolean;
  /** The epoch this process knows ('' = none). */
  id: string;
  /** ms as text; '' when the caller did not look the transfer up. */
  lookedUpAt: string;
  /**
   * The highest tick (the ledger's count of transitions) the caller saw under epoch `id`, as text: a
   * ledger under that epoch with a lower tick went back in time (refused: 'epoch'), whatever the change.
   */
  seen: string;
  /** The caller's writer id ('' = none): the script records the tick of each of its changes (`w:<writer>`). */
  writer: string;
  /**
   * The tick of the writer's last change the caller knows was made under `id` (text; '0' = none): a
   * ledger whose `w:<writer>` is below it went back in time (refused: 'epoch'), however far the tick
   * has advanced since.
   */
  mine: string;
}

/** The ledger-wide settings a request carries (the script has no configuration of its own). */
export interface RequestContext {
  /** Approximate MAXLEN of the events stream. */
  eventsMaxLen: number;
  /** How long a terminal record is kept, ms. */
  retentionMs: number;
  /** How long a terminal transition's tombstone lives, ms (RETENTION + TOMBSTONE_RETENTION). */
  tombstoneTtlMs: number;
}

/** Where a transition applies: the sequenceId its event carries and its index member ('' = none). */
export interface RequestTarget {
  eventSequenceId: string;
  indexMember: string;
  /** The test clock's reading, when there is one (else the script reads Redis TIME). */
  clock: number | undefined;
  /** The epoch this process knows ('' = none), checked when the request records a send in flight. */
  epoch: string;
  /** The highest tick the caller saw under `epoch` (0 or absent: none): a ledger below it went back in time. */
  seen?: number;
  /** The caller's writer id and the tick of its last change under `epoch` (absent: it marks nothing). */
  writer?: { id: string; mine: number };
  /**
   * The fields of the claims hash that `request.claims` names (the worker's ledger spells them; it
   * passes the hash as the key after the indexes): absent or empty, nothing is claimed.
   */
  claims?: readonly string[];
}

const TERMINAL: ReadonlySet<string> = new Set(TERMINAL_STATES);

/**
 * The request as transition.lua reads it (see the script's header for each name). Numbers that the
 * script hands to Redis go as text: cjson reads numbers as doubles.
 */
export function encodeRequest(
  request: TransitionRequest,
  target: RequestTarget,
  context: RequestContext,
  read: '*' | readonly string[],
): string {
  let payload = '';
  const set: string[] = [];
  for (const [field, value] of Object.entries(request.set ?? {})) {
    if (field === 'payload') payload = String(value);
    else set.push(field, String(value));
  }
  const lease = request.lease;
  const incr: Record<string, number> = {};
  for (const [field, by] of Object.entries(request.increment ?? {})) if (by !== 0) incr[field] = by;
  const { clock } = target;
  // A lone surrogate (job data is not trusted) would be written as a `\ud800` escape, which cjson
  // refuses; on the wire as positional arguments it became U+FFFD, and it still does.
  return JSON.stringify(
    {
      seq: target.eventSequenceId,
      from: request.from,
      to: request.to,
      terminal: TERMINAL.has(request.to),
      now: clock === undefined ? '' : String(clock),
      event: request.event?.type ?? '',
      data: request.event ? JSON.stringify(request.event.data) : '',
      maxLen: String(context.eventsMaxLen),
      retention: String(context.retentionMs),
      member: target.indexMember,
      lease: {
        mode: lease?.mode ?? '',
        owner: lease && 'owner' in lease ? lease.owner : '',
        ms: String(lease?.mode === 'take' ? lease.ms : 0),
      },
      operator: request.operator === true,
      unset: request.unset ?? [],
      incr,
      absent: request.requireAbsent ?? [],
      stamp: request.stamp ?? [],
      stampOnce: request.stampOnce ?? [],
      read,
      payload,
      tracker: request.trackerPending === true,
      tombstoneTtl: String(context.tombstoneTtlMs),
      set,
      epoch: {
        check: request.sendInFlight !== undefined,
        id: target.epoch,
        lookedUpAt: request.sendInFlight?.lookedUpAt === undefined ? '' : String(request.sendInFlight.lookedUpAt),
        seen: String(target.seen ?? 0),
        writer: target.writer?.id ?? '',
        mine: String(target.writer?.mine ?? 0),
      } satisfies EpochCheck,
      intact: request.requireIntactLedger === true,
      attempt: request.attempt === undefined ? '' : JSON.stringify(request.attempt),
      claims: target.claims ?? [],
    },
    (_key, value: unknown) => (typeof value === 'string' ? value.toWellFormed() : value),
  );
}

/**
 * Cancel before send (docs/contract.md section 4, "Cancelling a transfer"): `transfer.cancelled`,
 * terminal, with its tombstone, so no job of this sequenceId, under any job id, ever sends.
 *
 * Only from the states in which no send of the transfer may have been processed: no record yet (a
 * sequenceId the worker has not seen: the record is created here, walletId and coin empty),
 * `received` and `gated`. Every transition that records a send in flight (the worker's
 * createAndTakeSend, takeSend, and takeLease/takeLeaseAfterLoss which take the lease to look the
 * transfer up) moves the transfer to `submitting` in the same atomic step as it takes the lease, and
 * none of them starts from `cancelled` (a terminal state is never left; from "no record" the tombstone
 * refuses it). Both run in transition.lua, which Redis runs one at a time: whichever of a cancel and a
 * send claim runs first wins, and the other is refused. So no live send lease exists in `received` or
 * `gated`; `lease: free` makes the script refuse the cancel should one ever exist there. Once a send
 * was ever in flight (`submitting` or later) it is too late, even if every send was answered "not taken".
 *
 * `requireIntactLedger`: a ledger with no epoch, or recovering from a loss, may have forgotten a send
 * of this very transfer, so it cannot vouch that none was made: refused ('ledger').
 *
 * The worker's op.cancel is this request; the package's TransferProducer.cancel sends it too.
 */
export function cancelRequest(data: EventData['transfer.cancelled']): TransitionRequest {
  return {
    from: [NO_RECORD, 'received', 'gated'],
    to: 'cancelled',
    lease: { mode: 'free' },
    requireIntactLedger: true,
    // createdAt only when the cancel creates the record (a sequenceId never seen).
    stampOnce: ['createdAt'],
    unset: ['payload'],
    event: { type: 'transfer.cancelled', data },
  };
}

/**
 * What a cancel did. `cancelled`: it took effect, `transfer.cancelled` was published (`version`,
 * `streamId`) and `state` is `cancelled`. `too-late`: nothing changed; a send of the transfer may have
 * been processed (`state`: submitting, submitted, ...), or the ledger cannot vouch that none was
 * (`ledger`: it has no epoch, or recovers from a loss; `state` as it stands, `-` for no record).
 * `already-ended`: nothing changed; the transfer had ended, `state` is its terminal state (from its
 * record, or its tombstone once RETENTION removed the record), `cancelled` for a second cancel.
 */
export type CancelResult =
  | { outcome: 'cancelled'; state: 'cancelled'; version: number; streamId: string }
  | { outcome: 'too-late'; state: TransferStateName | typeof NO_RECORD; ledger?: 'no-epoch-or-recovering' }
  | { outcome: 'already-ended'; state: TerminalStateName; version?: number };

/** A transition's answer, as far as a cancel's outcome depends on it. */
export type CancelAnswer =
  | { ok: true; version: number; streamId: string }
  | {
      ok: false;
      state: TransferStateName | typeof NO_RECORD;
      reason: RefusalReason;
      ended?: { state: TransferStateName; version: number };
    };

/** The outcome of a cancel from the script's answer (the worker's Ledger.cancel and the package's cancel()). */
export function cancelOutcome(sequenceId: string, answer: CancelAnswer): CancelResult {
  if (answer.ok) return { outcome: 'cancelled', state: 'cancelled', version: answer.version, streamId: answer.streamId };
  switch (answer.reason) {
    case 'ended':
      // No record, but a tombstone: it ended before and RETENTION removed the record.
      return {
        outcome: 'already-ended',
        state: (answer.ended?.state ?? answer.state) as TerminalStateName,
        version: answer.ended?.version,
      };
    case 'terminal':
      return { outcome: 'already-ended', state: answer.state as TerminalStateName };
    case 'state':
    case 'lease':
      // A send may have been processed: submitting (even if every send was "not taken"), or later.
      return { outcome: 'too-late', state: answer.state };
    // 'epoch': the ledger went back in time (below the tick the caller saw) or holds another epoch than
    // the caller's; like 'ledger', it cannot vouch that no send was made.
    case 'ledger':
    case 'epoch':
      return { outcome: 'too-late', state: answer.state, ledger: 'no-epoch-or-recovering' };
    default:
      throw new Error(`the ledger refused the cancel of ${sequenceId} for an unexpected reason: ${answer.reason}`);
  }
}

/**
 * `isoTime(ms)`: ISO 8601 UTC with milliseconds, as JavaScript's toISOString writes it, for event `at`
 * times taken from Redis's clock (the script has no date library). Days to a civil date: H. Hinnant's
 * algorithm, valid for every date after 1970.
 */
export const ISO_TIME_LUA = `
local function isoTime(ms)
  local s = math.floor(ms / 1000)
  local milli = ms - s * 1000
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
    math.floor(secs / 3600), math.floor((secs % 3600) / 60), secs % 60, milli)
end
`;

/**
 * How many entries a transfer's attempts keep, the newest (transition.lua's ATTEMPTS_CAP, which
 * assembleTransitionScript checks against this): a full set may have lost its oldest.
 */
export const ATTEMPTS_CAP = 50;

/**
 * The transition script as Redis runs it: transition.lua with the contract's terminal states put in
 * where it says `{--[[catalog: terminal states]]}` (one fact, one place: the catalog), and isoTime.
 */
export function assembleTransitionScript(lua: string): string {
  const marker = '{--[[catalog: terminal states]]}';
  const iso = '--[[iso time]]';
  if (!lua.includes(marker)) throw new Error(`transition.lua lacks ${marker}`);
  if (!lua.includes(iso)) throw new Error(`transition.lua lacks ${iso}`);
  const cap = /^local ATTEMPTS_CAP = (\d+)$/m.exec(lua);
  if (!cap || Number(cap[1]) !== ATTEMPTS_CAP) throw new Error(`transition.lua's ATTEMPTS_CAP is not ${ATTEMPTS_CAP}`);
  const prefix = /^local JOB_ID_PREFIX = '([^']*)'$/m.exec(lua);
  if (!prefix || prefix[1] !== JOB_ID_PREFIX) throw new Error(`transition.lua's JOB_ID_PREFIX is not ${JOB_ID_PREFIX}`);
  return lua.replace(marker, `{ ${TERMINAL_STATES.map((state) => `['${state}'] = true`).join(', ')} }`).replace(iso, ISO_TIME_LUA);
}

/** The script this package runs: transition.lua as shipped (transition-lua.ts), assembled. */
export const TRANSITION_LUA = assembleTransitionScript(TRANSITION_LUA_SOURCE);
