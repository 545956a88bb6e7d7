/**
 * How src/redis-errors.ts reads an error from ioredis or BullMQ, and how often it logs one. The reply
 * texts are Redis 7.0's own, captured from a private redis-server: `CONFIG SET maxmemory 1` (OOM),
 * `REPLICAOF` (READONLY), a failed BGSAVE with `save` set (MISCONF), `min-replicas-to-write 1`
 * (NOREPLICAS), each for a plain SET, a write inside a script (as BullMQ's moves are) and a MULTI.
 */
import { Writable } from 'node:stream';
import { ReplyError } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.ts';
import type { RedisClient } from '../../src/redis.ts';
import { classifyRedisError, RedisErrors, REFUSED_WRITE_CODES } from '../../src/redis-errors.ts';
import { REDIS_ERROR_LOG_INTERVAL_MS } from '../../src/timing.ts';

const SCRIPT = ' script: 1e9bb7deb6219644a634d32c430ce15ed39a377e, on @user_script:119.';
const OOM = "OOM command not allowed when used memory > 'maxmemory'.";
const READONLY = "READONLY You can't write against a read only replica.";
const MISCONF =
  "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
const NOREPLICAS = 'NOREPLICAS Not enough good replicas to write.';

function reply(message: string, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new ReplyError(message) as Error, fields);
}

function connectionError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:6379`), { code, errno: -111, syscall: 'connect' });
}

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level: 'info' }, stream), lines };
}

describe('classifyRedisError', () => {
  it('reads a refused write by the reply’s first word, in a plain command or inside a script', () => {
    for (const [message, code] of [
      [OOM, 'OOM'],
      [READONLY, 'READONLY'],
      [MISCONF, 'MISCONF'],
      [NOREPLICAS, 'NOREPLICAS'],
    ] as const) {
      expect(classifyRedisError(reply(message)), message).toEqual({ kind: 'refused', code });
      expect(classifyRedisError(reply(message + SCRIPT)), message).toEqual({ kind: 'refused', code });
    }
    expect([...REFUSED_WRITE_CODES].sort()).toEqual(['MISCONF', 'NOREPLICAS', 'OOM', 'READONLY']);
  });

  it('reads a transaction aborted because a queued write was refused as that refusal', () => {
    const aborted = reply('EXECABORT Transaction discarded because of previous errors.', { previousErrors: [reply(OOM), reply(OOM)] });
    expect(classifyRedisError(aborted)).toEqual({ kind: 'refused', code: 'OOM' });
    const other = reply('EXECABORT Transaction discarded because of previous errors.', {
      previousErrors: [reply("ERR unknown command 'x', with args beginning with: ")],
    });
    expect(classifyRedisError(other)).toEqual({ kind: 'other' });
  });

  it('reads connection errors by their code, and replies of a Redis that serves nothing for now', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN']) {
      expect(classifyRedisError(connectionError(code))).toEqual({ kind: 'connection', code });
    }
    expect(classifyRedisError(reply('LOADING Redis is loading the dataset in memory'))).toEqual({ kind: 'unavailable', code: 'LOADING' });
    expect(classifyRedisError(reply('CLUSTERDOWN The cluster is down'))).toEqual({ kind: 'unavailable', code: 'CLUSTERDOWN' });
  });

  it('leaves anything else alone: script errors, BullMQ’s own, words that only look like codes', () => {
    for (const error of [
      reply(
        'ERR Error running script (call to f_0123): @user_script:1: user_script:1: Script attempted to access nonexistent global variable',
      ),
      reply('WRONGTYPE Operation against a key holding the wrong kind of value'),
      new Error('Missing lock for job 12. moveToFinished'),
      new Error('OOMPH not a reply'),
      new Error('oom in lower case'),
      'OOM as a string',
      undefined,
    ]) {
      expect(classifyRedisError(error), String(error)).toEqual({ kind: 'other' });
    }
  });
});

describe('RedisErrors', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const redis = (set: () => Promise<unknown>) => ({ set }) as unknown as RedisClient;

  it('logs one line per code and interval for the whole process, naming the code and the sources, and counts every refusal', () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const { logger, lines } = capture();
    const refused: string[] = [];
    const errors = new RedisErrors({
      logger,
      redis: redis(async () => 'OK'),
      probeKey: 'p:ready-probe',
      onRefused: (code) => refused.push(code),
    });
    const worker = errors.listener('submit-transaction-1');
    const queue = errors.listener('queue-track-transfer');
    for (let i = 0; i < 1_000; i++) worker(reply(OOM + SCRIPT));
    queue(reply(OOM));
    worker(connectionError('ECONNREFUSED'));
    worker(connectionError('ECONNREFUSED'));
    expect(lines.map((line) => [line.code, line.msg])).toEqual([
      ['OOM', 'redis refuses writes, retrying (runbook: Redis refuses writes)'],
      ['ECONNREFUSED', 'redis connection error, retrying'],
    ]);
    expect(lines[0]).toMatchObject({ level: 'error', source: 'submit-transaction-1', suppressed: 0, message: OOM + SCRIPT });
    expect(refused).toHaveLength(1_001);

    vi.advanceTimersByTime(REDIS_ERROR_LOG_INTERVAL_MS);
    worker(reply(OOM));
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({
      code: 'OOM',
      source: 'submit-transaction-1',
      suppressed: 1_000,
      suppressedSources: ['submit-transaction-1', 'queue-track-transfer'],
    });
  });

  it('logs anything else each time, as before', () => {
    const { logger, lines } = capture();
    const errors = new RedisErrors({ logger, redis: redis(async () => 'OK'), probeKey: 'p', onRefused: () => undefined });
    const worker = errors.listener('reconcile-1');
    worker(new Error('Missing lock for job 12. moveToFinished'));
    worker(new Error('Missing lock for job 12. moveToFinished'));
    expect(lines.map((line) => line.msg)).toEqual(['worker error', 'worker error']);
  });

  it('probes with a write: a refusal is counted and remembered, the next accepted write says so once', async () => {
    const { logger, lines } = capture();
    const refused: string[] = [];
    let answer: () => Promise<unknown> = () => Promise.reject(reply(OOM));
    const errors = new RedisErrors({ logger, redis: redis(() => answer()), probeKey: 'p', onRefused: (code) => refused.push(code) });
    expect(await errors.probeWrites(1_000)).toEqual({ accepted: false, code: 'OOM', refused: true });
    expect(await errors.refusing(60_000)).toBe('OOM');
    expect(refused).toEqual(['OOM']);
    answer = () => Promise.reject(connectionError('ECONNRESET'));
    expect(await errors.probeWrites(1_000)).toEqual({ accepted: false, code: 'ECONNRESET', refused: false });
    answer = () => new Promise(() => undefined);
    expect(await errors.probeWrites(10)).toEqual({ accepted: false, code: 'TIMEOUT', refused: false });
    answer = async () => 'OK';
    expect(await errors.probeWrites(1_000)).toEqual({ accepted: true });
    expect(await errors.probeWrites(1_000)).toEqual({ accepted: true });
    expect(await errors.refusing(0)).toBeUndefined();
    expect(lines.map((line) => line.msg)).toEqual([
      'redis refuses writes, retrying (runbook: Redis refuses writes)',
      'redis takes writes again',
    ]);
  });
});
