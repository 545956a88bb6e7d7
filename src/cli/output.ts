import type { Writable } from 'node:stream';
import { CliError } from './errors.ts';
import { withoutPersonalData } from './personal-data.ts';

/** Shortest value treated as a secret to scrub: shorter ones would garble ordinary text. */
const MIN_SECRET_LENGTH = 4;

/**
 * Everything the CLI prints goes through here. Readable text by default; with `--json` exactly one
 * JSON document per result (one per line for a stream of events). Errors go to stderr, as a JSON
 * object too in JSON mode, so stdout only ever holds results. Every line is scrubbed of the
 * configured secrets and of personal data, whatever produced it.
 */
export class Output {
  readonly json: boolean;
  readonly #stdout: Writable;
  readonly #stderr: Writable;
  readonly #secrets = new Set<string>();
  #closed = false;

  constructor(options: { json: boolean; stdout?: Writable; stderr?: Writable }) {
    this.json = options.json;
    this.#stdout = options.stdout ?? process.stdout;
    this.#stderr = options.stderr ?? process.stderr;
    // `custody-worker events | head`: the reader went away; stop writing instead of crashing.
    this.#stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
      this.#closed = true;
    });
  }

  /** True once stdout's reader has gone (EPIPE): long-running commands stop. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Values never to print (client secret, tokens, a Redis password), replaced by `[redacted]`. */
  addSecrets(...values: Array<string | undefined>): void {
    for (const value of values) {
      if (value === undefined || value.length < MIN_SECRET_LENGTH) continue;
      this.#secrets.add(value);
      // As it would appear inside JSON text (a quote or backslash in it is escaped there).
      this.#secrets.add(JSON.stringify(value).slice(1, -1));
    }
  }

  /**
   * The command's result: `value` as one JSON document, or `text(value)` for people. Both see the
   * value without personal data.
   */
  result<T>(value: T, text: (clean: T) => string): void {
    const clean = withoutPersonalData(value) as T;
    if (this.json) this.#write(this.#stdout, `${JSON.stringify(clean)}\n`);
    else this.#write(this.#stdout, ensureNewline(text(clean)));
  }

  /** Progress for a person (stderr), in both modes. */
  notice(text: string): void {
    this.#write(this.#stderr, ensureNewline(text));
  }

  /** Plain text on stdout whatever the mode (usage text). */
  text(text: string): void {
    this.#write(this.#stdout, ensureNewline(text));
  }

  /** Plain text on stderr whatever the mode (usage text after a usage error). */
  errorText(text: string): void {
    this.#write(this.#stderr, ensureNewline(text));
  }

  error(error: CliError | ErrorReport): void {
    const report: ErrorReport =
      error instanceof CliError
        ? {
            code: error.code,
            message: error.message,
            ...(error.issues.length > 0 ? { issues: error.issues } : {}),
            ...(Object.keys(error.details).length > 0 ? { details: error.details } : {}),
          }
        : error;
    if (this.json) {
      this.#write(this.#stderr, `${JSON.stringify({ error: withoutPersonalData(report) })}\n`);
      return;
    }
    const lines = [`error: ${report.message}${report.code === 'USAGE' ? '' : ` (${report.code})`}`];
    for (const issue of report.issues ?? []) lines.push(`  ${issue.path}: ${issue.message}`);
    for (const [key, value] of Object.entries(report.details ?? {})) lines.push(`  ${key}: ${String(value)}`);
    this.#write(this.#stderr, `${lines.join('\n')}\n`);
  }

  #write(stream: Writable, text: string): void {
    if (stream === this.#stdout && this.#closed) return;
    stream.write(this.#redact(text));
  }

  #redact(text: string): string {
    let result = text;
    for (const secret of this.#secrets) result = result.split(secret).join('[redacted]');
    return result;
  }
}

export interface ErrorReport {
  code: string;
  message: string;
  issues?: Array<{ path: string; message: string }>;
  /** Extra facts (HTTP status, retry delay), printed one per line in readable mode. */
  details?: Record<string, string | number | boolean>;
}

function ensureNewline(text: string): string {
  return text.endsWith('\n') ? text : `${text}\n`;
}
