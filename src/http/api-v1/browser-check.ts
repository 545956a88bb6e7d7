import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * What a request that changes something must show when a browser may have sent it (docs/contract.md
 * section 5): a browser sends the user's remembered Basic credentials and cookies to any site's form or
 * script, so such a request must prove it comes from this server's own pages, by an `Origin` that is
 * this server's, or by a CSRF token (@fastify/csrf-protection: the console's forms carry one). A request
 * with no `Origin` and no cookie is not a browser's (browsers send `Origin` with every POST): an API
 * client, let through on its credentials alone.
 *
 * Answers for the route whether the request came from the console (a same-origin page or a CSRF form:
 * audited `via: console`) or from an API client (`via: api`); a refusal is answered 403 here.
 */
export async function browserCheck(
  server: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<'console' | 'api' | 'refused'> {
  const origin = request.headers.origin;
  if (origin === undefined && request.headers.cookie === undefined) return 'api';
  if (origin !== undefined && sameOrigin(origin, request)) return 'console';
  const passed = await new Promise<boolean>((resolve) => {
    // csrfProtection answers a missing or wrong token itself (403) and calls back only when it holds.
    reply.raw.once('close', () => resolve(false));
    server.csrfProtection(request, reply, () => resolve(true));
    if (reply.sent) resolve(false);
  });
  return passed ? 'console' : 'refused';
}

/**
 * `Origin` names this server: the host (and port) the request was made to (`Origin: null` never does).
 * The scheme is not compared: behind a proxy that ends TLS this server sees http while the page is https.
 */
function sameOrigin(origin: string, request: FastifyRequest): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  return url.origin === origin && (url.protocol === 'https:' || url.protocol === 'http:') && url.host === request.host;
}
