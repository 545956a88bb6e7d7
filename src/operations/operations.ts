import { Queue } from 'bullmq';
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
 * What an operator says a transfer stuck in submitting became. `submitted`: the provider accepted it
 * (`txid` when the operator has one); `not-sent`: it never did (published as transfer.failed
 * OPERATOR_RESOLVED). `force` asks to skip the provider check of docs/contract.md section 10 and is
 * recorded as `forced`; that check is not made yet (the operator checks, as the CLI's help says), so
 * today the same rules apply with or without it.
 */
export type Resolution = { outcome: 'submitted'; txid?: string; force?: boolean } | { outcome: 'not-sent'; force?: boolean };

export interface Resolved {
  sequenceId: string;
  resolvedAs: Resolution['outcome'];
  /** The version of the event the resolution published. */
  version: number;
  event: EventType;
  streamId: string;
  /** The tracking job (submitted only): the transfer is tracked to its txid. */
  trackJobId?: string;
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
  /** REDIS_MIN_REPLICAS and REDIS_REPLICA_TIMEOUT: every answer waits until the replicas hold it. */
  replicas: ReplicaWait;
  /**
   * A process that writes with its own copy of the transition script (the CLI) checks it against the
   * worker's recorded settings before a cancel (VERSION_MISMATCH); the worker's own need not.
   */
  checkSettings?: boolean;
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
   * Settles a transfer stuck in submitting (transfer.unresolved, or a runner that died mid-send):
   * refused (ResolveRefusedError, nothing changed) when it is not in submitting or a runner holds a
   * live send lease; a tracking job is added for `submitted` (TrackerNotAddedError, after the audit
   * entry, when that fails: the resolution stands).
   */
  async resolve(actor: Actor, sequenceId: string, resolution: Resolution, reason: string): Promise<Resolved> {
    const { ledger, replicas } = this.#options;
    const resolved = await this.#audited('resolve', actor, { sequenceId, reason, forced: resolution.force === true }, async () => {
      const attempt = await ledger.writeReplicated(
        replicas,
        () => settle(ledger, sequenceId, resolution.outcome, reason),
        (settled) => settled.restsOn,
        (acknowledgement, timeoutMs) => new ReplicasBehindError('resolve', acknowledgement, timeoutMs),
      );
      if ('refused' in attempt) throw attempt.refused;
      return { outcome: 'resolved', value: attempt.resolved };
    });
    const base: Resolved = {
      sequenceId,
      resolvedAs: resolution.outcome,
      version: resolved.version,
      event: resolution.outcome === 'submitted' ? 'transfer.submitted' : 'transfer.failed',
      streamId: resolved.streamId,
    };
    if (resolution.outcome === 'not-sent') return base;
    await this.#addTracker(sequenceId, resolved.version);
    return { ...base, trackJobId: trackJobId(sequenceId) };
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
    const { redis, ledger, queuePrefix } = this.#options;
    const queue = new Queue(QueueName.TRACK, { connection: redis, prefix: queuePrefix });
    try {
      await new Trackers(queue, ledger, 0).ensure(sequenceId, { replaceEnded: true });
    } catch (error) {
      throw new TrackerNotAddedError(sequenceId, version, error);
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

/** One resolve's write, and what its answer rests on (Ledger.writeReplicated) when it is refused. */
type Settled =
  { resolved: Extract<TransitionResult, { ok: true }>; restsOn: 'written' } | { refused: ResolveRefusedError; restsOn: AnswerRestsOn };

async function settle(ledger: Ledger, sequenceId: string, outcome: Resolution['outcome'], reason: string): Promise<Settled> {
  const record = await ledger.get(sequenceId);
  if (!record) return { refused: new ResolveRefusedError('NOT_FOUND', `no transfer with sequenceId ${sequenceId}`), restsOn: 'nothing' };
  // A state other than submitting may be an earlier resolve's, answered NOT_REPLICATED: this answer
  // then rests on it (`held`), and a resolve again is how the operator learns that the replicas have it.
  // Checked here for a clear message; the transition below checks again, atomically.
  if (record.state !== TransferState.SUBMITTING) return { refused: wrongState(sequenceId, record.state), restsOn: 'held' };
  const resolved = await ledger.transition(sequenceId, resolution(record, outcome, reason));
  if (resolved.ok) return { resolved, restsOn: 'written' };
  return {
    refused: refusal(sequenceId, resolved),
    restsOn: resolved.state === TransferState.SUBMITTING ? 'nothing' : 'held',
  };
}

/**
 * The transition that settles the transfer. `lease: free` makes the ledger itself refuse while a runner
 * holds a live lease (it is sending or looking the transfer up this instant), so the operator never
 * races a runner; `operator` lets `failed` through although a send may have gone out, which only a
 * person who checked the provider may decide.
 */
function resolution(record: TransferRecord, outcome: Resolution['outcome'], reason: string): TransitionRequest {
  if (outcome === 'submitted')
    return op.resolveByOperator({ type: 'transfer.submitted', data: { transfer: null, recoveredBy: 'operator', reason } });
  return op.resolveByOperator({
    type: 'transfer.failed',
    data: { code: FailureCode.OPERATOR_RESOLVED, httpStatus: null, message: reason, attempts: record.sends, resolvedBy: 'operator' },
  });
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
