/**
 * Who a request is, and what it may do (docs/contract.md sections 2 and 5): a fastify plugin that
 * resolves each request's identity `{ name, role, source }` before any route sees it, and route guards
 * `requireRole('viewer' | 'operator')`.
 *
 * - A reverse proxy in CONSOLE_TRUSTED_PROXIES may name the user and role in the CONSOLE_PROXY_*
 *   headers. The peer is the connection's own address (never X-Forwarded-For, which anyone can write);
 *   from any other peer those headers are ignored and the request is judged on its Basic auth alone.
 * - Basic auth: a CONSOLE_USERS user (passwords.ts), or the dashboard's user, a viewer.
 * - With no credentials of any kind configured, the rule the server has always had (src/http/auth.ts):
 *   nothing is asked, and config.ts lets HTTP_HOST be only a loopback address then. A request from a
 *   loopback peer is then the local operator (any other peer, which that binding cannot have, nobody).
 *
 * Every request without an identity but the open ones (OPEN_PATHS; `isOpen` to widen it) is answered
 * 401 before routing, so unknown paths are not probeable either.
 */
import { isIP } from 'node:net';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { isLoopback, type Config } from '../../config/config.ts';
import { ROLES, isRole, trustedBlockList, type Role } from '../../config/console.ts';
import { OPEN_PATHS, challenge, pathOf } from '../auth.ts';
import { PasswordCheck } from './passwords.ts';

export interface Identity {
  name: string;
  role: Role;
  /** How it was established: Basic auth, a trusted proxy's headers, or no credentials configured. */
  source: 'password' | 'proxy' | 'local';
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Null when the request proved no identity (then only open routes answer it). */
    identity: Identity | null;
  }
}

export interface AccessOptions {
  console: Config['http']['console'];
  dashboardUser?: string | undefined;
  dashboardPassword?: string | undefined;
  /** Requests answered without an identity; default: OPEN_PATHS (probes and /metrics). */
  isOpen?: (request: FastifyRequest) => boolean;
  /** How long a verified password is taken again without scrypt (passwords.ts). */
  verifiedTtlMs?: number;
}

/** What a proxy may put in the user header: printable, no separators that would forge audit fields. */
const PROXY_USER = /^[^\p{C},]{1,256}$/u;
const LOCAL: Identity = Object.freeze({ name: 'local', role: 'operator', source: 'local' });

const plugin: FastifyPluginAsync<AccessOptions> = async (server: FastifyInstance, options: AccessOptions) => {
  const { dashboardUser, dashboardPassword } = options;
  const passwords = new PasswordCheck(
    options.console.users,
    dashboardUser && dashboardPassword ? { user: dashboardUser, password: dashboardPassword } : undefined,
    options.verifiedTtlMs,
  );
  const proxy = options.console.proxy && { ...options.console.proxy, trusted: trustedBlockList(options.console.proxy.trusted) };
  const open = !passwords.configured && proxy === undefined;
  const isOpen = options.isOpen ?? ((request: FastifyRequest) => OPEN_PATHS.has(pathOf(request.url)));

  async function identify(request: FastifyRequest): Promise<Identity | null> {
    const peer = request.socket.remoteAddress ?? '';
    if (open) return peerIsLoopback(peer) ? LOCAL : null;
    if (proxy && peerIn(proxy.trusted, peer) && request.headers[proxy.userHeader] !== undefined) {
      const name = request.headers[proxy.userHeader];
      const role = request.headers[proxy.roleHeader];
      const trimmedRole = typeof role === 'string' ? role.trim().toLowerCase() : undefined;
      if (typeof name === 'string' && PROXY_USER.test(name.trim()) && isRole(trimmedRole)) {
        return { name: name.trim(), role: trimmedRole, source: 'proxy' };
      }
      // The proxy vouched for someone it could not name properly: nobody, rather than a guess.
      request.log.warn({ peer }, 'proxy identity headers malformed, request not identified');
      return null;
    }
    const basic = parseBasic(request.headers.authorization);
    if (!basic || !passwords.configured) return null;
    const user = await passwords.check(basic.name, basic.password);
    return user ? { ...user, source: 'password' } : null;
  }

  server.decorateRequest('identity', null);
  server.addHook('onRequest', async (request, reply) => {
    request.identity = await identify(request);
    if (request.identity === null && !isOpen(request)) return challenge(reply);
  });
};

// Not encapsulated (fastify's documented 'skip-override'): the hook must reach every route of the server.
Object.assign(plugin, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'access' });

/** Register on the server before its routes: `await server.register(accessPlugin, options)`. */
export const accessPlugin = plugin;

/**
 * A route guard (`{ onRequest: requireRole('operator') }` or `preHandler`): 401 with the Basic
 * challenge without an identity, 403 when the identity's role is below `role`.
 */
export function requireRole(role: Role) {
  const needed = ROLES.indexOf(role);
  return async function guard(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const identity = request.identity;
    if (!identity) return void challenge(reply);
    if (ROLES.indexOf(identity.role) < needed) {
      return void reply.code(403).send({ error: 'FORBIDDEN', message: `needs the ${role} role` });
    }
  };
}

/** User and password of `Authorization: Basic …`, or undefined for anything else. */
function parseBasic(header: string | undefined): { name: string; password: string } | undefined {
  const match = /^Basic +([A-Za-z0-9+/]+=*) *$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : { name: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** An IPv4 peer of a dual-stack socket reads `::ffff:a.b.c.d`. */
function unmapped(address: string): string {
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : undefined;
  return v4 !== undefined && isIP(v4) === 4 ? v4 : address;
}

function peerIsLoopback(address: string): boolean {
  return isIP(unmapped(address)) !== 0 && isLoopback(unmapped(address));
}

function peerIn(list: ReturnType<typeof trustedBlockList>, address: string): boolean {
  const version = isIP(address);
  return version !== 0 && list.check(address, version === 4 ? 'ipv4' : 'ipv6');
}
