import { loadQueueConfig } from '../../config/config.ts';
import { SEQUENCE_ID } from '../../../packages/producer/src/payload.ts';
import { createKeys } from '../../ledger/keys.ts';
import { Ledger } from '../../ledger/ledger.ts';
import { transferView, type TransferView } from '../../ledger/transfer-view.ts';
import type { Command } from '../command.ts';
import { notFound, usageError } from '../errors.ts';
import { eventLine, show, table } from '../format.ts';
import { withRedis } from '../redis-run.ts';

export const statusCommand: Command = {
  name: 'status',
  synopsis: 'status <sequenceId>',
  summary: "a transfer's state, attempts, txid, travel-rule decision and events",
  help: `Prints what the worker's ledger knows about one transfer: its state, send attempts, txid, the
travel-rule gate decision, since when a send's outcome is unknown (while it is submitting), when
transfer.unresolved was published, the end of the send lease while one is held, and its events so
far (the same view as GET /transfers/:sequenceId).
An unknown sequenceId exits 3; a malformed one (not 1-128 of A-Z a-z 0-9 _ -) exits 2.

Needs REDIS_URL (or REDIS_CLUSTER_NODES), QUEUE_PREFIX and EVENTS_STREAM as the worker has them.

Examples:
  custody-worker status a88a1846-b23d-f7e8-2344-f2bddb0c16f9
  custody-worker status a88a1846-b23d-f7e8-2344-f2bddb0c16f9 --json | jq .state`,
  options: {},
  positionals: { min: 1, max: 1, names: '<sequenceId>' },
  async run({ positionals, out, env }) {
    const sequenceId = positionals[0]!;
    if (!SEQUENCE_ID.test(sequenceId)) throw usageError('sequenceId must be 1-128 of A-Z a-z 0-9 _ -');
    const config = loadQueueConfig(env);
    const view = await withRedis(config.redis, out, async (redis) => {
      // Read only: transferView never changes state, so the publishing options below are never used.
      const ledger = new Ledger(redis, createKeys(config.queue.prefix, config.queue.eventsStream), {
        eventsMaxLen: 0,
        retentionMs: 0,
        tombstoneRetentionMs: 0,
      });
      return transferView(ledger, sequenceId);
    });
    if (!view) throw notFound(`no transfer with sequenceId ${sequenceId}`);
    out.result(view, formatView);
  },
};

function formatView(view: TransferView): string {
  const summary = table([
    ['sequenceId', view.sequenceId],
    ['state', view.state],
    ['wallet', view.walletId],
    ['coin', view.coin],
    ['attempts', `${view.attempts} send request(s), ${view.failures} retried failure(s)`],
    ['last error', view.lastError],
    ['txid', view.txid],
    ['travel rule', formatGate(view.gate)],
    ['created', view.createdAt],
    ['updated', view.updatedAt],
    ['submitted', view.submittedAt],
    ['outcome unknown since', view.sendOutcomeUnknownSince === null ? null : `${view.sendOutcomeUnknownSince} (a send may have gone out)`],
    ['unresolved', view.unresolvedAt === null ? null : `${view.unresolvedAt} (transfer.unresolved published; see resolve --help)`],
    [
      'sequenceId in use',
      view.sequenceIdInUseSince === null
        ? null
        : `${view.sequenceIdInUseSince} (another transaction holds it upstream: compare it with what the producer signed, then resolve)`,
    ],
    ['send lease until', view.leaseUntil],
    ['version', view.version],
  ]);
  const events = view.events.length === 0 ? '  (none yet)' : view.events.map((event) => `  ${eventLine(event)}`).join('\n');
  return `${summary}\nevents (${view.events.length}):\n${events}`;
}

/** The gate decision the submit handler stores: outcome, whether the rule applied, whether a reference was given. */
function formatGate(gate: unknown): string {
  if (gate === null || typeof gate !== 'object') return show(gate === null ? 'not checked yet' : gate);
  const decision = gate as { outcome?: unknown; applies?: unknown; reference?: unknown; setting?: unknown; checkedAt?: unknown };
  if (typeof decision.outcome !== 'string') return show(gate);
  const applies = decision.applies === true ? 'rule applies' : 'rule does not apply';
  const reference = decision.reference === true ? ', reference given' : decision.applies === true ? ', no reference' : '';
  const setting = decision.setting === null ? 'none: the provider does not gate' : show(decision.setting);
  return `${decision.outcome} (${applies}${reference}; setting ${setting}; checked ${show(decision.checkedAt)})`;
}
