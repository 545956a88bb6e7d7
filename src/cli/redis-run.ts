import type { Config } from '../config/config.ts';
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
