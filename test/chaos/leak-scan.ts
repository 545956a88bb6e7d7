/**
 * What the leak checks search (every field of every stream entry, every value under the worker's
 * prefix in Redis) and how: plain substring search for each forbidden string, reporting only the
 * label and where, never the value itself, so a failing check does not print the secret it found.
 */
import type { Redis } from 'ioredis';

export interface Needle {
  /** Printed when found (e.g. `client secret`, `bearer token #3`). */
  label: string;
  value: string;
}

export interface Haystack {
  /** Printed when a needle is found in it (e.g. `worker-4 output`, `stream entry 1712-0`). */
  where: string;
  text: string;
}

/** `label in where` for every needle found in every haystack. */
export function findNeedles(haystacks: Iterable<Haystack>, needles: readonly Needle[]): string[] {
  const hits: string[] = [];
  for (const haystack of haystacks) {
    for (const needle of needles) {
      if (haystack.text.includes(needle.value)) hits.push(`${needle.label} in ${haystack.where}`);
    }
  }
  return hits;
}

/** Every field name and value of every entry of `stream`, one haystack per entry. */
export async function streamHaystacks(redis: Redis, stream: string): Promise<Haystack[]> {
  const out: Haystack[] = [];
  let start = '-';
  for (;;) {
    const entries = (await redis.xrange(stream, start, '+', 'COUNT', 5_000)) as Array<[string, string[]]>;
    for (const [id, fields] of entries) out.push({ where: `stream entry ${id}`, text: fields.join('\n') });
    if (entries.length < 5_000) return out;
    start = `(${entries[entries.length - 1]![0]}`;
  }
}

/**
 * Every key matching `pattern` with its whole value (strings, hashes, lists, sets, sorted sets, streams),
 * one haystack per key: the ledger records, BullMQ's job hashes (data, return values, failure reasons,
 * stack traces), caches and the events stream. Use on a private Redis only (it SCANs).
 */
export async function keyspaceHaystacks(redis: Redis, pattern: string): Promise<Haystack[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');

  const out: Haystack[] = [];
  for (let i = 0; i < keys.length; i += 500) {
    const batch = keys.slice(i, i + 500);
    const types = (await redis.pipeline(batch.map((key) => ['type', key])).exec()) ?? [];
    const reads = batch.map((key, j) => {
      switch (String(types[j]?.[1])) {
        case 'string':
          return ['get', key];
        case 'hash':
          return ['hgetall', key];
        case 'list':
          return ['lrange', key, '0', '-1'];
        case 'set':
          return ['smembers', key];
        case 'zset':
          return ['zrange', key, '0', '-1'];
        case 'stream':
          return ['xrange', key, '-', '+'];
        default:
          return ['exists', key]; // expired meanwhile: nothing to read
      }
    });
    const values = (await redis.pipeline(reads).exec()) ?? [];
    batch.forEach((key, j) => out.push({ where: `redis key ${key}`, text: `${key}\n${flatten(values[j]?.[1])}` }));
  }
  return out;
}

function flatten(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(flatten).join('\n');
  if (typeof value === 'object')
    return Object.entries(value)
      .map(([k, v]) => `${k}\n${flatten(v)}`)
      .join('\n');
  return String(value);
}
