import type { Action, ActionOutcome } from './audit.ts';

/**
 * An operator action that did not do what was asked, with a fixed `code` for callers to branch on and
 * the `outcome` its audit entry names. Nothing was changed unless the subclass says otherwise.
 */
export abstract class OperationError extends Error {
  abstract readonly code: string;
  abstract readonly outcome: ActionOutcome;
}

/** The actor's role may not do this action (a viewer); audited as `forbidden`. */
export class ForbiddenError extends OperationError {
  readonly code = 'FORBIDDEN';
  readonly outcome = 'forbidden';
  constructor(action: Action, role: string) {
    super(`a ${role} may not ${action}: operators only`);
    this.name = 'ForbiddenError';
  }
}

/**
 * Why a resolve was refused (changing nothing): the transfer's state, a runner's live lease, or the
 * provider check of docs/contract.md section 10 (skipped with `force`): the provider does not show
 * the operator's txid for this transfer (PROVIDER_DISAGREES), shows the transfer although the operator
 * says it was not sent (PROVIDER_FOUND), cannot tell which record is this transfer's
 * (PROVIDER_UNSURE), or did not answer (PROVIDER_UNREACHABLE); a `submitted` without a txid to check
 * (TXID_REQUIRED); a process with no custody provider to ask (NO_PROVIDER).
 */
export type ResolveRefusal =
  | 'NOT_FOUND'
  | 'WRONG_STATE'
  | 'LEASE_HELD'
  | 'REFUSED'
  | 'TXID_REQUIRED'
  | 'NO_PROVIDER'
  | 'PROVIDER_DISAGREES'
  | 'PROVIDER_FOUND'
  | 'PROVIDER_UNSURE'
  | 'PROVIDER_UNREACHABLE';

const REFUSAL_OUTCOMES = {
  NOT_FOUND: 'not-found',
  WRONG_STATE: 'wrong-state',
  LEASE_HELD: 'lease-held',
  REFUSED: 'refused',
  TXID_REQUIRED: 'txid-required',
  NO_PROVIDER: 'no-provider',
  PROVIDER_DISAGREES: 'provider-disagrees',
  PROVIDER_FOUND: 'provider-found',
  PROVIDER_UNSURE: 'provider-unsure',
  PROVIDER_UNREACHABLE: 'provider-unreachable',
} as const satisfies Record<ResolveRefusal, ActionOutcome<'resolve'>>;

export class ResolveRefusedError extends OperationError {
  readonly code: ResolveRefusal;
  readonly outcome: ActionOutcome<'resolve'>;
  /** Facts for scripts (the state, a delay). */
  readonly details: Record<string, string | number>;
  constructor(code: ResolveRefusal, message: string, details: Record<string, string | number> = {}) {
    super(message);
    this.name = 'ResolveRefusedError';
    this.code = code;
    this.outcome = REFUSAL_OUTCOMES[code];
    this.details = details;
  }
}

/** Why a recheck was refused: no such transfer, or a state in which there is nothing to poll. */
export class RecheckRefusedError extends OperationError {
  readonly code: 'NOT_FOUND' | 'WRONG_STATE';
  readonly outcome: ActionOutcome<'recheck'>;
  readonly details: Record<string, string>;
  constructor(code: 'NOT_FOUND' | 'WRONG_STATE', message: string, details: Record<string, string> = {}) {
    super(message);
    this.name = 'RecheckRefusedError';
    this.code = code;
    this.outcome = code === 'NOT_FOUND' ? 'not-found' : 'wrong-state';
    this.details = details;
  }
}

/** accept-epoch on a ledger without an epoch: nothing to end, nothing written. */
export class NoEpochError extends OperationError {
  readonly code = 'NO_EPOCH';
  readonly outcome = 'no-epoch';
  constructor() {
    super('the ledger has no epoch, so there is no recovery window to end: with LEDGER_INIT=manual run `custody-worker ledger init` first');
    this.name = 'NoEpochError';
  }
}

/**
 * A resolve or an accept-epoch decided on the primary that fewer replicas than required acknowledged
 * within REDIS_REPLICA_TIMEOUT: a failover now could undo it; the same action again is safe. (A
 * cancel throws the producer package's NotReplicatedError, as the package's own cancel() does.)
 */
export class ReplicasBehindError extends OperationError {
  readonly code = 'NOT_REPLICATED';
  readonly outcome = 'not-replicated';
  readonly acknowledged: number;
  readonly required: number;
  readonly timeoutMs: number;
  constructor(action: Action, acknowledgement: { acknowledged: number; required: number }, timeoutMs: number) {
    super(
      `the ${action} was made on the primary, but ${acknowledgement.acknowledged} of ${acknowledgement.required} replicas acknowledged it within ${timeoutMs} ms`,
    );
    this.name = 'ReplicasBehindError';
    this.acknowledged = acknowledgement.acknowledged;
    this.required = acknowledgement.required;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * An action that took effect, after which one more step failed (`cause`): the action stands. The
 * message says what was done, what failed and why, and what comes next.
 */
export abstract class ActionStandsError extends Error {
  abstract readonly code: string;
  constructor(done: string, failed: string, next: string, cause: unknown) {
    super(`${done}, but ${failed} (${(cause as Error).message}); ${next}`, { cause });
    this.name = new.target.name;
  }
}

/**
 * A resolve as submitted was recorded (and audited), but the transfer's tracking job could not be
 * added: the next reconciliation run adds it (the resolution left a tracker outbox entry).
 */
export class TrackerNotAddedError extends ActionStandsError {
  readonly code = 'TRACKER_NOT_ADDED';
  readonly version: number;
  constructor(sequenceId: string, version: number, cause: unknown) {
    super(
      `transfer ${sequenceId} was resolved as submitted (transfer.submitted, version ${version})`,
      'its tracking job could not be added',
      'the next reconciliation run adds it, do not resolve again',
      cause,
    );
    this.version = version;
  }
}

/**
 * The action ended with `outcome`, but its audit entry could not be written (Redis failed between the
 * two). The action's effect stands; doing it again is safe and is audited (it answers as a repeat).
 */
export class AuditNotWrittenError extends ActionStandsError {
  readonly code = 'AUDIT_NOT_WRITTEN';
  readonly outcome: ActionOutcome;
  constructor(action: Action, outcome: ActionOutcome, cause: unknown) {
    super(
      `the ${action} ended ${outcome}`,
      'its audit entry could not be written',
      `the ${action} stands, do it again to have it audited`,
      cause,
    );
    this.outcome = outcome;
  }
}
