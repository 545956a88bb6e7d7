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
