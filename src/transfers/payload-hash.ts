import { createHash } from 'node:crypto';
import type { SubmitPayload } from '../../packages/producer/src/payload.ts';

/**
 * JSON text with every object's keys sorted (arrays keep their order; undefined members are left out,
 * as JSON.stringify does): one text per payload, whatever order its producer wrote the keys in.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * SHA-256 (hex, 64 characters: a listpack-sized hash field) of a parsed payload's canonical JSON. Taken
 * of the schema's output, never of the text as received, so `"walletId": "310"` and `310`, or unknown
 * fields the schema drops, do not make two payloads differ. The HTTP submit route compares it with
 * what the ledger record (newRecord) or its own pre-record key holds; the submit handler compares a
 * second job's with the record's.
 */
export function payloadHash(payload: SubmitPayload): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('hex');
}
