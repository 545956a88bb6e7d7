import type { Readable } from 'node:stream';
import type { ParseArgsOptionsConfig } from 'node:util';
import type { ExitCode } from './exit-codes.ts';
import type { Output } from './output.ts';

export type OptionValues = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface CommandContext {
  values: OptionValues;
  positionals: string[];
  out: Output;
  env: NodeJS.ProcessEnv;
  stdin: Readable;
}

/** One subcommand: its own file under commands/, its own options, and a run that throws CliError. */
export interface Command {
  name: string;
  /** `name` and its arguments, as the usage text shows them. */
  synopsis: string;
  /** One line for the command list. */
  summary: string;
  /** The rest of `<command> --help`: what it prints, its options, examples. */
  help: string;
  options: ParseArgsOptionsConfig;
  positionals: { min: number; max: number; names: string };
  /** Resolves with the exit code when the result is printed but is not a plain success (cancel); else 0. */
  run(context: CommandContext): Promise<void | ExitCode>;
}

/** The option's text (string options given once; parseArgs keeps the last when repeated). */
export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}
