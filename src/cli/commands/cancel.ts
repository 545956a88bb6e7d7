import { CANCEL_TEXT_RULE, isCancelReason } from '../../../packages/producer/src/events.ts';
import { SEQUENCE_ID } from '../../../packages/producer/src/payload.ts';
import { loadLedgerConfig } from '../../config/config.ts';
import type { CancelResult } from '../../ledger/ledger.ts';
import { NotReplicatedError, VersionMismatchError } from '../../../packages/producer/src/errors.ts';
import { stringOption, type Command } from '../command.ts';
import { CliError, notReplicated, usageError } from '../errors.ts';
import { ExitCode } from '../exit-codes.ts';
import { table } from '../format.ts';
import { auditNotWritten, BY_HELP, BY_OPTION, cliActor, cliOperations } from '../operator.ts';
import { cliLedger, withRedis } from '../redis-run.ts';

/** What `cancel` prints (stdout, in both modes, whatever the outcome). */
export type CancelOutput = { sequenceId: string } & CancelResult;

export const cancelCommand: Command = {
  name: 'cancel',
  synopsis: 'cancel <sequenceId> --reason TEXT',
  summary: 'cancel a transfer before any send of it: transfer.cancelled, or too-late once a send was in flight',
  help: `Cancels a transfer before any send of it may have been processed (docs/contract.md section 4,
"Cancelling a transfer"). It takes effect only while the transfer has no record yet, is received or
gated: it then ends the transfer with transfer.cancelled (data {reason, by: "cli"}), and no send of
that sequenceId is ever made by any job, whatever its job id (a job for it completes without a send
and without an event). A sequenceId the worker has never seen is recorded as cancelled, so a job
enqueued for it later ends the same way. The ledger decides the cancel and a send in one atomic step:
they never both succeed.

Prints the sequenceId, the outcome and the state (with --json: {"sequenceId", "outcome", "state", ...}
on stdout), and exits:
  0  cancelled       transfer.cancelled was published (its version is printed); final
  4  too-late        nothing changed: a send of the transfer was in flight at least once (state
                     submitting, even if it was answered "not taken", submitted, ...): it goes on as
                     if no cancel had been asked; or the ledger cannot vouch that no send was made
                     (it has no epoch, or recovers from a loss: "ledger" says so; see ledger --help)
  5  already-ended   nothing changed: the transfer had ended before (its terminal state is printed,
                     cancelled for a second cancel), from its record or, once RETENTION removed it,
                     its tombstone
  1  NOT_REPLICATED  with REDIS_MIN_REPLICAS >= 1, fewer replicas acknowledged the cancel within
                     REDIS_REPLICA_TIMEOUT: decided on the primary, a failover could lose it; cancel again
 78  VERSION_MISMATCH
                     the ledger left as it was: this command's transition script or its EVENTS_STREAM,
                     EVENTS_MAXLEN, RETENTION or TOMBSTONE_RETENTION differ from what the worker
                     recorded at start-up (each differing field is named), or no worker recorded them
                     while the ledger has an epoch; run the worker's version with its settings
  --reason TEXT    required: why, as ${CANCEL_TEXT_RULE} (put a ticket reference here, never
                   personal data); it is published in the event
${BY_HELP}
Malformed sequenceId, missing or bad --reason: exit 2.

Every cancel, whatever its outcome, is one entry of the audit stream <QUEUE_PREFIX>:audit (who, why,
what came of it; kept AUDIT_RETENTION).

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX, EVENTS_STREAM, EVENTS_MAXLEN, RETENTION and
TOMBSTONE_RETENTION as the worker has them (checked against what the worker recorded), and
AUDIT_RETENTION. The same
cancel over HTTP: POST /transfers/:sequenceId/cancel (docs/operations.md, "Cancelling a transfer").

Examples:
  custody-worker cancel a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --reason "duplicate of order A-1001, ticket OPS-77"
  custody-worker cancel a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --reason "OPS-78" --json`,
  options: {
    reason: { type: 'string' },
    ...BY_OPTION,
  },
  positionals: { min: 1, max: 1, names: '<sequenceId>' },
  async run({ values, positionals, out, env }) {
    const sequenceId = positionals[0]!;
    if (!SEQUENCE_ID.test(sequenceId)) throw usageError('sequenceId must be 1-128 of A-Z a-z 0-9 _ -');
    const reason = parseReason(stringOption(values, 'reason'));
    const actor = cliActor(stringOption(values, 'by'));
    const config = loadLedgerConfig(env);

    const result = await withRedis(config.redis, out, async (redis) => {
      const operations = cliOperations(redis, cliLedger(redis, config), config, { checkSettings: true });
      return operations.cancel(actor, sequenceId, reason).catch((error: unknown) => {
        if (error instanceof VersionMismatchError) {
          throw new CliError('VERSION_MISMATCH', error.message, ExitCode.CONFIG, [], {
            fields: error.fields.join(','),
            recorded: error.recorded,
          });
        }
        if (error instanceof NotReplicatedError) {
          throw notReplicated(
            `the cancel of ${sequenceId}`,
            'cancel again: it is safe, and answers already-ended once the replicas have it',
            error,
            config.replicas.timeoutMs,
          );
        }
        throw auditNotWritten(error);
      });
    });
    out.result<CancelOutput>({ sequenceId, ...result }, formatResult);
    if (result.outcome === 'cancelled') return ExitCode.OK;
    return result.outcome === 'too-late' ? ExitCode.REFUSED : ExitCode.ENDED;
  },
};

function parseReason(value: string | undefined): string {
  if (value === undefined) throw usageError('--reason is required: why the transfer is cancelled (published in the event)');
  const reason = value.trim();
  if (!isCancelReason(reason)) throw usageError(`--reason must be ${CANCEL_TEXT_RULE}`);
  return reason;
}

function formatResult(result: CancelOutput): string {
  const rows: Array<[string, unknown]> = [
    ['sequenceId', result.sequenceId],
    ['outcome', result.outcome],
    ['state', result.state],
  ];
  switch (result.outcome) {
    case 'cancelled':
      rows.push(['event', `transfer.cancelled version ${result.version} (stream id ${result.streamId})`]);
      rows.push(['final', 'yes: no send of this sequenceId will be made, by any job']);
      break;
    case 'too-late':
      rows.push([
        'why',
        result.ledger === undefined
          ? 'a send of this transfer was in flight at least once: nothing changed, it goes on'
          : 'the ledger has no epoch or is recovering from a loss: it cannot vouch that no send was made (ledger status)',
      ]);
      break;
    case 'already-ended':
      rows.push(['why', 'the transfer had already ended: nothing changed']);
      break;
  }
  return table(rows);
}
