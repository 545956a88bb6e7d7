import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { App } from '../app.ts';
import { READY_CHECK_TIMEOUT_MS } from '../timing.ts';
import { documentOnly } from './openapi.ts';
import { documented } from './schemas.ts';

const readiness = z.object({
  status: z.enum(['ready', 'not ready']),
  redis: z.boolean(),
  writes: z.boolean(),
  workers: z.boolean(),
  reason: z.string().optional(),
});

/** `/healthz` and `/readyz`: open (src/http/auth.ts OPEN_PATHS), an orchestrator has no credentials. */
export const probesPlugin: FastifyPluginAsync<{ app: App }> = async (server, { app }) => {
  documentOnly(server);
  const open = { security: [] };
  server.get(
    '/healthz',
    { schema: documented('Liveness: the process runs', { ...open, response: { 200: z.object({ status: z.literal('ok') }) } }) },
    async () => ({ status: 'ok' }),
  );

  /*
   * Ready: Redis answers PING, takes a write, and every worker runs. The write is a probe (one small key
   * that expires, redis-errors.ts) rather than a judgement on the workers' recent errors: a Redis out of
   * memory (or read-only, or refusing writes after a failed RDB save, or short of replicas) still answers
   * PING and reads, and a worker with nothing due writes nothing, so only a write shows it, at once, and
   * shows as soon as writes are taken again. `reason` names what failed.
   */
  const ready = documented('Readiness: Redis answers and takes a write, the workers run', {
    ...open,
    response: { 200: readiness, 503: readiness },
  });
  server.get('/readyz', { schema: ready }, async (_request, reply) => {
    const [redisOk, probe] = await Promise.all([
      Promise.race([
        app.redis.ping().then(
          () => true,
          () => false,
        ),
        new Promise<boolean>((resolve) => setTimeout(resolve, READY_CHECK_TIMEOUT_MS, false).unref()),
      ]),
      app.redisErrors.probeWrites(READY_CHECK_TIMEOUT_MS),
    ]);
    const workersOk = app.running();
    // A refusal first: with MISCONF, Redis refuses PING as well.
    const reason =
      !probe.accepted && probe.refused
        ? `redis refuses writes: ${probe.code}`
        : !redisOk
          ? 'redis does not answer'
          : !probe.accepted
            ? `redis write probe failed: ${probe.code}`
            : !workersOk
              ? 'workers not running'
              : undefined;
    const ready = reason === undefined;
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'not ready',
      redis: redisOk,
      writes: probe.accepted,
      workers: workersOk,
      ...(reason ? { reason } : {}),
    });
  });
};
