import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ConsoleUser, Role } from '../../config/console.ts';
import { parseSecretHash, SCRYPT_PARAMETERS, VerifiedSecrets, verifySecret, type SecretHash } from '../../lib/secret-hash.ts';

/** How long a verified user and password are taken without scrypt again (a page load is many requests). */
export const VERIFIED_TTL_MS = 60_000;
/** At most this many verified credentials are remembered; the oldest goes first. */
const CACHE_ENTRIES = 1_024;
/**
 * scrypt runs on libuv's thread pool (4 threads by default) and takes 32 MiB each: a burst of wrong
 * passwords may take two of them, never all, so file and DNS work (Redis's reconnects) goes on.
 */
const CONCURRENT_VERIFICATIONS = 2;

export interface PasswordUser {
  name: string;
  role: Role;
}

/**
 * Basic auth's user and password against CONSOLE_USERS (scrypt) and the dashboard's user (a viewer,
 * compared in constant time). A success is remembered for VERIFIED_TTL_MS under an HMAC of the
 * credentials with a key of this process, never under the credentials themselves; failures are not
 * remembered. An unknown name costs one scrypt like a known one, so the time taken does not tell
 * which names exist.
 */
export class PasswordCheck {
  readonly #users: ReadonlyMap<string, { role: Role; hash: SecretHash }>;
  readonly #dashboard: Buffer | undefined;
  readonly #dashboardUser: string | undefined;
  readonly #verified: VerifiedSecrets<PasswordUser>;
  readonly #decoy: SecretHash = { ...SCRYPT_PARAMETERS, salt: randomBytes(16), hash: randomBytes(32) };
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(users: readonly ConsoleUser[], dashboard: { user: string; password: string } | undefined, ttlMs = VERIFIED_TTL_MS) {
    this.#users = new Map(
      users.map(({ name, role, hash }) => {
        const parsed = parseSecretHash(hash);
        // config.ts checked every hash at start-up.
        if (!parsed) throw new Error('a console user has a malformed hash');
        return [name, { role, hash: parsed }];
      }),
    );
    this.#dashboard = dashboard && digest(dashboard.user, dashboard.password);
    this.#dashboardUser = dashboard?.user;
    this.#verified = new VerifiedSecrets({ maxEntries: CACHE_ENTRIES, ttlMs });
  }

  /** True when anyone can sign in with a password. */
  get configured(): boolean {
    return this.#users.size > 0 || this.#dashboard !== undefined;
  }

  /** The user these credentials are, or undefined. */
  async check(name: string, password: string): Promise<PasswordUser | undefined> {
    if (this.#dashboard && timingSafeEqual(digest(name, password), this.#dashboard)) return { name: this.#dashboardUser!, role: 'viewer' };
    return this.#verified.get([name, password], async () => {
      // No CONSOLE_USERS: no name whose existence a time could tell, so no decoy scrypt either (a burst
      // of wrong dashboard passwords then costs a hash each, not 32 MiB of scrypt).
      if (this.#users.size === 0) return undefined;
      const user = this.#users.get(name);
      const ok = await this.#limited(() => verifySecret(password, user?.hash ?? this.#decoy));
      return ok && user ? { name, role: user.role } : undefined;
    });
  }

  async #limited<T>(work: () => Promise<T>): Promise<T> {
    if (this.#running >= CONCURRENT_VERIFICATIONS) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running += 1;
    try {
      return await work();
    } finally {
      // The slot passes straight to the next in line, or is freed.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running -= 1;
    }
  }
}

/** Fixed-length, so that the comparison takes the same time whatever was typed. */
function digest(name: string, password: string): Buffer {
  return createHash('sha256').update(name).update('\0').update(password).digest();
}
