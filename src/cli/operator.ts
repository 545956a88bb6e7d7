import { userInfo } from 'node:os';
import type { loadLedgerConfig } from '../config/config.ts';
import { createKeys } from '../ledger/keys.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { AuditLog, type Actor } from '../operations/audit.ts';
import { AuditNotWrittenError } from '../operations/errors.ts';
import { Operations, type OperationsCustody } from '../operations/operations.ts';
import type { RedisClient } from '../redis.ts';
import { CliError, usageError } from './errors.ts';
import { ExitCode } from './exit-codes.ts';

/** `--by NAME`: who runs an operator action, for the audit stream (docs/cli.md). */
export const BY_OPTION = { by: { type: 'string' } } as const;

/** The help text's line for `--by`. */
export const BY_HELP = `  --by NAME        who does this, as the audit stream records it (default: the operating-system
                   user running the command)`;

/**
 * The CLI's actor: an operator (whoever can reach Redis with the worker's settings can write the ledger
 * anyway), named by `--by` or else the operating-system user.
 */
export function cliActor(by: string | undefined): Actor {
  if (by !== undefined) {
    const name = by.trim();
    // eslint-disable-next-line no-control-regex
    if (name === '' || name.length > 128 || /[\u0000-\u001f\u007f-\u009f]/.test(name)) {
      throw usageError('--by must be one line of 1-128 characters');
    }
    return { name, role: 'operator', via: 'cli' };
  }
  return { name: osUser(), role: 'operator', via: 'cli' };
}

function osUser(): string {
  try {
    return userInfo().username || 'cli';
  } catch {
    // A user id without a passwd entry (a container's arbitrary uid).
    return 'cli';
  }
}

/** The operator actions as the worker's own, audited on the worker's audit stream. */
export function cliOperations(
  redis: RedisClient,
  ledger: Ledger,
  config: ReturnType<typeof loadLedgerConfig>,
  options: { checkSettings?: boolean; custody?: OperationsCustody } = {},
): Operations {
  return new Operations({
    redis,
    ledger,
    audit: new AuditLog(redis, createKeys(config.queue.prefix, config.queue.eventsStream).audit, config.audit.retentionMs),
    queuePrefix: config.queue.prefix,
    replicas: config.replicas,
    checkSettings: options.checkSettings,
    custody: options.custody,
  });
}

/** An action whose audit entry could not be written: exit 1, saying that it stands and is safe to repeat. */
export function auditNotWritten(error: unknown): unknown {
  return error instanceof AuditNotWrittenError ? new CliError(error.code, error.message, ExitCode.FAILURE) : error;
}
