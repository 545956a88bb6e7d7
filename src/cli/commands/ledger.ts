import { loadLedgerConfig } from '../../config/config.ts';
import type { EpochState } from '../../ledger/ledger.ts';
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline/promises';
import { stringOption, type Command, type OptionValues } from '../command.ts';
import { notReplicated, refused, usageError } from '../errors.ts';
import { table } from '../format.ts';
import { NoEpochError, ReplicasBehindError } from '../../operations/errors.ts';
import { isOperatorReason, MAX_REASON_LENGTH } from '../../operations/operations.ts';
import { auditNotWritten, BY_HELP, BY_OPTION, cliActor, cliOperations } from '../operator.ts';
import { cliLedger, withRedis } from '../redis-run.ts';

const SUBCOMMANDS = ['status', 'init', 'accept-epoch'] as const;
type Subcommand = (typeof SUBCOMMANDS)[number];

/** The ledger's epoch as the CLI prints it (times as ISO text, the ledger's clock). */
export interface EpochView {
  /** null: the ledger has no epoch (never initialised: LEDGER_INIT=manual, or lost and not yet noticed). */
  epoch: string | null;
  createdAt: string | null;
  /** End of the recovery window; null when there is none. */
  recoveryUntil: string | null;
  /** Whether the ledger's clock is before recoveryUntil: every transfer is looked up before its first send. */
  recoveryActive: boolean;
  /** Epochs this one replaced because the ledger was found lost. */
  supersedes: string[];
  /** The ledger's clock (Redis TIME) when this was read. */
  now: string;
}

export interface LedgerInitResult extends EpochView {
  /** true: this run wrote an epoch (the first, or after a loss); false: the ledger had one already (unchanged). */
  created: boolean;
  /** true: the ledger was declared lost (`--after-loss`): the new epoch has a recovery window. */
  afterLoss: boolean;
}

export interface LedgerAcceptResult extends EpochView {
  /** true: a recovery window was open and ended now; false: none was open (the epoch is unchanged but for acceptedAt). */
  ended: boolean;
  /** The end the window had before (null when none was open). */
  previousRecoveryUntil: string | null;
}

/** accept-epoch's reason when none is given: it had none before the audit stream existed. */
const DEFAULT_ACCEPT_REASON = 'no reason given';

export const ledgerCommand: Command = {
  name: 'ledger',
  synopsis: 'ledger status|init|accept-epoch',
  summary: "the ledger's epoch: show it, initialise it (LEDGER_INIT=manual), end a recovery window",
  help: `The ledger's epoch is an identity written once into Redis, so that a worker can tell that Redis
lost its data (a node promoted empty, a flush). A worker that finds its epoch gone declares the ledger
lost: a new epoch with a recovery window (LEDGER_RECOVERY_WINDOW, default TRACK_DEADLINE) during which
every transfer is looked up at the provider before its first send (runbook "Redis lost its data" in
docs/operations.md).

  status         the epoch id (or none), when it was created, the end of its recovery window (or
                 none), whether that window is open now, and the epochs it superseded; exit 0
  init           says whether this Redis ever held the ledger: asked at a terminal, or given as
                 --fresh (a new deployment: nothing was ever sent through it) or --after-loss (it
                 lost its data, or came back older: a restore, a promoted replica).
                 --fresh writes the first epoch unless the ledger has one, and says which: needed once
                 with LEDGER_INIT=manual before any worker sends (LEDGER_INIT=auto workers do it
                 themselves at start-up); an existing epoch is left as it is. Without a terminal and
                 without either flag, --fresh is assumed (as before this choice existed).
                 --after-loss declares the ledger lost: a new epoch, superseding the one the ledger
                 holds (if any), with a recovery window in which every transfer is looked up at the
                 provider before its first send; run it before the workers start again after a restore
                 from a backup, or after every worker restarted onto an empty or older Redis.
                 Both wait for REDIS_MIN_REPLICAS replicas when set. Exit 0
  accept-epoch   ends the recovery window now: workers send again without looking each transfer up
                 first, which gives up that protection, so only as the runbook says. Exit 0, also when
                 no window was open; exit 4 (NO_EPOCH), changing nothing, when the ledger has no epoch.
                 One entry of the audit stream <QUEUE_PREFIX>:audit, whatever its outcome (kept
                 AUDIT_RETENTION):
  --reason TEXT    why (a ticket reference, never personal data), one line of 1-${MAX_REASON_LENGTH} characters;
                   default "${DEFAULT_ACCEPT_REASON}"
${BY_HELP}

With REDIS_MIN_REPLICAS >= 1, init and accept-epoch answer only once every replica the primary lists
online (and at least REDIS_MIN_REPLICAS) holds the epoch, at most REDIS_REPLICA_TIMEOUT: a failover to
a replica without it would undo the write. Fewer: exit 1 NOT_REPLICATED, written on the primary only;
run the same command again (safe: init leaves an existing epoch as it is, accept-epoch ends the window
again, and each answers only once the replicas hold the epoch).

Every time is the ledger's clock (Redis TIME), printed as ISO 8601.

Needs REDIS_URL (or REDIS_CLUSTER_NODES) and QUEUE_PREFIX as the worker has them; also reads
EVENTS_MAXLEN, RETENTION, TOMBSTONE_RETENTION, LEDGER_INIT, LEDGER_RECOVERY_WINDOW, TRACK_DEADLINE,
REDIS_MIN_REPLICAS, REDIS_REPLICA_TIMEOUT and AUDIT_RETENTION (each must be valid when set).

Examples:
  custody-worker ledger status
  custody-worker ledger init --fresh
  custody-worker ledger init --after-loss
  custody-worker ledger accept-epoch --reason "runbook: redis lost its data, OPS-91" --json`,
  options: {
    fresh: { type: 'boolean' },
    'after-loss': { type: 'boolean' },
    reason: { type: 'string' },
    ...BY_OPTION,
  },
  positionals: { min: 1, max: 1, names: '<subcommand>' },
  async run({ positionals, values, out, env, stdin }) {
    const subcommand = parseSubcommand(positionals[0]!);
    if (subcommand !== 'init' && (values.fresh !== undefined || values['after-loss'] !== undefined)) {
      throw usageError('--fresh and --after-loss go with `ledger init` only');
    }
    const afterLoss = subcommand === 'init' ? await initKind(values, stdin) : false;
    if (subcommand !== 'accept-epoch' && (values.reason !== undefined || values.by !== undefined)) {
      throw usageError('--reason and --by go with `ledger accept-epoch` only');
    }
    const acceptReason = parseAcceptReason(stringOption(values, 'reason'));
    const actor = cliActor(stringOption(values, 'by'));
    const config = loadLedgerConfig(env);
    await withRedis(config.redis, out, async (redis) => {
      const ledger = cliLedger(redis, config);
      if (subcommand === 'status') {
        out.result(view(await ledger.epoch.refresh()), formatStatus);
        return;
      }
      if (subcommand === 'init' && afterLoss) {
        const state = await ledger.writeReplicated(
          config.replicas,
          () => ledger.epoch.declareLost(),
          () => 'written',
          (acknowledgement, timeoutMs) =>
            notReplicated(
              'the epoch declared after a loss',
              'run `ledger init --after-loss` again: it is safe, it only opens a new recovery window',
              acknowledgement,
              timeoutMs,
            ),
        );
        out.result<LedgerInitResult>({ created: true, afterLoss: true, ...view(state) }, formatInit);
        return;
      }
      if (subcommand === 'init') {
        const { created, state } = await ledger.writeReplicated(
          config.replicas,
          async () => {
            const before = await ledger.epoch.refresh();
            const state = before.id === undefined ? await ledger.epoch.init() : before;
            // The script stamps an epoch it creates with the clock of that same call: one that another
            // process (a worker with LEDGER_INIT=auto) wrote between the read and the init is older.
            return { created: before.id === undefined && state.id !== undefined && state.createdAt === state.now, state };
          },
          // An epoch found, not written by this run, may be an earlier init's that was answered NOT_REPLICATED.
          (found) => (found.created ? 'written' : 'held'),
          (acknowledgement, timeoutMs) =>
            notReplicated(
              'the epoch',
              'run `ledger init` again: it is safe, an existing epoch is left as it is',
              acknowledgement,
              timeoutMs,
            ),
        );
        out.result<LedgerInitResult>({ created, afterLoss: false, ...view(state) }, formatInit);
        return;
      }
      const operations = cliOperations(redis, ledger, config);
      const { before, state } = await operations.acceptEpoch(actor, acceptReason).catch((error: unknown) => {
        if (error instanceof NoEpochError) throw refused(error.code, error.message);
        if (error instanceof ReplicasBehindError) {
          throw notReplicated('the end of the recovery window', 'run `ledger accept-epoch` again: it is safe', error, error.timeoutMs);
        }
        throw auditNotWritten(error);
      });
      const open = before.id === state.id && before.recoveryUntil > before.now;
      out.result<LedgerAcceptResult>(
        { ended: open, previousRecoveryUntil: open ? iso(before.recoveryUntil) : null, ...view(state) },
        formatAccept,
      );
    });
  },
};

function parseAcceptReason(value: string | undefined): string {
  if (value === undefined) return DEFAULT_ACCEPT_REASON;
  const reason = value.trim();
  if (!isOperatorReason(reason))
    throw usageError(`--reason must be one line of 1-${MAX_REASON_LENGTH} characters, not blank, without control characters`);
  return reason;
}

function parseSubcommand(value: string): Subcommand {
  if ((SUBCOMMANDS as readonly string[]).includes(value)) return value as Subcommand;
  throw usageError(`unknown ledger subcommand "${value.slice(0, 40)}": status, init or accept-epoch (see: custody-worker ledger --help)`);
}

/**
 * Whether `init` declares a loss: --after-loss or --fresh, else the answer to the question at a
 * terminal, else (a script, as before the choice existed) fresh.
 */
async function initKind(values: OptionValues, stdin: Readable): Promise<boolean> {
  if (values.fresh === true && values['after-loss'] === true) throw usageError('--fresh and --after-loss exclude each other');
  if (values['after-loss'] === true) return true;
  if (values.fresh === true || !(stdin as Readable & { isTTY?: boolean }).isTTY) return false;
  const prompt = createInterface({ input: stdin, output: process.stderr });
  try {
    const answer = await prompt.question(
      'Did this Redis ever hold the ledger (were transfers ever sent through it, before it was emptied, restored or replaced)? [y/n] ',
    );
    if (/^y(es)?$/i.test(answer.trim())) return true;
    if (/^no?$/i.test(answer.trim())) return false;
    throw usageError('answer y (it held the ledger: --after-loss) or n (a new deployment: --fresh)');
  } finally {
    prompt.close();
  }
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function view(state: EpochState): EpochView {
  const hasEpoch = state.id !== undefined;
  return {
    epoch: state.id ?? null,
    createdAt: hasEpoch ? iso(state.createdAt) : null,
    recoveryUntil: hasEpoch && state.recoveryUntil > 0 ? iso(state.recoveryUntil) : null,
    recoveryActive: hasEpoch && state.recoveryUntil > state.now,
    supersedes: state.supersedes,
    now: iso(state.now),
  };
}

function rows(epoch: EpochView): Array<[string, unknown]> {
  return [
    ['epoch', epoch.epoch ?? 'none (not initialised: with LEDGER_INIT=manual, run `ledger init`)'],
    ['created', epoch.createdAt],
    ['recovery until', epoch.recoveryUntil ?? 'none'],
    [
      'recovery active',
      epoch.recoveryActive ? 'yes: every transfer is looked up before its first send' : epoch.epoch === null ? '-' : 'no',
    ],
    ['supersedes', epoch.supersedes.length === 0 ? 'none' : epoch.supersedes.join(', ')],
    ['now', epoch.now],
  ];
}

function formatStatus(epoch: EpochView): string {
  return table(rows(epoch));
}

function formatInit(result: LedgerInitResult): string {
  const what: [string, unknown] = result.afterLoss
    ? [
        'initialised',
        `after a loss: created epoch ${result.epoch ?? '-'}; every transfer is looked up before its first send until ${result.recoveryUntil ?? '-'}`,
      ]
    : result.created
      ? ['initialised', `yes: created epoch ${result.epoch ?? '-'}`]
      : ['initialised', `no: the ledger already has epoch ${result.epoch ?? '-'} (unchanged)`];
  return table([what, ...rows(result)]);
}

function formatAccept(result: LedgerAcceptResult): string {
  const what: [string, unknown] = result.ended
    ? ['accepted', `recovery window ended now (it was open until ${result.previousRecoveryUntil ?? '-'})`]
    : ['accepted', 'no recovery window was open: nothing to end'];
  return table([what, ...rows(result)]);
}
