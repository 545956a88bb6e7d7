/**
 * A managed Redis that fails over behind one address (a DNS name or an endpoint that moves to the
 * promoted replica): connections made before the failover stay open to the old master, which is now a
 * replica and answers every write with READONLY. Nothing closes them (no Sentinel kills the clients), so
 * the worker must reconnect on READONLY (ioredis reconnectOnError) and reach the new master through the
 * same address. Here the address is a TCP proxy on loopback whose new connections go to the promoted
 * replica once switched; the old connections stay where they were.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransferProducer } from '../../packages/producer/src/index.ts';
import { startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { startReplicas } from '../helpers/replicas.ts';
import { QueueName, trackJobId } from '../../src/queues/names.ts';
import { until } from '../helpers/wait.ts';

/** A TCP proxy to `target.port`; `target` can be changed, which moves only new connections. */
async function startProxy(targetPort: number): Promise<{ port: number; target: { port: number }; close(): Promise<void> }> {
  const target = { port: targetPort };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: target.port });
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    port: address.port,
    target,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const SUBMITTED = new Set(['transfer.submitted']);

/** The worker's warnings and errors, kept for the failure message (time, message, error, ids). */
const workerLog: string[] = [];
const logTo = {
  write(line: string): void {
    const entry = JSON.parse(line) as { time?: string; msg?: string; err?: { message?: string }; queue?: string; sequenceId?: string };
    workerLog.push([entry.time, entry.queue, entry.sequenceId, entry.msg, entry.err?.message?.slice(0, 120)].filter(Boolean).join(' '));
  },
};

describe('Redis failing over behind one address', () => {
  let first: RedisServerHandle;
  let second: RedisServerHandle;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let h: Harness;

  beforeAll(async () => {
    first = await startRedisServer();
    [second] = (await startReplicas(first, 1)) as [RedisServerHandle];
    proxy = await startProxy(first.port);
    const url = `redis://127.0.0.1:${proxy.port}`;
    // Reconciliation every 2 s: it repairs what a write lost with the old master left behind (a tracking
    // job moved on the old master after the replica was promoted), as it does every RECONCILE_EVERY.
    h = await startHarness({
      name: 'endpoint-failover',
      redisUrl: url,
      env: { REDIS_URL: url, RECONCILE_EVERY: '2s', RECONCILE_GRACE: '1s', LOG_LEVEL: 'warn' },
      logTo,
    });
  });
  afterAll(async () => {
    await h?.close();
    await proxy?.close();
    await second?.stop();
    await first?.stop();
  });

  it('reconnects on READONLY once the old master is a replica, and carries on with the promoted one', { timeout: 90_000 }, async () => {
    const before = samplePayload();
    await h.producer.submit(before);
    await h.producer.waitForTerminal(before.halfSigned.sequenceId, 15_000, SUBMITTED);

    // The failover, as a managed service does it: promote the replica, demote the old master, move the
    // address. The worker's open connections still lead to the old master.
    const promote = new Redis(second.url);
    await promote.call('REPLICAOF', 'NO', 'ONE');
    proxy.target.port = second.port;
    const demote = new Redis(first.url);
    await demote.call('REPLICAOF', '127.0.0.1', String(second.port));
    await until(
      'the old master replicating again',
      15_000,
      async () => (/master_link_status:up/.test(await demote.info('replication')) ? true : undefined),
      100,
    );
    demote.disconnect();

    // A producer of another service, connected after the failover, reaches the new master.
    const connection = new Redis(second.url, { maxRetriesPerRequest: null });
    const producer = new TransferProducer({ connection, prefix: h.prefix, eventsStream: h.config.queue.eventsStream });
    try {
      const after = samplePayload();
      const sequenceId = after.halfSigned.sequenceId;
      await producer.submit(after);
      await producer.waitForTerminal(sequenceId, 30_000, SUBMITTED);
      h.sim.setTxid(sequenceId);
      expect((await producer.waitForTerminal(sequenceId, 20_000)).event).toBe('transfer.broadcast');
      expect(h.sim.stats().sends[sequenceId]).toEqual({ accepted: 1, duplicates: 0 });
      // The transfer from before the failover was on the replica too: tracking (or reconciliation, when
      // the failover took its tracking job's last move) ends it on the new master.
      h.sim.setTxid(before.halfSigned.sequenceId);
      const ended = await producer.waitForTerminal(before.halfSigned.sequenceId, 45_000).catch(async (error: unknown) => {
        // Where the transfer and its tracking job are, for the failure message.
        const record = await connection.hgetall(`${h.prefix}:transfer:${before.halfSigned.sequenceId}`);
        const track = new Queue(QueueName.TRACK, { connection, prefix: h.prefix });
        const job = await track.getJob(trackJobId(before.halfSigned.sequenceId));
        const where = {
          record,
          job: job
            ? {
                state: await job.getState(),
                attemptsMade: job.attemptsMade,
                stalledCounter: job.stalledCounter,
                delay: job.delay,
                timestamp: job.timestamp,
              }
            : null,
          counts: await track.getJobCounts(),
          workerLog: workerLog.slice(-30),
        };
        await track.close();
        throw new Error(`${(error as Error).message}; ${JSON.stringify(where)}`);
      });
      expect(ended.event).toBe('transfer.broadcast');
    } finally {
      await producer.close();
      connection.disconnect();
      promote.disconnect();
    }
  });
});
