import { readFileSync } from 'node:fs';
import { assembleTransitionScript } from '../../packages/producer/src/transition.ts';
import type { Tombstone, TransferRecord } from './record.ts';
import type { NO_RECORD, TransferState } from './states.ts';

/**
 * What a transition asks of the ledger, and how it travels to transition.lua: one JSON object (the
 * script decodes it with cjson), every part named, instead of two dozen positional arguments.
 * Callers do not build these by hand: the named operations (operations.ts) do, and they alone know
 * the record's field names. The type and its one encoder live in the producer package
 * (packages/producer/src/transition.ts), whose cancel() sends the same request to the same script.
 */
export type {
  LeaseRequest,
  RefusalReason,
  EpochCheck,
  RequestContext,
  RequestTarget,
  TransitionRequest,
} from '../../packages/producer/src/transition.ts';
export { encodeRequest, ISO_TIME_LUA } from '../../packages/producer/src/transition.ts';
import type { RefusalReason } from '../../packages/producer/src/transition.ts';

/** `record` is the whole record after the change, or the view the caller asked for (transitionReading). */
export type TransitionResult<R = TransferRecord> =
  | { ok: true; version: number; streamId: string; record: R }
  | {
      ok: false;
      state: TransferState | typeof NO_RECORD;
      reason: RefusalReason;
      /** The lease's end and the ledger's clock at the refusal (both Redis time). */
      leaseUntil: number;
      now: number;
      /** With reason `ended`: the transfer ended before (its record may be gone), as its tombstone says. */
      ended?: Tombstone;
    };

/**
 * The transition script, read from transition.lua (the one source) and assembled as the producer
 * package assembles its shipped copy (packages/producer/src/transition-lua.ts, written from this file by
 * `npm run schemas`; test/producer/schemas.test.ts fails when that copy is stale).
 */
export const TRANSITION_LUA = assembleTransitionScript(readFileSync(new URL('./transition.lua', import.meta.url), 'utf8'));
