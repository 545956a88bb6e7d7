import type { Command } from './command.ts';

/** The usage text: every command, the common options and the exit codes. */
export function usage(commands: readonly Command[]): string {
  // Longer synopses get their summary on the next line, so the list stays within about 100 columns.
  const width = 42;
  const line = (synopsis: string, summary: string) =>
    synopsis.length > width ? `  ${synopsis}\n  ${' '.repeat(width)}  ${summary}` : `  ${synopsis.padEnd(width)}  ${summary}`;
  return `custody-worker: operate the custody transfer worker from a shell

Usage: custody-worker <command> [options]      (from the repository: npm run cli -- <command> ...)

Commands:
${commands.map((command) => line(command.synopsis, command.summary)).join('\n')}
${line('help [command]', 'this text, or the details of one command')}

Options of every command:
  --json       exactly one JSON document on stdout (events: one JSON object per line);
               errors are then one JSON object {"error": {"code", "message", ...}} on stderr
  -h, --help   the command's details

Configuration: the worker's environment variables. enqueue, status and events need only REDIS_URL
(or REDIS_CLUSTER_NODES), QUEUE_PREFIX and EVENTS_STREAM; resolve also reads EVENTS_MAXLEN,
RETENTION, TOMBSTONE_RETENTION, REDIS_MIN_REPLICAS, REDIS_REPLICA_TIMEOUT and AUDIT_RETENTION (cancel
too), ledger those and LEDGER_INIT, LEDGER_RECOVERY_WINDOW and TRACK_DEADLINE; webhooks needs those of
enqueue and WEBHOOK_ENDPOINTS and DASHBOARD_METADATA_KEYS; the custody commands need the CUSTODY_*
variables as well (the worker's whole configuration must be valid); hash-secret none.

Replicas: with REDIS_MIN_REPLICAS >= 1, resolve, cancel, ledger init and ledger accept-epoch answer
only once the replicas hold what they wrote (every replica the primary lists online, at least that
many, within REDIS_REPLICA_TIMEOUT); else exit 1 NOT_REPLICATED: run the same command again, it is safe.

Audit: cancel, resolve and ledger accept-epoch are operator actions: each run that reaches Redis,
whatever its outcome (a refusal too), appends one entry to the audit stream <QUEUE_PREFIX>:audit
(who: --by, else the operating-system user; via cli; the reason; the outcome), kept AUDIT_RETENTION.

Exit codes:
  0   ok
  1   invalid input (enqueue), custody API error (its code, e.g. CUSTODY_UNAVAILABLE), Redis error,
      NOT_REPLICATED (written on the primary, too few replicas acknowledged it: run it again)
  2   usage error: unknown command or option, missing or malformed argument
  3   not found: unknown transfer, webhook endpoint or stream entry, or the custody API answered 404
  4   refused: the transfer's state does not allow it now (resolve), or the ledger has no epoch
      (ledger accept-epoch); nothing was changed. cancel: too-late (a send was in flight, or the
      ledger cannot vouch that none was); nothing was changed. webhooks replay --id: the endpoint
      does not receive that event's type
  5   already ended (cancel): the transfer had ended before; nothing was changed
  78  configuration error: one line per missing or malformed variable (named, never its value)
`;
}

export function commandUsage(command: Command): string {
  return `Usage: custody-worker ${command.synopsis} [--json]\n\n${command.summary}\n\n${command.help}\n`;
}
