/**
 * The one catalog of the contract's facts (docs/contract.md sections 3 and 4): a transfer's states,
 * which of them end it, the event types, and the failure codes events carry. Everything else derives
 * from here: the worker's ledger (its TypeScript and, when the script is loaded, the terminal set of
 * transition.lua), the event schemas and types of this package, and `schemas/catalog.json`, which
 * producers in other languages read (examples/python-producer does). `npm run schemas` writes it, and a
 * test fails when it differs from this file.
 */

/** A transfer's states, in the order of its life; the last seven end it. */
export const TRANSFER_STATES = [
  'received',
  'gated',
  'submitting',
  'submitted',
  'broadcast',
  'rejected',
  'blocked',
  'failed',
  'expired',
  'cancelled',
  'halted',
] as const;
export type TransferStateName = (typeof TRANSFER_STATES)[number];

/** The states a transfer never leaves: each is reached by publishing the event `transfer.<state>`. */
export const TERMINAL_STATES = [
  'broadcast',
  'rejected',
  'blocked',
  'failed',
  'expired',
  /** v1.3: cancelled before any send of it may have been processed (docs/contract.md section 4, "Cancelling"). */
  'cancelled',
  /** v1.4: the provider ended it for good before it reached the chain (docs/contract.md section 4). */
  'halted',
] as const satisfies readonly TransferStateName[];
export type TerminalStateName = (typeof TERMINAL_STATES)[number];

export const EVENT_TYPES = [
  'transfer.submitted',
  'transfer.unresolved',
  'transfer.broadcast',
  'transfer.rejected',
  'transfer.blocked',
  'transfer.failed',
  'transfer.expired',
  'transfer.cancelled',
  'transfer.halted',
  'reconcile.completed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The event types that end a transfer: `transfer.<terminal state>`. */
export const TERMINAL_EVENT_TYPES = TERMINAL_STATES.map((state) => `transfer.${state}` as const);

/** The codes events carry in `data.code` (what each means: FAILURE_CODE_DOCS). */
export const FailureCode = {
  INVALID_PAYLOAD: 'INVALID_PAYLOAD',
  TRAVEL_RULE_REQUIRED: 'TRAVEL_RULE_REQUIRED',
  TRAVEL_RULE_UNAVAILABLE: 'TRAVEL_RULE_UNAVAILABLE',
  TRACKING_DEADLINE: 'TRACKING_DEADLINE',
  SEND_OUTCOME_UNKNOWN: 'SEND_OUTCOME_UNKNOWN',
  SEQUENCE_ID_IN_USE: 'SEQUENCE_ID_IN_USE',
  OPERATOR_RESOLVED: 'OPERATOR_RESOLVED',
} as const;
export type FailureCode = (typeof FailureCode)[keyof typeof FailureCode];

/**
 * What each failure code means and which event types carry it (docs/events.md is generated from this
 * by `npm run docs`). Typed by FailureCode, so a code without an entry does not compile.
 */
export const FAILURE_CODE_DOCS: Readonly<Record<FailureCode, { events: readonly EventType[]; meaning: string }>> = {
  INVALID_PAYLOAD: {
    events: ['transfer.rejected'],
    meaning: 'The job payload broke docs/contract.md section 3; nothing was sent upstream.',
  },
  TRAVEL_RULE_REQUIRED: {
    events: ['transfer.blocked'],
    meaning: 'The travel rule applies and the job has no travelRule.reference; nothing was sent.',
  },
  TRAVEL_RULE_UNAVAILABLE: {
    events: ['transfer.failed'],
    meaning: 'The travel-rule lookup failed SUBMIT_ATTEMPTS times; nothing was sent.',
  },
  TRACKING_DEADLINE: {
    events: ['transfer.expired'],
    meaning: 'No txid by TRACK_DEADLINE after submission.',
  },
  SEND_OUTCOME_UNKNOWN: {
    events: ['transfer.unresolved', 'transfer.expired'],
    meaning: 'A send may have gone out and neither a lookup nor a resend settled it (unresolved, then expired).',
  },
  SEQUENCE_ID_IN_USE: {
    events: ['transfer.unresolved', 'transfer.expired'],
    meaning:
      'The first send was answered 409 although no earlier send of this transfer may have been processed: the sequenceId is in use upstream by a transaction this worker cannot claim and none of its sends was accepted (unresolved, then expired at TRACK_DEADLINE unless an operator settles it first).',
  },
  OPERATOR_RESOLVED: {
    events: ['transfer.failed'],
    meaning: 'An operator resolved a transfer as failed (CLI `resolve --as failed`).',
  },
};

/** The catalog as data, for `schemas/catalog.json`. */
export function catalogJson(): Record<string, unknown> {
  return {
    transferStates: TRANSFER_STATES,
    terminalStates: TERMINAL_STATES,
    eventTypes: EVENT_TYPES,
    terminalEventTypes: TERMINAL_EVENT_TYPES,
    failureCodes: Object.values(FailureCode),
  };
}
