/**
 * Hashes of secrets the worker checks but never stores in clear (the console users' passwords of
 * CONSOLE_USERS, API keys): scrypt (node:crypto) with a random salt, written as one self-describing
 * text, so that a hash made with other parameters still verifies:
 *
 *   scrypt$<N>$<r>$<p>$<salt>$<hash>      salt and hash base64url without padding
 *
 * `npm run cli -- hash-secret` prints one (src/cli/commands/hash-secret.ts).
 */
import { createHmac, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * What hash-secret uses: N = 2^15, r = 8 (32 MiB and tens of milliseconds per hash on a server core),
 * a 16-byte salt and a 32-byte hash. A verification costs the same, which is why src/http/access/
 * caches a successful one for a while (VerifiedSecrets).
 */
export const SCRYPT_PARAMETERS = { N: 2 ** 15, r: 8, p: 1, saltBytes: 16, hashBytes: 32 } as const;

/**
 * Bounds on what a hash read from the configuration may ask for: a verification runs on every login,
 * so a hash with N = 2^24 would make each one take a gigabyte and seconds.
 */
const LIMITS = { minN: 2 ** 10, maxN: 2 ** 17, maxR: 32, maxP: 16, minSaltBytes: 16, minHashBytes: 16, maxHashBytes: 64 } as const;

export interface SecretHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

const FORMAT = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/;

/** What is wrong with a text that should be a hash, without quoting it (it may be a pasted secret). */
export const SECRET_HASH_RULE = 'scrypt$N$r$p$salt$hash as `hash-secret` prints it';

/** The hash `text` describes, or undefined when it is not one hash-secret could have made (or asks too much). */
export function parseSecretHash(text: string): SecretHash | undefined {
  const match = FORMAT.exec(text);
  if (!match) return undefined;
  const [N, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const salt = Buffer.from(match[4]!, 'base64url');
  const hash = Buffer.from(match[5]!, 'base64url');
  const powerOfTwo = (N & (N - 1)) === 0;
  if (!powerOfTwo || N < LIMITS.minN || N > LIMITS.maxN || r < 1 || r > LIMITS.maxR || p < 1 || p > LIMITS.maxP) return undefined;
  if (salt.length < LIMITS.minSaltBytes || hash.length < LIMITS.minHashBytes || hash.length > LIMITS.maxHashBytes) return undefined;
  return { N, r, p, salt, hash };
}

function derive(secret: string, salt: Buffer, length: number, { N, r, p }: { N: number; r: number; p: number }): Promise<Buffer> {
  // scrypt needs about 128 * N * r bytes; node's default maxmem (32 MiB) is just short of N = 2^15, r = 8.
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r };
  return new Promise((resolve, reject) => {
    scrypt(secret.normalize('NFC'), salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** A new hash of `secret`, with a random salt. */
export async function hashSecret(secret: string): Promise<string> {
  const { saltBytes, hashBytes, ...cost } = SCRYPT_PARAMETERS;
  const salt = randomBytes(saltBytes);
  const hash = await derive(secret, salt, hashBytes, cost);
  return ['scrypt', cost.N, cost.r, cost.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
}

/** Whether `secret` is the one `hash` was made of (compared in constant time). */
export async function verifySecret(secret: string, hash: SecretHash): Promise<boolean> {
  const derived = await derive(secret, hash.salt, hash.hash.length, hash);
  return timingSafeEqual(derived, hash.hash);
}

/**
 * Successful verifications remembered for a while, so that a burst of requests with one secret costs one
 * scrypt: at most `maxEntries` (the oldest goes first), each for `ttlMs`. An entry is found by an HMAC
 * of the secret (and whatever names it, a user's name say) with a key of this process, never by the
 * secret itself; a verification that found nothing is never remembered.
 */
export class VerifiedSecrets<T> {
  readonly #key = randomBytes(32);
  readonly #entries = new Map<string, { value: T; until: number }>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: { maxEntries: number; ttlMs: number; now?: () => number }) {
    this.#maxEntries = options.maxEntries;
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  /** How many entries are held (expired ones included until looked up or pushed out). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * What was remembered for `parts` (the secret and what names it), else what `verify` finds, which is
   * remembered unless it is undefined.
   */
  async get(parts: readonly string[], verify: () => Promise<T | undefined>): Promise<T | undefined> {
    const hmac = createHmac('sha256', this.#key);
    parts.forEach((part, index) => (index === 0 ? hmac.update(part) : hmac.update('\0').update(part)));
    const key = hmac.digest('base64');
    const cached = this.#entries.get(key);
    if (cached && cached.until > this.#now()) return cached.value;
    this.#entries.delete(key);
    const value = await verify();
    if (value === undefined) return undefined;
    if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, { value, until: this.#now() + this.#ttlMs });
    return value;
  }
}
