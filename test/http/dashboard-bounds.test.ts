import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundedCopyWithoutUser, DASHBOARD_COPY_LIMITS, TRUNCATED } from '../../src/http/bounded-copy.ts';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/logger.ts';
import { QueueName } from '../../src/queues/names.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';

const DEPTH = 100_000;
/** JSON text nested DEPTH levels deep, with a `user` at the top and one a few levels down. */
const deepJson = () =>
  `{"user":{"email":"top@example.com"},"k":{"user":{"email":"inner@example.com"},"n":${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}}}`;

describe('dashboard formatting of hostile job data', () => {
  let h: Harness;
  let server: FastifyInstance;
  beforeAll(async () => {
    // Paused queues: the jobs stay waiting and no handler touches them.
    h = await startHarness({ name: 'dashboard-bounds', worker: false });
    await h.startWorker();
    for (const queue of Object.values(h.app!.queues)) await queue.pause();
    server = await createHttpServer({ app: h.app!, config: h.config, logger: createLogger({ level: 'silent' }), metrics: h.app!.metrics });
  });
  afterAll(async () => {
    await server.close();
    await h.close();
  });

  it('lists and shows a job whose data is 100,000 levels deep or huge: 200, bounded, no `user` anywhere', async () => {
    const queue = h.app!.queues[QueueName.SUBMIT];
    const deep = await queue.add(QueueName.SUBMIT, { placeholder: true }, { jobId: 'deep-job' });
    // Written as raw JSON text, the way any producer (or another language's client) could store it.
    await h.redis.hset(`${h.prefix}:${QueueName.SUBMIT}:${deep.id}`, 'data', deepJson());
    const wide = {
      user: { name: 'x' },
      list: Array.from({ length: 50_000 }, (_, index) => ({ index, user: { id: index } })),
      text: 'y'.repeat(1_000_000),
    };
    await queue.add(QueueName.SUBMIT, wide, { jobId: 'wide-job' });

    const list = await server.inject({ method: 'GET', url: `/dashboard/api/queues?activeQueue=${QueueName.SUBMIT}&status=waiting&page=1` });
    expect(list.statusCode, list.body.slice(0, 300)).toBe(200);
    expect(list.body.length).toBeLessThan(1_000_000);
    expect(list.body).not.toMatch(/"user"|example\.com/);
    expect(list.body).toContain(TRUNCATED);

    for (const id of ['deep-job', 'wide-job']) {
      const job = await server.inject({ method: 'GET', url: `/dashboard/api/queues/${QueueName.SUBMIT}/${id}` });
      expect(job.statusCode, `${id}: ${job.body.slice(0, 300)}`).toBe(200);
      expect(job.body.length).toBeLessThan(1_000_000);
      expect(job.body).not.toMatch(/"user"|example\.com/);
    }
  });
});

describe('boundedCopyWithoutUser', () => {
  it('keeps small values as they are, minus every `user` key at any depth', () => {
    const value = {
      a: 1,
      b: [1, 'x', null, { user: 1, c: true }],
      user: { secret: 1 },
      raw: { nested: { user: { email: 'e' }, keep: 'k' } },
    };
    expect(boundedCopyWithoutUser(value)).toEqual({ a: 1, b: [1, 'x', null, { c: true }], raw: { nested: { keep: 'k' } } });
    expect(boundedCopyWithoutUser('text')).toBe('text');
    expect(boundedCopyWithoutUser(null)).toBe(null);
  });

  it('cuts depth, breadth, long strings and the total size, saying so', () => {
    const limits = { depth: 3, breadth: 4, stringLength: 5, nodes: 12 };
    expect(boundedCopyWithoutUser({ a: { b: { c: { d: 1 } } } }, limits)).toEqual({
      a: { b: { c: `${TRUNCATED} (deeper than 3 levels)` } },
    });
    expect(boundedCopyWithoutUser([1, 2, 3, 4, 5, 6], limits)).toEqual([1, 2, 3, 4, `${TRUNCATED} (2 more)`]);
    expect(boundedCopyWithoutUser('abcdefgh', limits)).toBe(`abcde… ${TRUNCATED} (8 characters)`);
    const copied = JSON.stringify(
      boundedCopyWithoutUser(
        Array.from({ length: 4 }, () => [1, 2, 3, 4]),
        limits,
      ),
    );
    expect((copied.match(/\d/g) ?? []).length).toBeLessThanOrEqual(limits.nodes + 8);
    expect(copied).toContain(TRUNCATED);
  });

  it('keeps a `__proto__` key a key (no prototype change)', () => {
    const copy = boundedCopyWithoutUser(JSON.parse('{"__proto__":{"polluted":true}}')) as Record<string, unknown>;
    expect(Object.keys(copy)).toEqual(['__proto__']);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
  });

  it('survives any depth without recursion', () => {
    const copy = boundedCopyWithoutUser(JSON.parse(deepJson()));
    expect(JSON.stringify(copy).length).toBeLessThan(10_000);
    expect(DASHBOARD_COPY_LIMITS.depth).toBeLessThan(100);
  });
});
