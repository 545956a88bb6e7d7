import { loadLedgerConfig } from '../../config/config.ts';
import { SEQUENCE_ID } from '../../../packages/producer/src/payload.ts';
import { ReplicasBehindError, ResolveRefusedError, TrackerNotAddedError } from '../../operations/errors.ts';
import {
  isOperatorReason,
  MAX_REASON_LENGTH,
  type OperationsCustody,
  type Resolution,
  type Resolved,
} from '../../operations/operations.ts';
import { stringOption, type Command } from '../command.ts';
import { txidArgument, withOperatorCustody } from '../custody.ts';
import { CliError, notFound, notReplicated, refused, usageError } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';
import { table } from '../format.ts';
import { auditNotWritten, BY_HELP, BY_OPTION, cliActor, cliOperations } from '../operator.ts';
import { cliLedger, withRedis } from '../redis-run.ts';

const OUTCOMES = ['submitted', 'failed'] as const;
type Outcome = (typeof OUTCOMES)[number];

/** The operation's answer, but named as the CLI's `--as` names it (`failed` is the operation's `not-sent`). */
export type ResolveResult = Omit<Resolved, 'resolvedAs'> & { resolvedAs: Outcome };

export const resolveCommand: Command = {
  name: 'resolve',
  synopsis: 'resolve <sequenceId> --as submitted|failed [--txid TXID] [--force] --reason TEXT',
  summary: 'settle a transfer stuck in submitting (transfer.unresolved), checked with the provider',
  help: `An operator's resolution of a transfer whose send may have gone out but whose outcome the worker
could not settle (transfer.unresolved SEND_OUTCOME_UNKNOWN), whose sequenceId is in use upstream by a
transaction the worker cannot claim (transfer.unresolved SEQUENCE_ID_IN_USE: compare the provider's
record with what the producer signed), or that is stuck in submitting with nobody working on it.
Look the sequenceId up at the provider first (docs/operations.md, "Unresolved transfers"); the
command checks what you say with the provider itself before it changes anything:

  --as submitted   the provider accepted the transfer: give its txid (--txid). Accepted only when
                   the provider's records under that txid hold this transfer (its sequenceId); it
                   then publishes transfer.submitted (data {transfer: null, recoveredBy: "operator",
                   reason}), stores the provider's record id and txid, and adds the tracking job,
                   which publishes transfer.broadcast (or transfer.expired at TRACK_DEADLINE)
  --as failed      the provider never accepted it. The command takes the send lease (refused while
                   a runner holds a live one), looks the sequenceId up itself and accepts only when
                   the provider has no record of it: publishes transfer.failed (code
                   OPERATOR_RESOLVED, message = the reason, resolvedBy "operator"); final
  --txid TXID      with --as submitted: the transfer's txid as the provider shows it
  --force          skip the provider check (and, with --as submitted, the txid): for an answer the
                   worker cannot read or that lists several candidates, after checking by hand;
                   the audit entry says forced=true
  --reason TEXT    required: why, as one line of at most ${MAX_REASON_LENGTH} characters (put a ticket reference
                   here, never personal data); it is published in the event
${BY_HELP}

Refused with exit code 4, changing nothing and publishing nothing, when the transfer is not in
submitting (named: e.g. already submitted, broadcast or failed; a second resolve is refused), a
runner holds a live send lease on it (it is sending or looking it up right now: try again after the
time printed), or the provider check does not agree: PROVIDER_DISAGREES (no record of this transfer
under that txid), PROVIDER_FOUND (--as failed, but the provider shows the transfer: it was sent),
PROVIDER_UNSURE (the answer cannot tell which record is this transfer's), PROVIDER_UNREACHABLE (the
provider did not answer, or the request budget had no slot: try again). Unknown sequenceId: exit 3.
Malformed sequenceId or txid, missing or bad --as/--reason, --as submitted without --txid or --force:
exit 2. If the tracking job cannot be added after a successful resolution (exit 1, the message says
so), the next reconciliation run adds it; do not resolve again.

The lookups go through the worker's request budget in Redis (CUSTODY_MAX_RPS): they wait for a slot
as the worker's own lookups settling a send do. They need the worker's CUSTODY_* settings.

With REDIS_MIN_REPLICAS >= 1 the answer waits until every replica the primary lists online (and at
least REDIS_MIN_REPLICAS) holds the resolution, at most REDIS_REPLICA_TIMEOUT: a failover to a replica
without it would have the transfer sent again. Fewer: exit 1 NOT_REPLICATED, the resolution made on
the primary only; run the same resolve again (safe: it answers exit 4, the transfer no longer in
submitting, once the replicas hold it, and NOT_REPLICATED while they still do not).

--as failed --force is the operator's risk: a runner whose process froze mid-send can resume after it
and write its request. Force it only when the provider shows nothing under the sequenceId and the
send lease ended at least CUSTODY_TIMEOUT + 10 s ago (status shows it), and look once more a minute
later (docs/operations.md, "The risk of --as failed").

Every resolve, whatever its outcome (a refusal too), is one entry of the audit stream
<QUEUE_PREFIX>:audit (who, why, what came of it, whether forced; kept AUDIT_RETENTION).

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX, EVENTS_STREAM, EVENTS_MAXLEN, RETENTION,
TOMBSTONE_RETENTION, REDIS_MIN_REPLICAS, REDIS_REPLICA_TIMEOUT and AUDIT_RETENTION as the worker has them.

Examples:
  custody-worker resolve a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --as submitted --txid 0x4b1d... --reason "in provider console, ticket OPS-123"
  custody-worker resolve a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --as failed --reason "provider: never received, OPS-124" --json`,
  options: {
    as: { type: 'string' },
    txid: { type: 'string' },
    force: { type: 'boolean' },
    reason: { type: 'string' },
    ...BY_OPTION,
  },
  positionals: { min: 1, max: 1, names: '<sequenceId>' },
  async run({ values, positionals, out, env }) {
    const sequenceId = positionals[0]!;
    if (!SEQUENCE_ID.test(sequenceId)) throw usageError('sequenceId must be 1-128 of A-Z a-z 0-9 _ -');
    const outcome = parseOutcome(stringOption(values, 'as'));
    const force = values.force === true;
    const txid = values.txid === undefined ? undefined : txidArgument(values);
    if (outcome === 'submitted' && txid === undefined && !force) {
      throw usageError("--as submitted needs --txid: the provider's txid of the transfer, checked with the provider (or --force)");
    }
    if (outcome === 'failed' && txid !== undefined) throw usageError('--txid goes with --as submitted only');
    const reason = parseReason(stringOption(values, 'reason'));
    const actor = cliActor(stringOption(values, 'by'));
    const config = loadLedgerConfig(env);
    const resolution: Resolution =
      outcome === 'submitted' ? { outcome, ...(txid === undefined ? {} : { txid }), force } : { outcome: 'not-sent', force };

    const result = await withRedis(config.redis, out, async (redis) => {
      const resolve = async (custody?: OperationsCustody) => {
        const operations = cliOperations(redis, cliLedger(redis, config), config, { custody });
        const resolved = await operations.resolve(actor, sequenceId, resolution, reason).catch((error: unknown) => {
          throw cliErrorOf(error, sequenceId, outcome);
        });
        return asOutput(resolved, outcome);
      };
      // Forced: nothing is asked of the provider, so its settings are not needed.
      return force ? resolve() : withOperatorCustody(env, out, redis, resolve);
    });
    out.result(result, formatResult);
  },
};

/** The operation's answer as the CLI has always printed it (`--as failed` is the operation's `not-sent`). */
function asOutput(resolved: Resolved, outcome: Outcome): ResolveResult {
  const { sequenceId, version, event, streamId, trackJobId, forced, checked } = resolved;
  return {
    sequenceId,
    resolvedAs: outcome,
    version,
    event,
    streamId,
    ...(trackJobId === undefined ? {} : { trackJobId }),
    forced,
    ...(checked === undefined ? {} : { checked }),
  };
}

function cliErrorOf(error: unknown, sequenceId: string, outcome: Outcome): unknown {
  if (error instanceof ResolveRefusedError) {
    return error.code === 'NOT_FOUND' ? notFound(error.message) : refused(error.code, error.message, error.details);
  }
  if (error instanceof ReplicasBehindError) {
    return notReplicated(
      `the resolution of ${sequenceId} as ${outcome}`,
      `run the same resolve again: it is safe, and once the replicas have it, it answers that the transfer is no longer submitting (exit 4)${outcome === 'submitted' ? '; the next reconciliation run adds its tracking job' : ''}`,
      error,
      error.timeoutMs,
    );
  }
  if (error instanceof TrackerNotAddedError) return new CliError(error.code, error.message, ExitCode.FAILURE);
  return auditNotWritten(error);
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
  if (!isOperatorReason(reason)) throw usageError('--reason must be one line without control characters');
  return reason;
}

function formatResult(result: ResolveResult): string {
  const rows: Array<[string, unknown]> = [
    ['sequenceId', result.sequenceId],
    ['resolved as', result.resolvedAs],
    ['event', `${result.event} version ${result.version} (stream id ${result.streamId})`],
    ['provider check', providerCheck(result)],
  ];
  if (result.trackJobId !== undefined)
    rows.push(['tracking', `job ${result.trackJobId} added: transfer.broadcast follows once the provider shows a txid`]);
  else rows.push(['final', 'yes: no further event for this transfer']);
  return table(rows);
}

function providerCheck(result: ResolveResult): string {
  if (result.forced) return 'skipped (--force): recorded as forced';
  if (result.checked?.finding === 'found') return `found: record ${result.checked.transactionId}, txid ${result.checked.txid}`;
  return 'no record of the sequenceId at the provider';
}
