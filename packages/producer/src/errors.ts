import type { PayloadIssue } from './payload.ts';
import type { SettingDifference, WorkerSettingField } from './worker-settings.ts';

/** Every error the producer throws on purpose carries one of these codes. */
export type ProducerErrorCode =
  | 'INVALID_PAYLOAD'
  | 'INVALID_CANCEL'
  | 'REDIS_UNAVAILABLE'
  | 'ENQUEUE_FAILED'
  | 'NOT_REPLICATED'
  | 'WAIT_TIMEOUT'
  | 'PRODUCER_CLOSED'
  | 'VERSION_MISMATCH'
  | 'WEBHOOK_INVALID';

/** Base class of the producer's typed errors: `instanceof ProducerError`, then switch on `code`. */
export abstract class ProducerError extends Error {
  abstract readonly code: ProducerErrorCode;
}

/** The payload broke docs/contract.md section 3; nothing was enqueued. `issues` names every problem. */
export class InvalidPayloadError extends ProducerError {
  readonly code = 'INVALID_PAYLOAD';
  readonly issues: PayloadIssue[];
  constructor(issues: PayloadIssue[]) {
    super(`invalid submit-transaction payload: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    this.name = 'InvalidPayloadError';
    this.issues = issues;
  }
}

/**
 * The arguments of `cancel()` broke its rules (a sequenceId of section 3; a `reason` of one line, 1-256
 * characters, no control characters): nothing changed, Redis was not contacted. `issues` names each.
 */
export class InvalidCancelError extends ProducerError {
  readonly code = 'INVALID_CANCEL';
  readonly issues: PayloadIssue[];
  constructor(issues: PayloadIssue[]) {
    super(`invalid cancel: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    this.name = 'InvalidCancelError';
    this.issues = issues;
  }
}

export type ProducerOperation = 'submit' | 'events' | 'waitForTerminal' | 'cancel';

/**
 * Redis did not answer within the producer's bound (`submitTimeoutMs`), refused the connection, or the
 * connection was closed. With `maybeEnqueued` false the job was certainly not added (the producer never
 * sent it); with true it may still land. Either way submitting the same payload again is safe: one
 * sequenceId is one transfer, and the job id is derived from it.
 */
export class ProducerUnavailableError extends ProducerError {
  readonly code = 'REDIS_UNAVAILABLE';
  readonly operation: ProducerOperation;
  readonly maybeEnqueued: boolean;
  constructor(operation: ProducerOperation, detail: string, options: { maybeEnqueued?: boolean; cause?: unknown } = {}) {
    super(`Redis unavailable (${operation}): ${detail}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProducerUnavailableError';
    this.operation = operation;
    this.maybeEnqueued = options.maybeEnqueued ?? false;
  }
}

/** BullMQ refused the job for a reason other than the connection (its message is kept, the error is `cause`). */
export class EnqueueError extends ProducerError {
  readonly code = 'ENQUEUE_FAILED';
  readonly jobId: string;
  constructor(jobId: string, cause: unknown) {
    super(`BullMQ refused job ${jobId}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = 'EnqueueError';
    this.jobId = jobId;
  }
}

/**
 * The job was added on the primary, but fewer replicas than `minReplicas` acknowledged it within
 * `replicaTimeoutMs`: a failover now could lose it. Submitting the same payload again is safe (one
 * sequenceId is one transfer, the job id is derived from it) and is what to do. From `cancel()`
 * (`.cancel` names the sequenceId): the cancel's answer was decided on the primary but may not survive
 * a failover; cancel again with the same producer until it resolves.
 */
export class NotReplicatedError extends ProducerError {
  readonly code = 'NOT_REPLICATED';
  readonly jobId: string;
  readonly acknowledged: number;
  readonly required: number;
  /** With `cancel`: the cancel of that sequenceId, not an add (cancel() with `minReplicas`). */
  readonly cancel: string | undefined;
  constructor(jobId: string, acknowledged: number, required: number, timeoutMs: number, cancel?: string) {
    super(
      cancel === undefined
        ? `job ${jobId} was added, but ${acknowledged} of ${required} replicas acknowledged it within ${timeoutMs} ms: submit again`
        : `the cancel of ${cancel} was decided on the primary, but ${acknowledged} of ${required} replicas acknowledged it within ${timeoutMs} ms: a failover now could lose it; cancel again`,
    );
    this.cancel = cancel;
    this.name = 'NotReplicatedError';
    this.jobId = jobId;
    this.acknowledged = acknowledged;
    this.required = required;
  }
}

/** No terminal event within the time given to waitForTerminal. The transfer may still end later. */
export class WaitTimeoutError extends ProducerError {
  readonly code = 'WAIT_TIMEOUT';
  readonly sequenceId: string;
  readonly timeoutMs: number;
  constructor(sequenceId: string, timeoutMs: number) {
    super(`no terminal event for ${sequenceId} within ${timeoutMs} ms`);
    this.name = 'WaitTimeoutError';
    this.sequenceId = sequenceId;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A cancel was refused before anything was written: the transition script this process ships, or the
 * settings it would write with (the events stream, `ledger`'s eventsMaxLen, retentionMs and
 * RETENTION + TOMBSTONE_RETENTION), differ from what the worker recorded in Redis at start-up; or no
 * worker recorded them while the ledger has an epoch (`recorded` false: every field is listed).
 * `fields` names each field that differs, `differences` has both values (a script by its SHA1; none
 * of them is a secret). Align the version or the settings with the worker's, then cancel again.
 */
export class VersionMismatchError extends ProducerError {
  readonly code = 'VERSION_MISMATCH';
  readonly fields: WorkerSettingField[];
  readonly differences: SettingDifference[];
  /** Whether a worker recorded its settings at all. */
  readonly recorded: boolean;
  constructor(differences: SettingDifference[], recorded: boolean) {
    const listed = differences.map((d) => `${d.field} (worker: ${d.worker ?? 'none'}, here: ${d.mine})`).join(', ');
    super(
      recorded
        ? `the worker's transition script or settings differ from this process's, so a cancel here would write what the worker does not: ${listed}; nothing was written. Use the worker's version and its EVENTS_STREAM, EVENTS_MAXLEN, RETENTION and TOMBSTONE_RETENTION, then cancel again`
        : `no worker recorded its transition script and settings, but the ledger has an epoch (a worker older than this process, or the record was lost): nothing can be compared, nothing was written. Start (or upgrade) a worker, which records them at start-up, then cancel again`,
    );
    this.name = 'VersionMismatchError';
    this.fields = differences.map((d) => d.field);
    this.differences = differences;
    this.recorded = recorded;
  }
}

/** The producer was closed: create a new one. */
export class ProducerClosedError extends ProducerError {
  readonly code = 'PRODUCER_CLOSED';
  constructor() {
    super('the producer is closed');
    this.name = 'ProducerClosedError';
  }
}

/** Why `verifyWebhook` refused a request. New reasons may come in minor versions: give a `switch` a default. */
export type WebhookInvalidReason =
  /** A secret is not `whsec_` and the base64 of a key: a setting of yours, not the request. */
  | 'invalid-secret'
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing. */
  | 'missing-headers'
  /** `webhook-timestamp` is not whole Unix seconds. */
  | 'invalid-timestamp'
  /** `webhook-timestamp` is further in the past than the tolerance. */
  | 'timestamp-too-old'
  /** `webhook-timestamp` is further in the future than the tolerance. */
  | 'timestamp-too-new'
  /** No `v1,` signature of the header matches any of the secrets over this id, timestamp and body. */
  | 'no-matching-signature'
  /** Signed, but the body is not a JSON object. */
  | 'invalid-body';

/**
 * `verifyWebhook` refused the request: answer it 4xx and trust nothing in it. `reason` says which check
 * failed; the message never quotes a secret, a signature or the body.
 */
export class WebhookVerificationError extends ProducerError {
  readonly code = 'WEBHOOK_INVALID';
  readonly reason: WebhookInvalidReason;
  constructor(reason: WebhookInvalidReason, detail: string) {
    super(`webhook refused (${reason}): ${detail}`);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}
