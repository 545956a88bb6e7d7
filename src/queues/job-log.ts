import type { Bindings, Logger } from 'pino';

/** What a handler logs with: the levels it writes at. */
export type JobLog = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

/**
 * A job's log, whose pino child (with the job's context) is made on the first line written at an
 * enabled level. Most jobs write no line at the default level, and making a child runs the logger's
 * redaction over its bindings: doing that for every job is work for nothing (bench/README.md, "What the
 * profile found").
 */
export class LazyJobLog implements JobLog {
  readonly #logger: Logger;
  readonly #bindings: () => Bindings;
  #child: Logger | undefined;

  constructor(logger: Logger, bindings: () => Bindings) {
    this.#logger = logger;
    this.#bindings = bindings;
  }

  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }

  info(...args: unknown[]): void {
    this.#write('info', args);
  }

  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }

  error(...args: unknown[]): void {
    this.#write('error', args);
  }

  #write(level: 'debug' | 'info' | 'warn' | 'error', args: unknown[]): void {
    if (!this.#logger.isLevelEnabled(level)) return;
    this.#child ??= this.#logger.child(this.#bindings());
    (this.#child[level] as (...a: unknown[]) => void)(...args);
  }
}
