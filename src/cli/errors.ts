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
  constructor(code: string, message: string, exitCode: ExitCode, issues: Issue[] = []) {
    super(message);
    this.name = 'CliError';
    this.code = code;
    this.exitCode = exitCode;
    this.issues = issues;
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
