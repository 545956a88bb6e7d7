/**
 * What a window cost Redis, from INFO commandstats: calls of each command, commands run inside Lua
 * scripts included (Redis counts those too). The load generator's own probes (XLEN, INFO, XREVRANGE,
 * XRANGE, XREAD) are left out so the figures are the worker's.
 */
import type { Redis } from 'ioredis';

const PROBES = new Set(['xlen', 'info', 'xrevrange', 'xrange', 'xread', 'ping', 'client|setinfo', 'client|setname', 'select']);

export type CommandCounts = Record<string, number>;

async function snapshot(redis: Redis): Promise<Map<string, number>> {
  const text = await redis.info('commandstats');
  const counts = new Map<string, number>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(match[1]!, Number(match[2]));
  return counts;
}

/** Starts a window; `end(per)` returns the calls of each command divided by `per`, biggest first. */
export async function commandWindow(redis: Redis): Promise<{ end(per: number): Promise<CommandCounts> }> {
  const start = await snapshot(redis);
  return {
    async end(per) {
      const stop = await snapshot(redis);
      const entries: Array<[string, number]> = [];
      for (const [command, calls] of stop) {
        if (PROBES.has(command)) continue;
        const delta = calls - (start.get(command) ?? 0);
        if (delta > 0) entries.push([command, delta / per]);
      }
      entries.sort((a, b) => b[1] - a[1]);
      return Object.fromEntries(entries);
    },
  };
}

/** Commands per job in all. */
export function totalCommands(counts: CommandCounts | undefined): number {
  return Object.values(counts ?? {}).reduce((sum, calls) => sum + calls, 0);
}

/** "12.0 (evalsha 6.0, hgetall 3.0, …)": total per job and the biggest commands. */
export function describeCommands(counts: CommandCounts | undefined, top = 10): string {
  if (!counts) return 'n/a';
  const entries = Object.entries(counts);
  const total = totalCommands(counts);
  const shown = entries
    .slice(0, top)
    .map(([command, calls]) => `${command} ${calls.toFixed(1)}`)
    .join(', ');
  return `${total.toFixed(1)} (${shown}${entries.length > top ? ', …' : ''})`;
}
