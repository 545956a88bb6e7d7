import { isIP } from 'node:net';

/** Why an address is refused as a webhook destination (unless WEBHOOK_ALLOW_PRIVATE=1). */
export type RefusedAddress = 'loopback' | 'private' | 'link-local' | 'unspecified';

/** IPv4 ranges refused, as [first octets, prefix length, kind]. */
const V4_REFUSED: ReadonlyArray<readonly [number, number, RefusedAddress]> = [
  [ipv4Number('0.0.0.0'), 8, 'unspecified'],
  [ipv4Number('127.0.0.0'), 8, 'loopback'],
  [ipv4Number('10.0.0.0'), 8, 'private'],
  [ipv4Number('172.16.0.0'), 12, 'private'],
  [ipv4Number('192.168.0.0'), 16, 'private'],
  // Carrier-grade NAT (shared address space): inside someone's network, not on the internet.
  [ipv4Number('100.64.0.0'), 10, 'private'],
  [ipv4Number('169.254.0.0'), 16, 'link-local'],
];

/**
 * Whether a resolved address may not receive webhooks, and why; undefined for an address on the
 * internet (or text that is no IP address: the caller only hands resolved addresses). IPv4-mapped IPv6
 * (`::ffff:127.0.0.1`, also written `::ffff:7f00:1`) is judged as the IPv4 address it maps. Pure: it
 * resolves and connects nothing.
 */
export function addressRefusal(address: string): RefusedAddress | undefined {
  const family = isIP(address);
  if (family === 4) return v4Refusal(ipv4Number(address));
  if (family !== 6) return undefined;
  const bytes = ipv6Bytes(address.replace(/%.*$/, ''));
  const zeroPrefix = (n: number) => bytes.slice(0, n).every((b) => b === 0);
  if (zeroPrefix(10) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return v4Refusal(((bytes[12]! << 24) | (bytes[13]! << 16) | (bytes[14]! << 8) | bytes[15]!) >>> 0);
  }
  if (zeroPrefix(16)) return 'unspecified';
  if (zeroPrefix(15) && bytes[15] === 1) return 'loopback';
  if ((bytes[0]! & 0xfe) === 0xfc) return 'private';
  if (bytes[0] === 0xfe && (bytes[1]! & 0xc0) === 0x80) return 'link-local';
  return undefined;
}

function v4Refusal(value: number): RefusedAddress | undefined {
  for (const [base, bits, kind] of V4_REFUSED) {
    const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
    if ((value & mask) >>> 0 === base) return kind;
  }
  return undefined;
}

function ipv4Number(text: string): number {
  return text.split('.').reduce((n, octet) => ((n << 8) | Number(octet)) >>> 0, 0);
}

/** The 16 bytes of a valid IPv6 text (`::` expanded, a dotted IPv4 tail read). */
function ipv6Bytes(text: string): number[] {
  let groups = text;
  const tail: number[] = [];
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const v4 = ipv4Number(dotted[1]!);
    tail.push(v4 >>> 24, (v4 >>> 16) & 0xff, (v4 >>> 8) & 0xff, v4 & 0xff);
    const prefix = text.slice(0, dotted.index + 1);
    groups = prefix.endsWith('::') ? prefix : prefix.slice(0, -1);
  }
  const wanted = 8 - tail.length / 2;
  const [head = '', rest] = groups.split('::') as [string, string | undefined];
  const parts = (s: string) => (s === '' ? [] : s.split(':'));
  const left = parts(head);
  const right = rest === undefined ? [] : parts(rest);
  const words = rest === undefined ? left : [...left, ...Array<string>(wanted - left.length - right.length).fill('0'), ...right];
  return [...words.flatMap((word) => [parseInt(word, 16) >>> 8, parseInt(word, 16) & 0xff]), ...tail];
}
