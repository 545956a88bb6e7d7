/**
 * The memory phase of `npm run bench` alone (bench/memory.ts): MEMORY_TRACKED transfers (default
 * 20,000) into tracking through the real path, then `used_memory` growth per transfer and a breakdown
 * by key. For working on the ledger's footprint without the submission and tracking rounds; the
 * figure of record stays `bench:scale` at N = 100,000. Prints JSON; writes no result file.
 */
import { measureMemory, startMemoryRig } from './memory.ts';

const tracked = Number(process.env.MEMORY_TRACKED ?? '20000');
if (!Number.isInteger(tracked) || tracked <= 0)
  throw new Error(`MEMORY_TRACKED: "${process.env.MEMORY_TRACKED}" is not a positive whole number`);

const { redis, target, stop } = await startMemoryRig(
  'memory',
  { SIM_TXID_AFTER: '24h' },
  { SUBMIT_CONCURRENCY: '128', TRACK_POLL_MIN: '1h', TRACK_POLL_MAX: '1h' },
);
try {
  const result = await measureMemory(redis, target, tracked);
  console.log(JSON.stringify(result, null, 2));
  if (process.env.MEMORY_DUMP === '1') {
    // One transfer's own keys as they are, to see what each field costs.
    const own = result.breakdown.filter((part) => part.key.includes(':transfer:') || part.key.includes(':attempts:'));
    for (const { key } of own) {
      const type = await redis.type(key);
      const value = type === 'hash' ? await redis.hgetall(key) : type === 'list' ? await redis.lrange(key, 0, -1) : await redis.get(key);
      console.log(key, JSON.stringify(value));
    }
  }
} finally {
  await stop();
}
