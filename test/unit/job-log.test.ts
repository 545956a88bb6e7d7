import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import { LazyJobLog } from '../../src/queues/job-log.ts';

function capture(level: string) {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const logger = createLogger({ level }, stream);
  return { logger, lines: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('a job log', () => {
  it('makes no child logger while nothing is written at an enabled level', () => {
    const { logger, lines } = capture('warn');
    const child = vi.spyOn(logger, 'child');
    const bindings = vi.fn(() => ({ queue: 'q', jobId: '1' }));
    const log = new LazyJobLog(logger, bindings);
    log.debug({ delayMs: 10 }, 'job delayed');
    log.info('transfer submitted');
    expect(child).not.toHaveBeenCalled();
    expect(bindings).not.toHaveBeenCalled();
    expect(lines()).toEqual([]);
  });

  it('writes every line with the job context, from one child made on the first line', () => {
    const { logger, lines } = capture('info');
    const child = vi.spyOn(logger, 'child');
    const log = new LazyJobLog(logger, () => ({ queue: 'submit-transaction', jobId: 'transfer-s-1', attempt: 2, sequenceId: 's-1' }));
    log.info({ recordId: 7 }, 'transfer submitted');
    log.warn('send answered 409');
    log.error({ token: 'secret-token' }, 'unexpected error');
    expect(child).toHaveBeenCalledTimes(1);
    const written = lines();
    expect(written).toHaveLength(3);
    for (const line of written)
      expect(line).toMatchObject({ queue: 'submit-transaction', jobId: 'transfer-s-1', attempt: 2, sequenceId: 's-1' });
    expect(written[0]).toMatchObject({ level: 'info', msg: 'transfer submitted', recordId: 7 });
    expect(written[1]).toMatchObject({ level: 'warn', msg: 'send answered 409' });
    // The child keeps the logger's redaction.
    expect(written[2]).toMatchObject({ level: 'error', token: '[redacted]' });
  });
});
