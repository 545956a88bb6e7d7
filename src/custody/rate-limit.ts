import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { MAX_RATE_LIMIT_WAIT_MS } from '../timing.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from './errors.ts';

/*
 * Generic cell rate algorithm over one Redis key, shared by every worker process. Each call reserves
 * the next free slot and says how long to wait for it, so callers sleep exactly once instead of polling.
 * A wait longer than `maxWaitMs` reserves nothing and is refused, so no request sits in a local sleep
 * for long (the job is rate-limited and goes back to the queue instead).
 *
 * KEYS[1] theoretical arrival time (ms)
 * ARGV[1] emission interval (ms per request)  ARGV[2] burst (requests)  ARGV[3] max wait (ms)
 * Returns the wait in ms (>= 0) for a reserved slot, or -(wait) when it was refused.
 */
const GCRA_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local tolerance = interval * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait < 0 then wait = 0 end
if wait > tonumber(ARGV[3]) then return -wait end
local nextTat = tat + interval
redis.call('SET', KEYS[1], tostring(nextTat), 'PX', math.ceil(nextTat - now + 1000))
return math.ceil(wait)
`;

export { MAX_RATE_LIMIT_WAIT_MS };

interface GcraCommand {
  custodyRateLimit(key: string, interval: number, burst: number, maxWait: number): Promise<number>;
}

export function createRedisRateLimiter(
  redis: Redis | Cluster,
  key: string,
  requestsPerSecond: number,
): (endpoint: CustodyEndpoint, signal?: AbortSignal) => Promise<void> {
  if (!('custodyRateLimit' in redis)) redis.defineCommand('custodyRateLimit', { numberOfKeys: 1, lua: GCRA_LUA });
  const interval = 1000 / requestsPerSecond;
  const burst = Math.max(1, Math.ceil(requestsPerSecond / 10));
  return async (endpoint, signal) => {
    const wait = await (redis as unknown as GcraCommand).custodyRateLimit(key, interval, burst, MAX_RATE_LIMIT_WAIT_MS);
    if (wait < 0) {
      throw new CustodyError(CustodyErrorCode.RATE_LIMITED, `${endpoint}: CUSTODY_MAX_RPS reached locally`, {
        endpoint,
        retryAfterMs: -wait,
      });
    }
    if (wait > 0) {
      // The slot is reserved and goes unused if the caller's deadline ends the wait: harmless.
      await sleep(wait, undefined, { signal }).catch(() => {
        throw new CustodyError(CustodyErrorCode.TIMEOUT, `${endpoint}: deadline reached while waiting for a rate-limit slot`, {
          endpoint,
          maybeProcessed: false,
        });
      });
    }
  };
}
