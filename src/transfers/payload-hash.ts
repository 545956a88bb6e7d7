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
 * SHA-256 (base64url, 43 characters) of a parsed payload's canonical JSON. Taken of the schema's
 * output, never of the text as received, so `"walletId": "310"` and `310`, or unknown fields the schema
 * drops, do not make two payloads differ. The HTTP submit route compares it with what the ledger
 * record (newRecord) or its own pre-record key holds; the submit handler compares a second job's with
 * the record's. Compare with isHashOf, which also takes the hex spelling records kept before.
 */
export function payloadHash(payload: SubmitPayload): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('base64url');
}

/**
 * Whether a stored payload hash is `hash` (payloadHash's): base64url, or the 64 hex characters that
 * records and pre-record keys written before it was base64url hold (22 bytes more in every record).
 */
export function isHashOf(stored: string, hash: string): boolean {
  return stored === hash || (stored.length === 64 && stored === Buffer.from(hash, 'base64url').toString('hex'));
}
