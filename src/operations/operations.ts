import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { BudgetClass } from '../custody/budget.ts';
import { Deadline } from '../custody/deadline.ts';
import { isCustodyError } from '../custody/errors.ts';
import { txidEquals } from '../custody/matching.ts';
import type { CustodyPort, KnownTransfer, ListedTransfer, TransferFinding } from '../custody/port.ts';
import { FailureCode, type EventType } from '../../packages/producer/src/events.ts';
import { NotReplicatedError, VersionMismatchError } from '../../packages/producer/src/errors.ts';
import {
  TransferState,
  type AnswerRestsOn,
  type CancelResult,
  type EpochState,
  type Ledger,
  type ReplicaWait,
  type TransferRecord,
  type TransitionRequest,
  type TransitionResult,
} from '../ledger/ledger.ts';
import { op } from '../ledger/operations.ts';
import { QueueName, trackJobId } from '../queues/names.ts';
import { Trackers } from '../queues/trackers.ts';
import type { RedisClient } from '../redis.ts';
import type { Action, ActionOutcome, Actor, AuditLog } from './audit.ts';
import {
  AuditNotWrittenError,
  ForbiddenError,
  NoEpochError,
  OperationError,
  RecheckRefusedError,
  ReplicasBehindError,
  ResolveRefusedError,
  TrackerNotAddedError,
} from './errors.ts';

/** Longest reason of an operator action: it travels in the audit entry (and in a resolve's event). */
export const MAX_REASON_LENGTH = 500;
/** Longest actor name written to the audit stream. */
const MAX_ACTOR_NAME = 256;

// Control characters (a newline, an escape sequence) have no place in one line of text that ends up
// in consumers' logs and in operators' terminals.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Whether `text` may be an operator action's reason: one line of 1-500 characters, not blank. */
export function isOperatorReason(text: unknown): text is string {
  return typeof text === 'string' && text.trim() !== '' && [...text].length <= MAX_REASON_LENGTH && !CONTROL.test(text);
}

/**
 * What an operator says a transfer stuck in submitting became. `submitted`: the provider accepted it,
 * under `txid`; `not-sent`: it never did (published as transfer.failed OPERATOR_RESOLVED). Each is
 * checked with the provider first (docs/contract.md section 10): `submitted` only when the provider
 * shows that txid for this transfer, `not-sent` only when the worker's own lookup by sequenceId, made
 * under a send lease after the last runner's ended, finds nothing. `force` skips that check (then a
 * `submitted` needs no txid) and is recorded as `forced`.
 */
export type Resolution = { outcome: 'submitted'; txid?: string; force?: boolean } | { outcome: 'not-sent'; force?: boolean };

/** What the provider check of a resolve found (absent when forced). */
export type ProviderCheck =
  /** The provider shows the transfer under the operator's txid: its record id and txid, stored with the resolution. */
  | { finding: 'found'; transactionId: string; txid: string }
  /** The lookup by sequenceId found no record of the transfer. */
  | { finding: 'absent' };

export interface Resolved {
  sequenceId: string;
  resolvedAs: Resolution['outcome'];
  /** The version of the event the resolution published. */
  version: number;
  event: EventType;
  streamId: string;
  /** The tracking job (submitted only): the transfer is tracked to its txid. */
  trackJobId?: string;
  /** Whether the provider check was skipped (`force`). */
  forced: boolean;
  /** What the provider check found; absent when forced. */
  checked?: ProviderCheck;
}

/**
 * What a recheck did to the transfer's tracking job: `promoted` (it waited for its next poll and runs
 * now), `polling` (it is due or running already: nothing to hurry), `added` (there was none, or it
 * had ended: a new one polls at once). Its poll goes through the request budget like every other.
 */
export interface Rechecked {
  sequenceId: string;
  outcome: 'promoted' | 'polling' | 'added';
  trackJobId: string;
}

/**
 * The custody provider, for the provider check of a resolve: the port as this process has it, with
 * the worker's request budget when the process has one (every lookup takes its slot like the
 * worker's own), and the worker's send timing.
 */
export interface OperationsCustody {
  port: Pick<CustodyPort, 'findTransfer'>;
  /** The send lease (sendLeaseMs): held by the lookup of a `not-sent` resolve, as a runner holds it. */
  leaseMs: number;
  /** How long one lookup may take, its wait for the budget included (sendDeadlineMs). */
  deadlineMs: number;
}

/** What accept-epoch found (`before`) and left (`state`), both read from the ledger. */
export interface EpochAccepted {
  before: EpochState;
  state: EpochState;
}

export interface OperationsOptions {
  redis: RedisClient;
  ledger: Ledger;
  audit: AuditLog;
  /** QUEUE_PREFIX: where a resolved transfer's tracking job goes. */
  queuePrefix: string;
  /**
   * The process's one Trackers (the worker's, App.trackers). Without it (the CLI, which runs no
   * queue) each recheck or resolve adds its tracking job through a queue of queuePrefix of its own.
   */
  trackers?: Trackers;
  /** REDIS_MIN_REPLICAS and REDIS_REPLICA_TIMEOUT: every answer waits until the replicas hold it. */
  replicas: ReplicaWait;
  /**
   * A process that writes with its own copy of the transition script (the CLI) checks it against the
   * worker's recorded settings before a cancel (VERSION_MISMATCH); the worker's own need not.
   */
  checkSettings?: boolean;
  /** The provider a resolve is checked with; without it only a forced resolve is accepted (NO_PROVIDER). */
  custody?: OperationsCustody;
  /** Called once per action with its outcome (the worker counts custody_console_actions_total). */
  onAction?: (action: Action, outcome: ActionOutcome) => void;
}

/**
 * Every operator action (cancel, resolve, accept-epoch) from every surface (the HTTP routes, the CLI)
 * goes through here: the role is checked, the ledger's rules applied, the replicas waited for, and one
 * entry appended to the audit stream, allowed or refused, after the action was decided (the entry
 * names what happened, so it cannot be written before; should Redis fail in between, the caller
 * hears AuditNotWrittenError and doing it again is safe and audited).
 */
export class Operations {
  readonly #options: OperationsOptions;

  constructor(options: OperationsOptions) {
    this.#options = options;
  }

  /**
   * Cancels a transfer before any send of it (Ledger.cancel: one transition, so a send and a cancel
   * never both succeed). The event's `by` is `cli` from the CLI and `http:<user>` (`http` without a
   * user) over HTTP, as before the audit stream existed. Resolves with the cancel's answer; throws
   * ForbiddenError, VersionMismatchError (checkSettings) or NotReplicatedError, each audited.
   */
  async cancel(actor: Actor, sequenceId: string, reason: string): Promise<CancelResult> {
    return this.#audited('cancel', actor, { sequenceId, reason, forced: false }, async () => {
      const { ledger, replicas, checkSettings } = this.#options;
      // This process may write with its own configuration and its own copy of the script: only as the worker would.
      if (checkSettings) await ledger.assertSettingsRecorded();
      const result = await ledger.cancel(sequenceId, { reason, by: cancelledBy(actor) }, replicas);
      return { outcome: result.outcome, value: result };
    });
  }

  /**
   * Settles a transfer stuck in submitting (transfer.unresolved, or a runner that died mid-send) once
   * the provider check agrees (Resolution; skipped with `force`). Refused (ResolveRefusedError, nothing
   * changed but a lease the check took and gave back) when it is not in submitting, a runner holds a
   * live send lease, or the provider does not agree; a tracking job is added for `submitted`
   * (TrackerNotAddedError, after the audit entry, when that fails: the resolution stands).
   */
  async resolve(actor: Actor, sequenceId: string, resolution: Resolution, reason: string): Promise<Resolved> {
    const forced = resolution.force === true;
    const { checked, resolved } = await this.#audited('resolve', actor, { sequenceId, reason, forced }, async () => {
      const { ledger, replicas } = this.#options;
      const check = forced ? {} : await this.#check(sequenceId, resolution);
      if ('refused' in check) throw check.refused;
      try {
        const attempt = await ledger.writeReplicated(
          replicas,
          () => settle(ledger, sequenceId, resolution.outcome, reason, check),
          (settled) => settled.restsOn,
          (acknowledgement, timeoutMs) => new ReplicasBehindError('resolve', acknowledgement, timeoutMs),
        );
        if ('refused' in attempt) throw attempt.refused;
        return { outcome: 'resolved', value: { checked: check.checked, resolved: attempt.resolved } };
      } finally {
        // The lease the check took: given back whatever came of the resolution (a no-op once it settled).
        if (check.owner !== undefined) await ledger.transition(sequenceId, op.release(check.owner, { extraSends: 0 })).catch(() => {});
      }
    });
    const base: Resolved = {
      sequenceId,
      resolvedAs: resolution.outcome,
      version: resolved.version,
      event: resolution.outcome === 'submitted' ? 'transfer.submitted' : 'transfer.failed',
      streamId: resolved.streamId,
      forced,
      ...(checked ? { checked } : {}),
    };
    if (resolution.outcome === 'not-sent') return base;
    await this.#addTracker(sequenceId, resolved.version);
    return { ...base, trackJobId: trackJobId(sequenceId) };
  }

  /**
   * The provider check of a resolve (docs/contract.md section 10). A transfer that is not (or no
   * longer) in submitting is left to settle(), which refuses it with its state. `submitted`: the
   * provider's records under the operator's txid must hold exactly this transfer's (its sequenceId on
   * it): a found record proves the send was accepted, whoever sends or looks meanwhile, so no lease is
   * needed. `not-sent`: the send lease is taken first (refused while a runner holds a live one), so the
   * lookup is made after the last send's lease ended and no runner sends between the lookup and the
   * resolution (which is made under that lease); only `absent` lets it through.
   */
  async #check(sequenceId: string, resolution: Resolution): Promise<Check> {
    const { ledger, custody } = this.#options;
    const record = await ledger.get(sequenceId);
    if (record?.state !== TransferState.SUBMITTING) return {};
    // A runner is sending or looking it up this instant: settle() says so (LEASE_HELD), nothing is asked.
    if (record.leaseOwner !== undefined && (record.leaseUntil ?? 0) > (await ledger.now())) return {};
    if (resolution.outcome === 'submitted' && (resolution.txid === undefined || resolution.txid === '')) {
      return {
        refused: new ResolveRefusedError(
          'TXID_REQUIRED',
          `resolving ${sequenceId} as submitted needs the provider's txid of it (or force)`,
        ),
      };
    }
    if (!custody) {
      return {
        refused: new ResolveRefusedError(
          'NO_PROVIDER',
          'this process has no custody provider to check the resolution with (only force is accepted)',
        ),
      };
    }
    const known: KnownTransfer = {
      sequenceId,
      ...record.match,
      firstSentAt: record.firstSentAt,
      heldByOthers: (records: readonly ListedTransfer[]) => ledger.heldByOthers(sequenceId, records),
    };
    const wallet = { walletId: record.walletId, coin: record.coin };
    if (resolution.outcome === 'submitted') {
      const txid = resolution.txid!;
      const found = await lookUp(custody, wallet, known, txid);
      if ('refused' in found) return found;
      // The adapter's finding under that txid (as reconciliation verifies a broadcast): a record carrying
      // this sequenceId, or one its rules identify as this transfer's; one carrying another sequenceId never is.
      const ours = found.kind === 'found' && (found.transfer.sequenceId ?? sequenceId) === sequenceId;
      if (found.kind === 'found' && ours && txidEquals(found.transfer.txid, txid)) {
        return { checked: { finding: 'found', transactionId: found.transfer.id, txid: found.transfer.txid }, found: found.transfer };
      }
      return { refused: disagreement(sequenceId, found, `the provider shows no transfer ${sequenceId} under txid ${txid}`) };
    }
    const owner = `operator-${randomUUID()}`;
    const taken = await ledger.transition(sequenceId, op.takeLease(owner, custody.leaseMs));
    if (!taken.ok) return {}; // a live lease or another state: settle() refuses it, saying which
    const found = await lookUp(custody, wallet, known);
    if (!('refused' in found) && found.kind === 'absent') return { checked: { finding: 'absent' }, owner };
    await ledger.transition(sequenceId, op.release(owner, { extraSends: 0 })).catch(() => {});
    if ('refused' in found) return found;
    if (found.kind === 'found') {
      return {
        refused: new ResolveRefusedError(
          'PROVIDER_FOUND',
          `the provider shows transfer ${sequenceId} (record ${found.transfer.id}${found.transfer.txid ? `, txid ${found.transfer.txid}` : ''}): it was sent, not resolved as not-sent`,
          { transactionId: found.transfer.id, txid: found.transfer.txid },
        ),
      };
    }
    return { refused: disagreement(sequenceId, found, '') };
  }

  /**
   * Polls the tracking of a submitted transfer now: its tracking job, waiting for its next poll, runs
   * at once (that poll takes its slot in the request budget like any other); one that is due or
   * running is left as it is; a missing or ended one is added, polling at once. Refused
   * (RecheckRefusedError) for an unknown transfer and for every state but submitted: nothing is polled
   * before a transfer is submitted (its submission looks it up itself) nor after it ended.
   */
  async recheck(actor: Actor, sequenceId: string, reason: string): Promise<Rechecked> {
    return this.#audited('recheck', actor, { sequenceId, reason, forced: false }, async () => {
      const { ledger } = this.#options;
      const record = await ledger.get(sequenceId);
      if (!record) throw new RecheckRefusedError('NOT_FOUND', `no transfer with sequenceId ${sequenceId}`);
      if (record.state !== TransferState.SUBMITTED) {
        throw new RecheckRefusedError(
          'WRONG_STATE',
          `transfer ${sequenceId} is ${record.state}: only a submitted transfer is tracked, there is nothing to poll`,
          { state: record.state },
        );
      }
      const outcome = await this.#withTrackers((trackers) => trackers.pollNow(sequenceId));
      return { outcome, value: { sequenceId, outcome, trackJobId: trackJobId(sequenceId) } };
    });
  }

  /**
   * Ends the ledger's recovery window now (epoch.ts): workers send again without looking each transfer
   * up first. Also when no window is open (nothing to end, `before` says so); NoEpochError, nothing
   * written, when the ledger has no epoch.
   */
  async acceptEpoch(actor: Actor, reason: string): Promise<EpochAccepted> {
    return this.#audited('accept-epoch', actor, { sequenceId: '', reason, forced: false }, async () => {
      const { ledger, replicas } = this.#options;
      const before = await ledger.epoch.refresh();
      const state = await ledger.writeReplicated(
        replicas,
        () => ledger.epoch.accept(),
        // Without an epoch nothing was written, and the refusal promises nothing.
        (accepted) => (accepted.id === undefined ? 'nothing' : 'written'),
        (acknowledgement, timeoutMs) => new ReplicasBehindError('accept-epoch', acknowledgement, timeoutMs),
      );
      if (state.id === undefined) throw new NoEpochError();
      return { outcome: 'accepted', value: { before, state } };
    });
  }

  /**
   * Runs one action for `actor` (operators only) and audits its outcome, whether it returned or threw.
   * An error the action did not expect is audited as `error` when Redis still takes the entry, and
   * rethrown as it was.
   */
  async #audited<A extends Action, T>(
    action: A,
    actor: Actor,
    target: { sequenceId: string; reason: string; forced: boolean },
    run: () => Promise<{ outcome: ActionOutcome<A>; value: T }>,
  ): Promise<T> {
    checkInput(actor, target.reason);
    let done: { outcome: ActionOutcome<A>; value: T };
    try {
      if (actor.role !== 'operator') throw new ForbiddenError(action, actor.role);
      done = await run();
    } catch (error) {
      const outcome = outcomeOf(error);
      try {
        await this.#record(action, actor, target, outcome);
      } catch (auditError) {
        // Redis failed the action and then the entry: the action's own error says more.
        if (outcome === 'error') throw error;
        throw new AuditNotWrittenError(action, outcome, auditError);
      }
      throw error;
    }
    try {
      await this.#record(action, actor, target, done.outcome);
    } catch (auditError) {
      throw new AuditNotWrittenError(action, done.outcome, auditError);
    }
    return done.value;
  }

  async #record(
    action: Action,
    actor: Actor,
    target: { sequenceId: string; reason: string; forced: boolean },
    outcome: ActionOutcome,
  ): Promise<void> {
    this.#options.onAction?.(action, outcome);
    await this.#options.audit.append({
      user: actor.name,
      role: actor.role,
      via: actor.via,
      remote: actor.remote ?? '',
      action,
      sequenceId: target.sequenceId,
      reason: target.reason,
      outcome,
      forced: target.forced ? 'true' : 'false',
    });
  }

  /**
   * The transfer's one tracking job, added as the submit handler and reconciliation add it
   * (Trackers.ensure: same queue, name, job id and options, so this is idempotent; a tracker left
   * completed or failed from before is replaced), polling at once. Should this fail after the
   * resolution was recorded (with its tracker outbox entry), reconciliation adds it on its next run.
   */
  async #addTracker(sequenceId: string, version: number): Promise<void> {
    try {
      await this.#withTrackers((trackers) => trackers.ensure(sequenceId, { replaceEnded: true, atOnce: true }));
    } catch (error) {
      throw new TrackerNotAddedError(sequenceId, version, error);
    }
  }

  /** Runs `use` with the process's Trackers, or (the CLI) with one on a queue opened for it and closed after. */
  async #withTrackers<T>(use: (trackers: Trackers) => Promise<T>): Promise<T> {
    const { redis, ledger, queuePrefix, trackers } = this.#options;
    if (trackers) return use(trackers);
    const queue = new Queue(QueueName.TRACK, { connection: redis, prefix: queuePrefix });
    try {
      // Every use of it polls at once (atOnce): the first poll's delay is never read.
      return await use(new Trackers(queue, ledger, 0));
    } finally {
      await queue.close();
    }
  }
}

/** What transfer.cancelled's `by` has said since cancels exist: `cli`, `http:<user>`, `http`. */
function cancelledBy(actor: Actor): string {
  if (actor.via === 'cli') return 'cli';
  return actor.name === '' ? 'http' : `http:${actor.name}`;
}

/** The callers check what people typed, with their own messages; this catches a caller that did not. */
function checkInput(actor: Actor, reason: string): void {
  if (!isOperatorReason(reason)) throw new TypeError(`an operator action's reason must be one line of 1-${MAX_REASON_LENGTH} characters`);
  if (actor.name.length > MAX_ACTOR_NAME || CONTROL.test(actor.name)) {
    throw new TypeError(`an actor's name must be one line of at most ${MAX_ACTOR_NAME} characters`);
  }
}

function outcomeOf(error: unknown): ActionOutcome {
  if (error instanceof OperationError) return error.outcome;
  if (error instanceof NotReplicatedError) return 'not-replicated';
  if (error instanceof VersionMismatchError) return 'version-mismatch';
  return 'error';
}

/**
 * What the provider check decided: refused, or let through with what it found (`found`: the record to
 * store; `owner`: the send lease it holds for the resolution). Empty: not checked (forced, or a state
 * that settle() refuses).
 */
type Check = { refused: ResolveRefusedError } | { checked?: ProviderCheck; found?: ListedTransfer; owner?: string };

/** One lookup of the check, by sequenceId or (`txid`) by txid; a failure to ask is a refusal. */
async function lookUp(
  custody: OperationsCustody,
  wallet: { walletId: string; coin: string },
  known: KnownTransfer,
  txid?: string,
): Promise<TransferFinding | { refused: ResolveRefusedError }> {
  const deadline = new Deadline(custody.deadlineMs);
  try {
    // Settling a transfer comes right after sends in the budget (budget.ts): an operator waits for it.
    // Not counted on the transfer's record (`counted`): a refused check writes nothing to the ledger.
    const budget = { klass: BudgetClass.SETTLE, member: known.sequenceId, counted: true };
    return await custody.port.findTransfer(wallet, known, { budget, signal: deadline.signal, ...(txid === undefined ? {} : { txid }) });
  } catch (error) {
    const code = isCustodyError(error) ? error.code : 'INTERNAL_ERROR';
    const details: Record<string, string | number> = { code };
    if (isCustodyError(error) && error.retryAfterMs !== undefined)
      details.retryAfterSeconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000));
    return {
      refused: new ResolveRefusedError(
        'PROVIDER_UNREACHABLE',
        `the provider could not be asked about transfer ${known.sequenceId} (${code}): nothing decided, try again`,
        details,
      ),
    };
  } finally {
    deadline.clear();
  }
}

/** A finding that does not let the resolution through (`absent` for a txid: the provider disagrees). */
function disagreement(sequenceId: string, found: TransferFinding, absentMessage: string): ResolveRefusedError {
  if (found.kind === 'ambiguous' || found.kind === 'unreadable') {
    return new ResolveRefusedError(
      'PROVIDER_UNSURE',
      `the provider's answer cannot tell which record is transfer ${sequenceId}'s (${found.kind}): check it by hand and resolve with force`,
      { finding: found.kind },
    );
  }
  const other = found.kind === 'found' ? `the provider's record under that txid is not transfer ${sequenceId}'s` : absentMessage;
  return new ResolveRefusedError('PROVIDER_DISAGREES', other, { finding: found.kind });
}

/** One resolve's write, and what its answer rests on (Ledger.writeReplicated) when it is refused. */
type Settled =
  { resolved: Extract<TransitionResult, { ok: true }>; restsOn: 'written' } | { refused: ResolveRefusedError; restsOn: AnswerRestsOn };

async function settle(
  ledger: Ledger,
  sequenceId: string,
  outcome: Resolution['outcome'],
  reason: string,
  check: { found?: ListedTransfer; owner?: string },
): Promise<Settled> {
  const record = await ledger.get(sequenceId);
  if (!record) return { refused: new ResolveRefusedError('NOT_FOUND', `no transfer with sequenceId ${sequenceId}`), restsOn: 'nothing' };
  // A state other than submitting may be an earlier resolve's, answered NOT_REPLICATED: this answer
  // then rests on it (`held`), and a resolve again is how the operator learns that the replicas have it.
  // Checked here for a clear message; the transition below checks again, atomically.
  if (record.state !== TransferState.SUBMITTING) return { refused: wrongState(sequenceId, record.state), restsOn: 'held' };
  const resolved = await ledger.transition(sequenceId, resolution(record, outcome, reason, check));
  if (resolved.ok) {
    // Kept as tracking keeps a found record: the tracker's first run goes straight to the wallet transaction.
    if (check.found) await ledger.rememberFound(sequenceId, check.found).catch(() => {});
    return { resolved, restsOn: 'written' };
  }
  return {
    refused: refusal(sequenceId, resolved),
    restsOn: resolved.state === TransferState.SUBMITTING ? 'nothing' : 'held',
  };
}

/**
 * The transition that settles the transfer. `lease: free` makes the ledger itself refuse while a runner
 * holds a live lease (it is sending or looking the transfer up this instant), so the operator never
 * races a runner; under the check's own lease (`owner`), the ledger refuses if a runner took it over
 * meanwhile. `operator` lets `failed` through although a send may have gone out, which only the
 * provider check (or a person who forced it) may decide.
 */
function resolution(
  record: TransferRecord,
  outcome: Resolution['outcome'],
  reason: string,
  check: { found?: ListedTransfer; owner?: string },
): TransitionRequest {
  const by = { owner: check.owner, found: check.found ? { id: check.found.id, txid: check.found.txid } : undefined };
  if (outcome === 'submitted')
    return op.resolveByOperator({ type: 'transfer.submitted', data: { transfer: null, recoveredBy: 'operator', reason } }, by);
  return op.resolveByOperator(
    {
      type: 'transfer.failed',
      data: { code: FailureCode.OPERATOR_RESOLVED, httpStatus: null, message: reason, attempts: record.sends, resolvedBy: 'operator' },
    },
    by,
  );
}

function wrongState(sequenceId: string, state: string): ResolveRefusedError {
  const why = state === TransferState.SUBMITTED ? ' (already submitted: it is being tracked)' : '';
  return new ResolveRefusedError('WRONG_STATE', `transfer ${sequenceId} is ${state}${why}, not submitting: nothing to resolve`, { state });
}

function refusal(sequenceId: string, result: Extract<TransitionResult, { ok: false }>): ResolveRefusedError {
  if (result.reason === 'lease') {
    // Both times are the ledger's (Redis TIME), so this process's clock does not matter.
    const seconds = Math.max(1, Math.ceil((result.leaseUntil - result.now) / 1000));
    return new ResolveRefusedError(
      'LEASE_HELD',
      `a runner is resolving transfer ${sequenceId} right now (it holds the send lease), try again in ${seconds} s`,
      { state: result.state, retryAfterSeconds: seconds },
    );
  }
  if (result.state !== TransferState.SUBMITTING) return wrongState(sequenceId, result.state);
  return new ResolveRefusedError('REFUSED', `the ledger refused to resolve transfer ${sequenceId} (${result.reason})`, {
    state: result.state,
    reason: result.reason,
  });
}
