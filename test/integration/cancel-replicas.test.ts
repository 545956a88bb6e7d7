/**
 * A cancel made by the worker's own tools (the CLI, POST /transfers/:sequenceId/cancel) waits for the
 * replicas like the producer's cancel() does (REDIS_MIN_REPLICAS, REDIS_REPLICA_TIMEOUT): `cancelled`
 * only once every replica the primary lists online has the tombstone, since a failover that lost it
 * would let a job send after all. Too few replicas: the CLI exits 1 NOT_REPLICATED and the route
 * answers 503 NOT_REPLICATED; the cancel was decided on the primary, and a cancel again answers it.
 * A primary and one replica on loopback.
 */
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotReplicatedError } from '../../packages/producer/src/errors.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createKeys } from '../../src/ledger/keys.ts';
import { createLogger } from '../../src/logger.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { killAllClis, runCli } from '../helpers/cli-process.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { closeAllRedis, newRedis } from '../helpers/redis.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { processesTimeout } from '../helpers/timeouts.ts';

const REASON = 'compliance hold, ticket OPS-91';
const USER = 'ops-desk';
const PASSWORD = 'cancel-replicas-password';

// The longest test runs the CLI twice.
describe('cancels from the worker side wait for the replicas', { timeout: processesTimeout(2) }, () => {
  let primary: RedisServerHandle;
  let replica: RedisServerHandle;
  let h: Harness;
  let server: FastifyInstance;
  let base: string;

  beforeAll(async () => {
    primary = await startRedisServer();
    [replica] = (await startReplicas(primary, 1)) as [RedisServerHandle];
    h = await startHarness({
      name: 'cancel-replicas',
      redisUrl: primary.url,
      // Two required, one replica: every cancel through this worker's route is short of replicas.
      env: {
        REDIS_URL: primary.url,
        DASHBOARD_USER: USER,
        DASHBOARD_PASSWORD: PASSWORD,
        REDIS_MIN_REPLICAS: '2',
        REDIS_REPLICA_TIMEOUT: '200ms',
      },
    });
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
    base = await server.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => {
    await killAllClis();
    await server?.close();
    await h?.close();
    await closeAllRedis();
    await replica?.stop();
    await primary?.stop();
  });

  const tombstoneOnReplica = (sequenceId: string) =>
    newRedis({ url: replica.url }).get(createKeys(h.prefix, `${h.prefix}:transfer-events`).tombstone(sequenceId));

  it('Ledger.cancel: cancelled with the tombstone on the replica; NotReplicatedError when too few acknowledge', async () => {
    const one = samplePayload().halfSigned.sequenceId;
    expect(await h.app!.ledger.cancel(one, { reason: REASON, by: 'test' }, { min: 1, timeoutMs: 5_000 })).toMatchObject({
      outcome: 'cancelled',
    });
    expect(await tombstoneOnReplica(one)).toBe('cancelled:1');

    const two = samplePayload().halfSigned.sequenceId;
    const error = await h.app!.ledger.cancel(two, { reason: REASON, by: 'test' }, { min: 2, timeoutMs: 200 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NotReplicatedError);
    expect(error).toMatchObject({ acknowledged: 1, required: 2, cancel: two });
    // too-late never waits: nothing was written.
  });

  it('the CLI: exit 0 with 1 required; exit 1 NOT_REPLICATED with 2, and a cancel again answers already-ended', async () => {
    const env = { REDIS_URL: primary.url, QUEUE_PREFIX: h.prefix, REDIS_REPLICA_TIMEOUT: '200ms' };
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const short = await runCli(['cancel', sequenceId, '--reason', REASON, '--json'], { env: { ...env, REDIS_MIN_REPLICAS: '2' } });
    expect(short.code, short.stderr).toBe(1);
    expect(JSON.parse(short.stderr)).toMatchObject({ error: { code: 'NOT_REPLICATED' } });
    const again = await runCli(['cancel', sequenceId, '--reason', REASON, '--json'], { env: { ...env, REDIS_MIN_REPLICAS: '1' } });
    expect(again.code, again.stderr).toBe(5);
    expect(JSON.parse(again.stdout)).toMatchObject({ outcome: 'already-ended', state: 'cancelled' });
    expect(await tombstoneOnReplica(sequenceId)).toBe('cancelled:1');
  });

  it('POST /transfers/:sequenceId/cancel: 503 NOT_REPLICATED when fewer replicas acknowledge than REDIS_MIN_REPLICAS', async () => {
    const sequenceId = samplePayload().halfSigned.sequenceId;
    const response = await fetch(`${base}/transfers/${sequenceId}/cancel`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ reason: REASON }),
    });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: 'NOT_REPLICATED' });
    expect(await h.app!.ledger.ended(sequenceId)).toMatchObject({ state: 'cancelled' });
  });
});
