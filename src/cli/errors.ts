import { ExitCode } from './exit-codes.ts';

export interface Issue {
  path: string;
  message: string;
}

/**
 * An error the CLI reports as it is: `code` for machines, `message` for people, `issues` when the
 * input had several problems. Its message never carries a configuration value.
 */
export class CliError extends Error {
  readonly code: string;
  readonly exitCode: ExitCode;
  readonly issues: Issue[];
  /** Facts for scripts (a state, a delay), printed one per line in readable mode. */
  readonly details: Record<string, string | number | boolean>;
  constructor(
    code: string,
    message: string,
    exitCode: ExitCode,
    issues: Issue[] = [],
    details: Record<string, string | number | boolean> = {},
  ) {
    super(message);
    this.name = 'CliError';
    this.code = code;
    this.exitCode = exitCode;
    this.issues = issues;
    this.details = details;
  }
}

export function usageError(message: string): CliError {
  return new CliError('USAGE', message, ExitCode.USAGE);
}

export function notFound(message: string): CliError {
  return new CliError('NOT_FOUND', message, ExitCode.NOT_FOUND);
}

export function invalidInput(code: string, message: string, issues: Issue[] = []): CliError {
  return new CliError(code, message, ExitCode.FAILURE, issues);
}

/** The operation is not allowed in the transfer's present state; nothing was changed. */
export function refused(code: string, message: string, details: Record<string, string | number | boolean> = {}): CliError {
  return new CliError(code, message, ExitCode.REFUSED, [], details);
}

/**
 * NOT_REPLICATED (exit 1): `what` was decided on the primary, but fewer replicas than every one online
 * (and at least REDIS_MIN_REPLICAS) acknowledged it within REDIS_REPLICA_TIMEOUT, so a failover now
 * could undo it. `again` says what to run: every such command is safe to run again, and answers only
 * once the replicas hold its result.
 */
export function notReplicated(
  what: string,
  again: string,
  { acknowledged, required }: { acknowledged: number; required: number },
  timeoutMs: number,
): CliError {
  return new CliError(
    'NOT_REPLICATED',
    `${what} was made on the primary, but ${acknowledged} of ${required} replicas acknowledged it within ${timeoutMs} ms: a failover now could lose it; ${again}`,
    ExitCode.FAILURE,
    [],
    { acknowledged, required },
  );
}
