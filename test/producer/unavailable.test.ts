/**
 * docs/contract.md section 8: `submit()` fails fast with a clear error when Redis is unreachable instead of hanging; so
 * do waitForTerminal, events and close. Each case runs against a private redis-server this file starts,
 * stops, kills and restarts (never the shared test Redis).
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_SUBMIT_TIMEOUT_MS,
  jobIdFor,
  ProducerError,
  ProducerUnavailableError,
  SUBMIT_TRANSACTION,
  TransferProducer,
} from '../../packages/producer/src/index.ts';
import { getFreePort, startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { uniquePrefix } from '../helpers/redis.ts';

/** The bound these tests give the producer, and the slack allowed on top of it (timers, a loaded CI box). */
const BOUND_MS = 1_000;
const SLACK_MS = 750;

let server: RedisServerHandle;
const producers: TransferProducer[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  server = await startRedisServer();
});
afterEach(async () => {
  await Promise.all(producers.splice(0).map((producer) => producer.close()));
  for (const client of clients.splice(0)) client.disconnect();
});
afterAll(async () => {
  await server?.stop();
});

/** Kills the private Redis and lets the clients notice the closed socket (so what follows is "Redis down", not a race with it). */
async function killRedis(): Promise<void> {
  await server.kill();
  await new Promise((resolve) => setTimeout(resolve, 150));
}

async function timed<T>(work: Promise<T>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: Date.now() - started };
}

function expectUnavailable(result: { error: unknown; ms: number }, operation: string, boundMs = BOUND_MS): void {
  expect(result.error).toBeInstanceOf(ProducerUnavailableError);
  expect(result.error).toBeInstanceOf(ProducerError);
  expect(result.error).toMatchObject({ code: 'REDIS_UNAVAILABLE', name: 'ProducerUnavailableError', operation });
  expect(result.ms).toBeLessThan(boundMs + SLACK_MS);
}

/** Two producers on the private Redis: one owning a connection from the URL, one on a caller's connection. */
function producersOn(url: string, prefix: string): Array<{ mode: string; producer: TransferProducer; shared?: Redis }> {
  const shared = new Redis(url, { maxRetriesPerRequest: null });
  shared.on('error', () => undefined);
  clients.push(shared);
  const own = new TransferProducer({ connection: url, prefix, submitTimeoutMs: BOUND_MS });
  const callers = new TransferProducer({ connection: shared, prefix, submitTimeoutMs: BOUND_MS });
  producers.push(own, callers);
  return [
    { mode: 'own connection from a URL', producer: own },
    { mode: "caller's connection (offline queue on, maxRetriesPerRequest null)", producer: callers, shared },
  ];
}

describe('Redis unreachable', () => {
  it(`submit() rejects within the default bound (${DEFAULT_SUBMIT_TIMEOUT_MS} ms) with REDIS_UNAVAILABLE when Redis never answered`, async () => {
    const url = `redis://127.0.0.1:${await getFreePort()}`;
    const shared = new Redis(url, { maxRetriesPerRequest: null });
    shared.on('error', () => undefined);
    clients.push(shared);
    const own = new TransferProducer({ connection: url });
    const callers = new TransferProducer({ connection: shared });
    producers.push(own, callers);
    const results = await Promise.all([timed(own.submit(samplePayload())), timed(callers.submit(samplePayload()))]);
    for (const result of results) {
      expectUnavailable(result, 'submit', DEFAULT_SUBMIT_TIMEOUT_MS);
      expect(result.ms).toBeGreaterThanOrEqual(DEFAULT_SUBMIT_TIMEOUT_MS - 50);
      expect(result.error).toMatchObject({ maybeEnqueued: false });
      expect((result.error as Error).message).toMatch(/ECONNREFUSED/);
      expect((result.error as Error).message).toContain('submitting again is safe');
    }
  }, 20_000);

  it('with Redis stopped after it worked: submit, waitForTerminal, events and close each end within the bound', async () => {
    const prefix = uniquePrefix('unavailable');
    const modes = producersOn(server.url, prefix);
    for (const { producer } of modes) expect(await producer.submit(samplePayload())).toMatch(/^transfer-/);

    await killRedis();
    try {
      for (const { mode, producer } of modes) {
        const submit = await timed(producer.submit(samplePayload()));
        expectUnavailable(submit, 'submit');
        expect(submit.error, mode).toMatchObject({ maybeEnqueued: false });
        expectUnavailable(await timed(producer.waitForTerminal('some-transfer', 60_000)), 'waitForTerminal');
        expectUnavailable(
          await timed(
            (async () => {
              for await (const event of producer.events('some-transfer', { follow: true })) void event;
            })(),
          ),
          'events',
        );
        const closing = await timed(producer.close());
        expect(closing.error, mode).toBeUndefined();
        expect(closing.ms, mode).toBeLessThan(BOUND_MS + SLACK_MS);
      }
    } finally {
      await server.restart();
    }
  });

  it('a wait already following the stream ends with REDIS_UNAVAILABLE when Redis dies, not at its own deadline', async () => {
    const prefix = uniquePrefix('unavailable-follow');
    for (const { mode, producer } of producersOn(server.url, prefix)) {
      const waiting = timed(producer.waitForTerminal('followed-transfer', 60_000));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const killed = Date.now();
      await server.kill();
      try {
        const result = await waiting;
        expect(result.error, mode).toMatchObject({ code: 'REDIS_UNAVAILABLE', operation: 'waitForTerminal' });
        // One blocking slice (1 s) plus the bound at most.
        expect(Date.now() - killed, mode).toBeLessThan(1_000 + BOUND_MS + SLACK_MS);
      } finally {
        await server.restart();
      }
    }
  });

  it('after Redis comes back the same producers submit again, and a submit refused while it was down never lands later', async () => {
    const prefix = uniquePrefix('unavailable-back');
    const modes = producersOn(server.url, prefix);
    for (const { producer } of modes) await producer.submit(samplePayload());

    await killRedis();
    const refused = modes.map(() => samplePayload());
    try {
      for (const [i, { producer }] of modes.entries()) {
        expectUnavailable(await timed(producer.submit(refused[i]!)), 'submit');
      }
    } finally {
      await server.restart();
    }

    const probe = new Redis(server.url);
    clients.push(probe);
    for (const [i, { mode, producer }] of modes.entries()) {
      // ioredis reconnects with its back-off (at most 2 s); submit waits for it within its bound.
      const payload = samplePayload();
      await expect
        .poll(async () => producer.submit(payload).then(String, (error: Error) => error.message), { timeout: 10_000, interval: 200 })
        .toBe(jobIdFor(payload.halfSigned.sequenceId));
      expect(await probe.exists(`${prefix}:${SUBMIT_TRANSACTION}:${jobIdFor(payload.halfSigned.sequenceId)}`), mode).toBe(1);
      // The refused one was never sent: nothing queued it for later (restart() keeps what was written: AOF).
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await probe.exists(`${prefix}:${SUBMIT_TRANSACTION}:${jobIdFor(refused[i]!.halfSigned.sequenceId)}`), mode).toBe(0);
    }
  });
});
