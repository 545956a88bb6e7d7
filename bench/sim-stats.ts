/** The simulator's request counters (`GET /_sim/stats`), as the benchmarks read them. */
import type { SimulatorChild } from './processes.ts';

export type Stats = { requests: Record<string, Record<string, number>> };

export async function simStats(sim: SimulatorChild): Promise<Stats> {
  return (await (await fetch(`${sim.url}/_sim/stats`)).json()) as Stats;
}

/** Requests counted, over every endpoint and outcome that `filter` keeps. */
export function total(stats: Stats, filter: (endpoint: string, outcome: string) => boolean = () => true): number {
  let sum = 0;
  for (const [endpoint, outcomes] of Object.entries(stats.requests))
    for (const [outcome, count] of Object.entries(outcomes)) if (filter(endpoint, outcome)) sum += count;
  return sum;
}

/** Requests per endpoint between two readings, leaving out `exclude`. */
export function byEndpoint(before: Stats, after: Stats, exclude: readonly string[] = []): Record<string, number> {
  const result: Record<string, number> = {};
  for (const endpoint of Object.keys(after.requests)) {
    if (exclude.includes(endpoint)) continue;
    const count = total(after, (e) => e === endpoint) - total(before, (e) => e === endpoint);
    if (count > 0) result[endpoint] = count;
  }
  return result;
}
