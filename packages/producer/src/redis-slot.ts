/*
 * Redis Cluster's key-to-slot rule, as CLUSTER KEYSLOT applies it: when the key holds a `{` and, after
 * the first one, a `}` with at least one character between them, only that text (the hash tag) is
 * hashed; otherwise the whole key is. So `{}{wtx}` has no tag (the first `{` is closed at once) and
 * `{a}{wtx}:events` has the tag `a`, not `wtx`. The slot is CRC16 (XMODEM: polynomial 0x1021, initial
 * value 0) of those bytes, modulo 16384.
 */

export const CLUSTER_SLOTS = 16_384;

/** The hash tag Redis would use for `key`, or undefined when it hashes the whole key. */
export function hashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open === -1) return undefined;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return undefined;
  return key.slice(open + 1, close);
}

/** The Redis Cluster slot of `key` (UTF-8 bytes, as Redis sees them). */
export function keySlot(key: string): number {
  const open = key.indexOf('{');
  const close = open === -1 ? -1 : key.indexOf('}', open + 1);
  const hashed = open !== -1 && close > open + 1 ? key.slice(open + 1, close) : key;
  return crc16(Buffer.from(hashed, 'utf8')) % CLUSTER_SLOTS;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}
