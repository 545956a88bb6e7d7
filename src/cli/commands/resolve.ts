import { Queue } from 'bullmq';
import { loadLedgerConfig } from '../../config/config.ts';
import { FailureCode, type EventType } from '../../../packages/producer/src/events.ts';
import { SEQUENCE_ID } from '../../../packages/producer/src/payload.ts';
import {
  Ledger,
  TransferState,
  type AnswerRestsOn,
  type TransferRecord,
  type TransitionRequest,
  type TransitionResult,
} from '../../ledger/ledger.ts';
import { op } from '../../ledger/operations.ts';
import { QueueName, trackJobId } from '../../queues/names.ts';
import { Trackers } from '../../queues/trackers.ts';
import type { RedisClient } from '../../redis.ts';
import { stringOption, type Command } from '../command.ts';
import { CliError, notFound, notReplicated, refused, usageError } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';
import { table } from '../format.ts';
import { cliLedger, withRedis } from '../redis-run.ts';

/** Longest `--reason`: it travels in the event, which consumers store. */
export const MAX_REASON_LENGTH = 500;

const OUTCOMES = ['submitted', 'failed'] as const;
type Outcome = (typeof OUTCOMES)[number];

// Control characters (a newline, an escape sequence) have no place in one line of reason that ends up
// in consumers' logs and in operators' terminals.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export interface ResolveResult {
  sequenceId: string;
  resolvedAs: Outcome;
  /** The version of the event published by the resolution. */
  version: number;
  event: EventType;
  streamId: string;
  /** The tracking job (`--as submitted` only): the transfer is tracked to its txid. */
  trackJobId?: string;
}

export const resolveCommand: Command = {
  name: 'resolve',
  synopsis: 'resolve <sequenceId> --as submitted|failed --reason TEXT',
  summary: 'settle a transfer stuck in submitting (transfer.unresolved) after checking the provider',
  help: `An operator's resolution of a transfer whose send may have gone out but whose outcome the worker
could not settle (transfer.unresolved SEND_OUTCOME_UNKNOWN), whose sequenceId is in use upstream by a
transaction the worker cannot claim (transfer.unresolved SEQUENCE_ID_IN_USE: compare the provider's
record with what the producer signed), or that is stuck in submitting with nobody working on it.
Check the provider's console or API for the sequenceId FIRST (docs/operations.md, "Unresolved transfers"):

  --as submitted   the provider shows it accepted the transfer: publishes transfer.submitted
                   (data {transfer: null, recoveredBy: "operator", reason}) and adds its tracking job,
                   so it ends transfer.broadcast once the provider shows a txid (or transfer.expired
                   at TRACK_DEADLINE)
  --as failed      the provider confirms it never accepted it: publishes transfer.failed
                   (code OPERATOR_RESOLVED, message = the reason, resolvedBy "operator"); final
  --reason TEXT    required: why, as one line of at most ${MAX_REASON_LENGTH} characters (put a ticket reference
                   here, never personal data); it is published in the event

Refused with exit code 4, changing nothing and publishing nothing, when the transfer is not in
submitting (named: e.g. already submitted, broadcast or failed; a second resolve is refused) or a
runner holds a live send lease on it (it is sending or looking it up right now: try again after the
time printed). Unknown sequenceId: exit 3. Malformed sequenceId, missing or bad --as/--reason: exit 2.
If the tracking job cannot be added after a successful resolution (exit 1, the message says so), the
next reconciliation run adds it; do not resolve again.

With REDIS_MIN_REPLICAS >= 1 the answer waits until every replica the primary lists online (and at
least REDIS_MIN_REPLICAS) holds the resolution, at most REDIS_REPLICA_TIMEOUT: a failover to a replica
without it would have the transfer sent again. Fewer: exit 1 NOT_REPLICATED, the resolution made on
the primary only; run the same resolve again (safe: it answers exit 4, the transfer no longer in
submitting, once the replicas hold it, and NOT_REPLICATED while they still do not).

--as failed is the operator's risk: a runner whose process froze mid-send can resume after it and
write its request. Resolve as failed only when the provider shows nothing under the sequenceId and the
send lease ended at least CUSTODY_TIMEOUT + 10 s ago (status shows it), and look once more a minute
later (docs/operations.md, "The risk of --as failed").

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX, EVENTS_STREAM, EVENTS_MAXLEN, RETENTION,
TOMBSTONE_RETENTION, REDIS_MIN_REPLICAS and REDIS_REPLICA_TIMEOUT as the worker has them.

Examples:
  custody-worker resolve a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --as submitted --reason "in provider console, ticket OPS-123"
  custody-worker resolve a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --as failed --reason "provider: never received, OPS-124" --json`,
  options: {
    as: { type: 'string' },
    reason: { type: 'string' },
  },
  positionals: { min: 1, max: 1, names: '<sequenceId>' },
  async run({ values, positionals, out, env }) {
    const sequenceId = positionals[0]!;
    if (!SEQUENCE_ID.test(sequenceId)) throw usageError('sequenceId must be 1-128 of A-Z a-z 0-9 _ -');
    const outcome = parseOutcome(stringOption(values, 'as'));
    const reason = parseReason(stringOption(values, 'reason'));
    const config = loadLedgerConfig(env);

    const result = await withRedis(config.redis, out, async (redis) => {
      const ledger = cliLedger(redis, config);
      const attempt = await ledger.writeReplicated(
        config.replicas,
        () => settle(ledger, sequenceId, outcome, reason),
        (settled) => settled.restsOn,
        (acknowledgement, timeoutMs) =>
          notReplicated(
            `the resolution of ${sequenceId} as ${outcome}`,
            `run the same resolve again: it is safe, and once the replicas have it, it answers that the transfer is no longer submitting (exit 4)${outcome === 'submitted' ? '; the next reconciliation run adds its tracking job' : ''}`,
            acknowledgement,
            timeoutMs,
          ),
      );
      if ('refused' in attempt) throw attempt.refused;
      const { resolved } = attempt;
      const base: ResolveResult = {
        sequenceId,
        resolvedAs: outcome,
        version: resolved.version,
        event: eventOf(outcome),
        streamId: resolved.streamId,
      };
      if (outcome === 'failed') return base;
      await addTracker(redis, ledger, config.queue.prefix, sequenceId, resolved.version);
      return { ...base, trackJobId: trackJobId(sequenceId) };
    });
    out.result(result, formatResult);
  },
};

/** One resolve's write, and what its answer rests on (Ledger.writeReplicated) when it is refused. */
type Settled = { resolved: Extract<TransitionResult, { ok: true }>; restsOn: 'written' } | { refused: CliError; restsOn: AnswerRestsOn };

async function settle(ledger: Ledger, sequenceId: string, outcome: Outcome, reason: string): Promise<Settled> {
  const record = await ledger.get(sequenceId);
  if (!record) return { refused: notFound(`no transfer with sequenceId ${sequenceId}`), restsOn: 'nothing' };
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

function parseOutcome(value: string | undefined): Outcome {
  if (value === undefined) throw usageError('--as is required: submitted or failed');
  if (!(OUTCOMES as readonly string[]).includes(value)) throw usageError(`--as must be submitted or failed, not "${value.slice(0, 40)}"`);
  return value as Outcome;
}

function parseReason(value: string | undefined): string {
  if (value === undefined) throw usageError('--reason is required: why the transfer is resolved this way (published in the event)');
  const reason = value.trim();
  if (reason === '') throw usageError('--reason must not be empty');
  if ([...reason].length > MAX_REASON_LENGTH) throw usageError(`--reason must be at most ${MAX_REASON_LENGTH} characters`);
  if (CONTROL.test(reason)) throw usageError('--reason must be one line without control characters');
  return reason;
}

function eventOf(outcome: Outcome): EventType {
  return outcome === 'submitted' ? 'transfer.submitted' : 'transfer.failed';
}

/**
 * The transition that settles the transfer. `lease: free` makes the ledger itself refuse while a runner
 * holds a live lease (it is sending or looking the transfer up this instant), so the operator never
 * races a runner; `operator` lets `failed` through although a send may have gone out, which only a
 * person who checked the provider may decide.
 */
function resolution(record: TransferRecord, outcome: Outcome, reason: string): TransitionRequest {
  if (outcome === 'submitted')
    return op.resolveByOperator({ type: 'transfer.submitted', data: { transfer: null, recoveredBy: 'operator', reason } });
  return op.resolveByOperator({
    type: 'transfer.failed',
    data: { code: FailureCode.OPERATOR_RESOLVED, httpStatus: null, message: reason, attempts: record.sends, resolvedBy: 'operator' },
  });
}

function wrongState(sequenceId: string, state: string): CliError {
  const why = state === TransferState.SUBMITTED ? ' (already submitted: it is being tracked)' : '';
  return refused('WRONG_STATE', `transfer ${sequenceId} is ${state}${why}, not submitting: nothing to resolve`, { state });
}

function refusal(sequenceId: string, result: Extract<TransitionResult, { ok: false }>): CliError {
  if (result.reason === 'lease') {
    // Both times are the ledger's (Redis TIME), so this process's clock does not matter.
    const seconds = Math.max(1, Math.ceil((result.leaseUntil - result.now) / 1000));
    return refused(
      'LEASE_HELD',
      `a runner is resolving transfer ${sequenceId} right now (it holds the send lease), try again in ${seconds} s`,
      { state: result.state, retryAfterSeconds: seconds },
    );
  }
  if (result.state !== TransferState.SUBMITTING) return wrongState(sequenceId, result.state);
  return refused('REFUSED', `the ledger refused to resolve transfer ${sequenceId} (${result.reason})`, {
    state: result.state,
    reason: result.reason,
  });
}

/**
 * The transfer's one tracking job, added as the submit handler and reconciliation add it
 * (Trackers.ensure: same queue, name, job id and options, so this is idempotent; a tracker left
 * completed or failed from before is replaced), polling at once. Should this fail after the resolution
 * was recorded (with its tracker outbox entry), reconciliation adds it on its next run: the operator
 * is told so, and must not resolve again (a second resolve is refused anyway).
 */
async function addTracker(redis: RedisClient, ledger: Ledger, prefix: string, sequenceId: string, version: number): Promise<void> {
  const queue = new Queue(QueueName.TRACK, { connection: redis, prefix });
  try {
    await new Trackers(queue, ledger, 0).ensure(sequenceId, { replaceEnded: true });
  } catch (error) {
    throw new CliError(
      'TRACKER_NOT_ADDED',
      `transfer ${sequenceId} was resolved as submitted (transfer.submitted, version ${version}), but its tracking job could not be added (${(error as Error).message}); the next reconciliation run adds it, do not resolve again`,
      ExitCode.FAILURE,
    );
  } finally {
    await queue.close();
  }
}

function formatResult(result: ResolveResult): string {
  const rows: Array<[string, unknown]> = [
    ['sequenceId', result.sequenceId],
    ['resolved as', result.resolvedAs],
    ['event', `${result.event} version ${result.version} (stream id ${result.streamId})`],
  ];
  if (result.trackJobId !== undefined)
    rows.push(['tracking', `job ${result.trackJobId} added: transfer.broadcast follows once the provider shows a txid`]);
  else rows.push(['final', 'yes: no further event for this transfer']);
  return table(rows);
}
