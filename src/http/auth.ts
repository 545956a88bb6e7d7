import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Paths answered without credentials: probes (an orchestrator has none) and the Prometheus scrape
 * (it carries counts and latencies, never a transfer, an address, a secret or personal data; protect
 * it by binding HTTP_HOST to a private interface or with a network policy). Everything else, including
 * paths that do not exist (401 before 404, so the route map is not probeable), needs the dashboard's
 * Basic auth whenever DASHBOARD_USER and DASHBOARD_PASSWORD are set.
 */
export const OPEN_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

export interface BasicAuthCredentials {
  user: string;
  password: string;
}

/** Adds the Basic auth check to every request of `server` (its hooks reach the 404 handler too). */
export function requireBasicAuth(server: FastifyInstance, credentials: BasicAuthCredentials): void {
  const expected = Buffer.from(`Basic ${Buffer.from(`${credentials.user}:${credentials.password}`).toString('base64')}`);
  server.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (OPEN_PATHS.has(pathOf(request.url))) return;
    const given = Buffer.from(request.headers.authorization ?? '');
    // Same-length comparison in constant time; a length mismatch says nothing an attacker can use
    // beyond the length of "Basic " + base64, which is public.
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return challenge(reply);
  });
}

/** 401 with the Basic challenge, so that a browser asks for a user and a password. */
export function challenge(reply: FastifyReply): FastifyReply {
  return reply.code(401).header('www-authenticate', 'Basic realm="custody-worker"').send({ error: 'UNAUTHORIZED' });
}

/** The request's path, without its query. */
export function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}
