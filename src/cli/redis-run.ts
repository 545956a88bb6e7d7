import type { Config, loadLedgerConfig } from '../config/config.ts';
import { createKeys } from '../ledger/keys.ts';
import { Ledger } from '../ledger/ledger.ts';
import type { RedisClient } from '../redis.ts';
import { CliError } from './errors.ts';
import { ExitCode } from './exit-codes.ts';
import type { Output } from './output.ts';
import { connectRedis, redisSecrets, type CliRedis } from './redis.ts';

const REDIS_ERROR_NAMES = new Set(['ReplyError', 'MaxRetriesPerRequestError', 'ClusterAllFailedError']);
const CONNECTION_MESSAGES = /Connection is closed|Stream isn't writeable|connect E[A-Z]+|getaddrinfo|Failed to refresh slots cache/i;

/**
 * Runs `work` with a CLI Redis connection and closes it afterwards whatever happens, so the process
 * ends on its own. A Redis failure becomes REDIS_ERROR (exit 1) naming the connection problem.
 */
export async function withRedis<T>(
  config: Pick<Config['redis'], 'url' | 'clusterNodes'>,
  out: Output,
  work: (redis: RedisClient, connection: CliRedis) => Promise<T>,
): Promise<T> {
  out.addSecrets(...redisSecrets(config));
  const connection = connectRedis(config);
  try {
    return await work(connection.client, connection);
  } catch (error) {
    throw asRedisError(error, connection);
  } finally {
    await connection.close();
  }
}

function asRedisError(error: unknown, connection: CliRedis): unknown {
  if (error instanceof CliError || !(error instanceof Error)) return error;
  if (!REDIS_ERROR_NAMES.has(error.name) && !CONNECTION_MESSAGES.test(error.message)) return error;
  const cause = connection.lastError() ?? error;
  return new CliError('REDIS_ERROR', `redis: ${cause.message}`, ExitCode.FAILURE);
}

/** The ledger as the worker has it (its retention, stream length and epoch settings), for commands that change it. */
export function cliLedger(redis: RedisClient, config: ReturnType<typeof loadLedgerConfig>): Ledger {
  return new Ledger(redis, createKeys(config.queue.prefix, config.queue.eventsStream), {
    eventsMaxLen: config.queue.eventsMaxLen,
    retentionMs: config.retention.transfersMs,
    tombstoneRetentionMs: config.retention.tombstonesMs,
    epoch: { init: config.ledger.init, recoveryWindowMs: config.ledger.recoveryWindowMs },
  });
}
