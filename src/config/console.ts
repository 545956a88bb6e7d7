/**
 * The console's and `/api/v1`'s settings (docs/contract.md sections 2 and 5): who may sign in with a
 * password (CONSOLE_USERS) and which reverse proxies may vouch for a user in request headers
 * (CONSOLE_PROXY_*_HEADER, CONSOLE_TRUSTED_PROXIES). src/http/access/ applies them. No message quotes
 * a value: an entry may hold a hash, or a secret pasted in its place.
 */
import { BlockList, isIP } from 'node:net';
import { z } from 'zod';
import { parseSecretHash, SECRET_HASH_RULE } from '../lib/secret-hash.ts';

/** The roles, weakest first: each may do what the ones before it may. */
export const ROLES = ['viewer', 'operator'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: unknown): value is Role {
  return (ROLES as readonly unknown[]).includes(value);
}

/** A console user's name: what the audit stream records. No `:` or `,` (the list's separators). */
export const USER_NAME = /^[A-Za-z0-9._@+-]{1,64}$/;

export interface ConsoleUser {
  name: string;
  role: Role;
  /** As hash-secret printed it (src/lib/secret-hash.ts); parsed again where it is checked. */
  hash: string;
}

/**
 * A comma-separated list of `name:…:hash` entries (CONSOLE_USERS, SUBMIT_API_KEYS), names unique: `build`
 * gets one entry's fields after the name (every field non-empty only when the count is right), and
 * returns the entry or a problem. Entries are named by position, never quoted.
 */
function hashedEntries<T extends { name: string }>(shape: string, fields: number, build: (name: string, rest: string[]) => T | string) {
  return z.preprocess(
    (v) => (v === undefined ? '' : v),
    z.string().transform((v, ctx) => {
      if (v.trim() === '') return [];
      const entries: T[] = [];
      const problem = (message: string) => ctx.addIssue({ code: 'custom', message });
      v.split(',').forEach((entry, index) => {
        const at = `entry ${index + 1}`;
        const [name = '', ...rest] = entry.trim().split(':');
        if (rest.length !== fields - 1 || rest[rest.length - 1] === '') return problem(`${at} must be ${shape}`);
        if (!USER_NAME.test(name)) return problem(`${at}: the name must be 1-64 of letters, digits and ._@+-`);
        if (!parseSecretHash(rest[rest.length - 1]!)) return problem(`${at}: the hash must be ${SECRET_HASH_RULE}`);
        const built = build(name, rest);
        if (typeof built === 'string') return problem(`${at}: ${built}`);
        if (entries.some((earlier) => earlier.name === name)) return problem(`${at}: the name of an earlier entry (names must be unique)`);
        entries.push(built);
      });
      return entries;
    }),
  );
}

/** CONSOLE_USERS: comma-separated `name:role:hash`, names unique. */
export const consoleUsers = () =>
  hashedEntries<ConsoleUser>('name:role:hash', 3, (name, [role, hash]) =>
    isRole(role) ? { name, role, hash: hash! } : `the role must be ${ROLES.join(' or ')}`,
  );

export interface SubmitApiKey {
  /** Who submitted, for logs and the rate limit: never the key. */
  name: string;
  /** As hash-secret printed it (src/lib/secret-hash.ts); parsed again where it is checked. */
  hash: string;
}

/** SUBMIT_API_KEYS: comma-separated `name:hash`, names unique. */
export const submitApiKeys = () => hashedEntries<SubmitApiKey>('name:hash', 2, (name, [hash]) => ({ name, hash: hash! }));

/** A request header's name (an HTTP token), lower-cased as node presents headers. */
export const headerName = () =>
  z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string()
      .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/, 'must be an HTTP header name')
      .refine((name) => name.toLowerCase() !== 'authorization', 'must not be Authorization (Basic auth reads it)')
      .transform((name) => name.toLowerCase())
      .optional(),
  );

export interface TrustedNetwork {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** CONSOLE_TRUSTED_PROXIES: comma-separated addresses or CIDRs, IPv4 or IPv6 (an address is a /32 or /128). */
export const trustedProxies = () =>
  z.preprocess(
    (v) => (v === '' ? undefined : v),
    z
      .string()
      .transform((v, ctx) => {
        const networks: TrustedNetwork[] = [];
        v.split(',').forEach((entry, index) => {
          const network = parseNetwork(entry.trim());
          if (network) networks.push(network);
          else ctx.addIssue({ code: 'custom', message: `entry ${index + 1} must be an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8)` });
        });
        return networks;
      })
      .optional(),
  );

function parseNetwork(text: string): TrustedNetwork | undefined {
  const [address = '', prefixText, ...rest] = text.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const family = version === 4 ? 'ipv4' : 'ipv6';
  const bits = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  return { address, prefix, family };
}

/** The trusted networks as a BlockList, which matches an IPv4 peer seen as `::ffff:a.b.c.d` too. */
export function trustedBlockList(networks: readonly TrustedNetwork[]): BlockList {
  const list = new BlockList();
  for (const { address, prefix, family } of networks) list.addSubnet(address, prefix, family);
  return list;
}

/**
 * Rules across the console's variables, read from the raw text like config.ts's other cross rules: the
 * proxy headers come as a pair and only with the proxies they may come from, and the dashboard's user
 * is one more viewer, so no console user may have its name.
 */
export function consoleProblems(env: NodeJS.ProcessEnv): string[] {
  const set = (name: string) => env[name] !== undefined && env[name] !== '';
  const problems: string[] = [];
  const headers = ['CONSOLE_PROXY_USER_HEADER', 'CONSOLE_PROXY_ROLE_HEADER'] as const;
  if (headers.some(set)) {
    for (const name of headers) if (!set(name)) problems.push(`${name}: required with ${headers.find(set)}`);
    if (!set('CONSOLE_TRUSTED_PROXIES')) problems.push(`CONSOLE_TRUSTED_PROXIES: required with ${headers.filter(set).join(' and ')}`);
  }
  const users = consoleUsers().safeParse(env.CONSOLE_USERS);
  if (set('DASHBOARD_USER') && users.success && users.data.some((user) => user.name === env.DASHBOARD_USER)) {
    problems.push('CONSOLE_USERS: a name equals DASHBOARD_USER (the dashboard user is a viewer of its own); use another name');
  }
  return problems;
}
