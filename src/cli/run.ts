import type { Readable, Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import { ConfigError } from '../config/config.ts';
import { isCustodyError } from '../custody/errors.ts';
import type { Command } from './command.ts';
import { bitgoCommand } from './commands/bitgo.ts';
import { cancelCommand } from './commands/cancel.ts';
import { enqueueCommand } from './commands/enqueue.ts';
import { eventsCommand } from './commands/events.ts';
import { getTransferCommand } from './commands/get-transfer.ts';
import { hashSecretCommand } from './commands/hash-secret.ts';
import { ledgerCommand } from './commands/ledger.ts';
import { resolveCommand } from './commands/resolve.ts';
import { statusCommand } from './commands/status.ts';
import { travelRuleCommand } from './commands/travel-rule.ts';
import { walletTransactionCommand } from './commands/wallet-transaction.ts';
import { webhooksCommand } from './commands/webhooks.ts';
import { CliError, usageError } from './errors.ts';
import { ExitCode } from './exit-codes.ts';
import { Output } from './output.ts';
import { commandUsage, usage } from './usage.ts';

export const COMMANDS: readonly Command[] = [
  enqueueCommand,
  statusCommand,
  eventsCommand,
  resolveCommand,
  cancelCommand,
  ledgerCommand,
  webhooksCommand,
  getTransferCommand,
  walletTransactionCommand,
  travelRuleCommand,
  bitgoCommand,
  hashSecretCommand,
];

export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
}

const HELP_WORDS = new Set(['help', '--help', '-h']);

/** Parses `argv` (without node and the script), runs the command, and returns the exit code. */
export async function runCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  // Looked for before parsing, so that even a usage error comes out as JSON when asked for.
  const out = new Output({ json: argv.includes('--json'), stdout: io.stdout, stderr: io.stderr });
  const [name, ...rest] = argv;

  if (name === undefined || HELP_WORDS.has(name)) {
    const topic = name === 'help' ? rest.find((arg) => !arg.startsWith('-')) : undefined;
    if (topic === undefined) return printHelp(out, usage(COMMANDS));
    const command = COMMANDS.find((candidate) => candidate.name === topic);
    if (command) return printHelp(out, commandUsage(command));
    return unknownCommand(out, topic);
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (!command) return unknownCommand(out, name);

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...rest],
      options: { ...command.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    return report(out, usageError(`${(error as Error).message} (see: custody-worker ${command.name} --help)`));
  }
  if (parsed.values.help === true) return printHelp(out, commandUsage(command));
  const { positionals } = parsed;
  if (positionals.length < command.positionals.min) {
    return report(out, usageError(`missing ${command.positionals.names} (usage: custody-worker ${command.synopsis})`));
  }
  if (positionals.length > command.positionals.max) {
    return report(
      out,
      usageError(`unexpected argument "${positionals[command.positionals.max]}" (usage: custody-worker ${command.synopsis})`),
    );
  }

  try {
    return (await command.run({ values: parsed.values, positionals, out, env: io.env, stdin: io.stdin })) ?? ExitCode.OK;
  } catch (error) {
    return report(out, error);
  }
}

function printHelp(out: Output, text: string): ExitCode {
  out.result({ usage: text }, () => text);
  return ExitCode.OK;
}

function unknownCommand(out: Output, name: string): ExitCode {
  out.error(usageError(`unknown command "${name}"`));
  if (!out.json) out.errorText(`\n${usage(COMMANDS)}`);
  return ExitCode.USAGE;
}

/** The one place that turns a failure into a message and an exit code. */
function report(out: Output, error: unknown): ExitCode {
  if (error instanceof CliError) {
    out.error(error);
    return error.exitCode;
  }
  if (error instanceof ConfigError) {
    // Each problem is "VARIABLE: what is wrong", never the value (config.ts).
    const issues = error.problems.map((problem) => {
      const at = problem.indexOf(': ');
      return at < 0 ? { path: 'environment', message: problem } : { path: problem.slice(0, at), message: problem.slice(at + 2) };
    });
    out.error({ code: 'CONFIG', message: 'invalid configuration', issues });
    return ExitCode.CONFIG;
  }
  if (isCustodyError(error)) {
    const details: Record<string, string | number> = { endpoint: error.endpoint };
    if (error.httpStatus !== undefined) details.httpStatus = error.httpStatus;
    if (error.retryAfterMs !== undefined) details.retryAfterMs = error.retryAfterMs;
    if (error.upstreamMessage !== undefined) details.upstreamMessage = error.upstreamMessage;
    // Never error.cause: it is the transport's own error and may describe the request.
    out.error({ code: error.code, message: error.message, details });
    return error.code === 'CUSTODY_NOT_FOUND' ? ExitCode.NOT_FOUND : ExitCode.FAILURE;
  }
  out.error({ code: 'ERROR', message: error instanceof Error ? error.message : String(error) });
  return ExitCode.FAILURE;
}
