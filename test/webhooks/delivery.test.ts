/**
 * Outbound webhooks end to end on real Redis: events written to the stream are POSTed to a real HTTP
 * server on 127.0.0.1 that verifies every signature with the Standard Webhooks reference library. Traffic
 * goes only to loopback, so every test allows http:// and private addresses but the SSRF one.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config.ts';
import type { Metrics } from '../../src/metrics.ts';
import { endpointKeys } from '../../src/webhooks/store.ts';
import { closeAllRedis, newRedis } from '../helpers/redis.ts';
import { until } from '../helpers/wait.ts';
import {
  closeWebhooks,
  configWith,
  receiver as newReceiver,
  SECRETS,
  startHook as startHookOn,
  stopRunning,
  WAIT_MS,
} from '../helpers/webhooks.ts';

const redis = newRedis();

afterEach(closeWebhooks);
afterAll(closeAllRedis);

const receiver = newReceiver;
const startHook = (url: string, env: Record<string, string> = {}) => startHookOn(redis, url, env);

async function metricValue(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await metrics.registry.getSingleMetric(name)?.get())?.values ?? [];
  const found = metric.find((v) => Object.entries(labels).every(([k, value]) => v.labels[k] === value));
  return found?.value ?? 0;
}

async function deadLetters(prefix: string): Promise<Array<Record<string, string>>> {
  const entries = await redis.xrange(endpointKeys(prefix, 'hook').dead, '-', '+');
  return entries.map(([, fields]) => Object.fromEntries(fields.flatMap((_, i) => (i % 2 === 0 ? [[fields[i]!, fields[i + 1]!]] : []))));
}

describe('webhook delivery', () => {
  it('redelivers after a 500 under the same webhook-id, signed with every secret, with metadata redacted', async () => {
    const { receiver: r, url } = await receiver();
    r.answer = (_e, nth, res) => res.writeHead(nth === 1 ? 500 : 200).end();
    const hook = await startHook(url);
    const id = await hook.publish('seq-a', 1, JSON.stringify({ orderId: 'A-1', customer: 'Jane Doe' }));
    await until('the delivery counted', WAIT_MS, async () =>
      (await metricValue(hook.metrics, 'custody_webhook_deliveries_total', { outcome: 'delivered' })) === 1 ? true : undefined,
    );
    expect(r.received.map((e) => e.id)).toEqual([id, id]);
    expect(r.received.every((e) => e.verified.every(Boolean))).toBe(true);
    expect(r.received[1]!.body).toEqual({
      type: 'transfer.cancelled',
      timestamp: expect.any(String),
      data: {
        sequenceId: 'seq-a',
        walletId: '310',
        coin: 'eth',
        version: 1,
        epoch: null,
        data: { reason: 'step 1', by: 'test' },
        metadata: { orderId: 'A-1', customer: '[redacted]' },
      },
    });
    expect(await metricValue(hook.metrics, 'custody_webhook_attempts_total', { result: 'http-error' })).toBe(1);
  });

  it('retries a try that outlasts WEBHOOK_TIMEOUT', async () => {
    const { receiver: r, url } = await receiver();
    r.answer = (_e, nth, res) => {
      if (nth === 1) setTimeout(() => res.writeHead(200).end(), 2_000).unref();
      else res.writeHead(200).end();
    };
    const hook = await startHook(url, { WEBHOOK_TIMEOUT: '200ms' });
    const id = await hook.publish('seq-t', 1);
    await until('the timed-out try counted', WAIT_MS, async () =>
      (await metricValue(hook.metrics, 'custody_webhook_attempts_total', { result: 'timeout' })) >= 1 ? true : undefined,
    );
    await until('the second try', WAIT_MS, async () => (r.received.length >= 2 ? true : undefined));
    expect(r.received.map((e) => e.id)).toEqual([id, id]);
  });

  it('disables the endpoint on 410 and sends nothing more', async () => {
    const { receiver: r, url } = await receiver();
    r.answer = (_e, _n, res) => res.writeHead(410).end();
    const hook = await startHook(url);
    await hook.publish('seq-g', 1);
    const keys = endpointKeys(hook.prefix, 'hook');
    await until('the endpoint disabled', WAIT_MS, async () => ((await redis.exists(keys.disabled)) === 1 ? true : undefined));
    await hook.publish('seq-h', 1);
    await until('the second event queued', WAIT_MS, async () => ((await redis.zcard(keys.backlog)) === 2 ? true : undefined));
    // Two rounds of the dispatcher after the event was queued (each sets the gauge from Redis).
    for (let round = 0; round < 2; round++) {
      hook.metrics.webhookDisabled.set({ endpoint: 'hook' }, -1);
      await until('a dispatcher round', WAIT_MS, async () =>
        (await metricValue(hook.metrics, 'custody_webhook_endpoint_disabled', { endpoint: 'hook' })) === 1 ? true : undefined,
      );
    }
    expect(r.received).toHaveLength(1);
    expect(await metricValue(hook.metrics, 'custody_webhook_attempts_total', { result: 'gone' })).toBe(1);
  });

  it("waits at least a 429's Retry-After", async () => {
    const { receiver: r, url } = await receiver();
    r.answer = (_e, nth, res) => (nth === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.writeHead(200).end());
    const hook = await startHook(url);
    await hook.publish('seq-r', 1);
    await until('the delivery counted', WAIT_MS, async () =>
      (await metricValue(hook.metrics, 'custody_webhook_deliveries_total', { outcome: 'delivered' })) === 1 ? true : undefined,
    );
    expect(r.received[1]!.at - r.received[0]!.at).toBeGreaterThanOrEqual(1_000);
    expect(await metricValue(hook.metrics, 'custody_webhook_attempts_total', { result: 'throttled' })).toBe(1);
  });

  it('retries when the receiver closes the socket', async () => {
    const { receiver: r, url } = await receiver();
    r.answer = (_e, nth, res, req) => (nth === 1 ? req.socket.destroy() : res.writeHead(200).end());
    const hook = await startHook(url);
    const id = await hook.publish('seq-s', 1);
    await until('the delivery counted', WAIT_MS, async () =>
      (await metricValue(hook.metrics, 'custody_webhook_deliveries_total', { outcome: 'delivered' })) === 1 ? true : undefined,
    );
    expect(r.received.map((e) => e.id)).toEqual([id, id]);
    expect(await metricValue(hook.metrics, 'custody_webhook_attempts_total', { result: 'network' })).toBe(1);
  });

  it('does not follow a redirect to another loopback URL: retried, then dead-lettered', async () => {
    const { receiver: target, url: targetUrl } = await receiver();
    const { receiver: r, url } = await receiver();
    r.answer = (_e, _n, res) => res.writeHead(307, { location: targetUrl }).end();
    const hook = await startHook(url, { WEBHOOK_RETRY_SCHEDULE: '0,20ms' });
    const id = await hook.publish('seq-3xx', 1);
    const [dead] = await until('the dead-letter', WAIT_MS, async () => {
      const found = await deadLetters(hook.prefix);
      return found.length > 0 ? found : undefined;
    });
    expect(dead).toMatchObject({ entryId: id, endpoint: 'hook', tries: '2', lastResult: 'redirect', lastStatus: '307' });
    expect(r.received).toHaveLength(2);
    expect(target.received).toHaveLength(0);
    expect(await redis.zcard(endpointKeys(hook.prefix, 'hook').backlog)).toBe(0);
  });

  it("delivers one transfer's events in version order, each after the one before, other transfers meanwhile", async () => {
    const { receiver: r, url } = await receiver();
    // seq-a's first event is refused until all of seq-b was delivered (and at least 3 times): however
    // slow the machine, seq-b gets through only if it does not wait for seq-a. Its tries are 100 ms
    // apart, as many as the schedule takes, so seq-a never runs out of them first.
    const seqBDelivered = () => r.delivered().some((e) => e.body.data.sequenceId === 'seq-b' && e.body.data.version === 3);
    let refused = 0;
    r.answer = (e, _n, res) => {
      const blocked = e.body.data.sequenceId === 'seq-a' && e.body.data.version === 1 && (refused < 3 || !seqBDelivered());
      if (blocked) refused++;
      res.writeHead(blocked ? 500 : 200).end();
    };
    const hook = await startHook(url, { WEBHOOK_RETRY_SCHEDULE: ['0', ...Array<string>(99).fill('100ms')].join(',') });
    for (let version = 1; version <= 3; version++) {
      await hook.publish('seq-a', version);
      await hook.publish('seq-b', version);
    }
    await until('every event', WAIT_MS, async () => (r.delivered().length === 6 ? true : undefined));
    const order = (sequenceId: string) => r.received.filter((e) => e.body.data.sequenceId === sequenceId).map((e) => e.body.data.version);
    expect(refused).toBeGreaterThanOrEqual(3);
    expect(order('seq-a')).toEqual([...Array<number>(refused + 1).fill(1), 2, 3]);
    expect(order('seq-b')).toEqual([1, 2, 3]);
    // seq-b did not wait for seq-a: all of it was delivered before seq-a's first event was.
    const deliveredAt = r.delivered().map((e) => `${e.body.data.sequenceId}:${e.body.data.version}`);
    expect(deliveredAt.indexOf('seq-b:3')).toBeLessThan(deliveredAt.indexOf('seq-a:1'));
  });

  it('keeps a delivery across a restart of the subsystem', async () => {
    const { receiver: r, url } = await receiver();
    let healthy = false;
    r.answer = (_e, _n, res) => res.writeHead(healthy ? 200 : 500).end();
    // Tries 200 ms apart, enough of them that the delivery outlasts a slow stop and start unhealthy.
    const hook = await startHook(url, { WEBHOOK_RETRY_SCHEDULE: ['0', ...Array<string>(99).fill('200ms')].join(',') });
    const id = await hook.publish('seq-restart', 1);
    await until('a failed try', WAIT_MS, async () => (r.received.length > 0 ? true : undefined));
    await stopRunning();
    healthy = true;
    hook.start();
    await until('the delivery after the restart', WAIT_MS, async () => (r.delivered().length > 0 ? true : undefined));
    expect(new Set(r.received.map((e) => e.id))).toEqual(new Set([id]));
  });

  it('refuses a name that resolves to 127.0.0.1 without WEBHOOK_ALLOW_PRIVATE (checked at connect time)', async () => {
    const { receiver: r, url } = await receiver();
    const named = url.replace('127.0.0.1', 'localhost');
    const hook = await startHook(named, { WEBHOOK_ALLOW_PRIVATE: '', WEBHOOK_RETRY_SCHEDULE: '0,20ms' });
    const id = await hook.publish('seq-ssrf', 1);
    const [dead] = await until('the dead-letter', WAIT_MS, async () => {
      const found = await deadLetters(hook.prefix);
      return found.length > 0 ? found : undefined;
    });
    expect(dead).toMatchObject({ entryId: id, lastResult: 'address-refused', tries: '2' });
    expect(r.received).toHaveLength(0);
  });
});

describe('webhook configuration', () => {
  const problems = (env: Record<string, string>): string[] => {
    try {
      configWith(env);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  };
  const secret = SECRETS[0]!;

  it('takes endpoints from JSON, with every type by default', () => {
    const config = configWith({ WEBHOOK_ENDPOINTS: JSON.stringify([{ name: 'a', url: 'https://example.test/h', secrets: [secret] }]) });
    expect(config.webhooks.endpoints[0]!.events).toContain('transfer.broadcast');
    expect(config.webhooks.retryScheduleMs).toEqual([0, 20, 20, 20, 20]);
    expect(configWith({}).webhooks.endpoints).toEqual([]);
  });

  it('names the variable and the entry, never a secret or a URL', () => {
    const bad = `whsec_${'!'.repeat(20)}`;
    const found = problems({
      WEBHOOK_ENDPOINTS: JSON.stringify([
        { name: 'a', url: 'https://user:pw@example.test/h', secrets: [bad] },
        { name: 'b', url: 'https://example.test/h', secrets: [secret], events: ['transfer.nope'] },
        { name: 'b', url: 'https://example.test/h2', secrets: [secret] },
      ]),
      WEBHOOK_RETRY_SCHEDULE: '0,soon',
      WEBHOOK_TIMEOUT: 'never',
    });
    expect(found).toEqual([
      'WEBHOOK_ENDPOINTS: entry 1 (a): every secret must be whsec_ and the base64 of at least 16 bytes',
      expect.stringMatching(/^WEBHOOK_ENDPOINTS: entry 2 \(b\): events must name known event types/),
      'WEBHOOK_ENDPOINTS: entry 3 (b): name is used by an earlier entry',
      expect.stringMatching(/^WEBHOOK_TIMEOUT: must be a duration/),
      expect.stringMatching(/^WEBHOOK_RETRY_SCHEDULE: must be 1-100 comma-separated durations/),
    ]);
    expect(found.join('\n')).not.toMatch(/pw|!!!!/);
  });

  it('refuses http:// and private address literals unless allowed, and reads @path', () => {
    const endpoints = JSON.stringify([{ name: 'a', url: 'http://10.0.0.1/h', secrets: [secret] }]);
    expect(problems({ WEBHOOK_ENDPOINTS: endpoints, WEBHOOK_ALLOW_HTTP: '', WEBHOOK_ALLOW_PRIVATE: '' })).toEqual([
      'WEBHOOK_ENDPOINTS: entry 1 (a): url must be https:// unless WEBHOOK_ALLOW_HTTP=1',
      'WEBHOOK_ENDPOINTS: entry 1 (a): url names a private address, refused unless WEBHOOK_ALLOW_PRIVATE=1',
    ]);
    expect(problems({ WEBHOOK_ENDPOINTS: endpoints })).toEqual([]);
    expect(problems({ WEBHOOK_ENDPOINTS: '@/nonexistent/webhooks.json' })).toEqual([
      'WEBHOOK_ENDPOINTS: cannot read the file after @ (ENOENT)',
    ]);
    expect(problems({ WEBHOOK_ENDPOINTS: '{"name":"a"}' })).toEqual(['WEBHOOK_ENDPOINTS: must be a JSON array of endpoints']);
  });
});
