/**
 * `custody-worker webhooks` as a real child process against the test Redis, while the webhook
 * subsystem delivers to a real receiver on 127.0.0.1: an endpoint disabled by a 410 is listed as
 * such and resumes once enabled; `replay --id` and `replay --from` send events again under their own
 * webhook-ids, in each transfer's version order.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { WebhooksEnableResult, WebhooksListResult, WebhooksReplayResult } from '../../src/cli/commands/webhooks.ts';
import { killAllClis, runCli, type CliResult } from '../helpers/cli-process.ts';
import { closeAllRedis, newRedis, testRedisUrl } from '../helpers/redis.ts';
import { processesTimeout } from '../helpers/timeouts.ts';
import { until } from '../helpers/wait.ts';
import { closeWebhooks, receiver, startHook, WAIT_MS, type Hook, type Received } from '../helpers/webhooks.ts';

const redis = newRedis();

afterEach(async () => {
  await killAllClis();
  await closeWebhooks();
});
afterAll(closeAllRedis);

function cli(hook: Hook, args: string[]): Promise<CliResult> {
  return runCli(['webhooks', ...args], { env: { REDIS_URL: testRedisUrl(), ...hook.env } });
}

async function json<T>(hook: Hook, args: string[]): Promise<T> {
  const result = await cli(hook, [...args, '--json']);
  expect(result.stderr, args.join(' ')).toBe('');
  expect(result.code, args.join(' ')).toBe(0);
  return JSON.parse(result.stdout) as T;
}

const versionsOf = (received: Received[], sequenceId: string) =>
  received.filter((e) => e.body.data.sequenceId === sequenceId).map((e) => e.body.data.version);

describe('webhooks list and enable', { timeout: processesTimeout(3) }, () => {
  it('lists an endpoint a 410 disabled, with its backlog, and enabling it resumes delivery', async () => {
    const { receiver: r, url } = await receiver();
    let gone = true;
    r.answer = (_e, _n, res) => res.writeHead(gone ? 410 : 200).end();
    const hook = await startHook(redis, url);
    const first = await hook.publish('seq-a', 1);
    await until('the 410', WAIT_MS, async () => (r.received.length > 0 ? true : undefined));
    const second = await hook.publish('seq-b', 1);

    const listed = await until('both events in the backlog', WAIT_MS, async () => {
      const list = await json<WebhooksListResult>(hook, ['list']);
      return list.endpoints[0]?.backlog === 2 ? list : undefined;
    });
    expect(listed.endpoints).toEqual([
      {
        endpoint: 'hook',
        state: 'disabled',
        disabledAt: expect.any(String),
        disabledBy: first,
        backlog: 2,
        oldestPendingAt: new Date(Number(first.split('-')[0])).toISOString(),
        oldestPendingAgeSeconds: expect.any(Number),
        deadLettered: 0,
      },
    ]);
    // Disabled: nothing more was sent.
    expect(r.received).toHaveLength(1);

    gone = false;
    const enabled = await json<WebhooksEnableResult>(hook, ['enable', 'hook']);
    expect(enabled).toEqual({ endpoint: 'hook', wasDisabled: true, disabledAt: listed.endpoints[0]!.disabledAt, disabledBy: first });
    await until('both events delivered', WAIT_MS, async () => (r.delivered().length === 2 ? true : undefined));
    expect(r.received.map((e) => e.id).sort()).toEqual([first, first, second].sort());

    const after = await json<WebhooksListResult>(hook, ['list']);
    expect(after.endpoints[0]).toMatchObject({ state: 'enabled', disabledAt: null, backlog: 0, oldestPendingAt: null });
  });
});

describe('webhooks replay', { timeout: processesTimeout(4) }, () => {
  it('--id sends one event again under the same webhook-id and body; an unknown id or endpoint exits 3', async () => {
    const { receiver: r, url } = await receiver();
    const hook = await startHook(redis, url);
    const id = await hook.publish('seq-r', 1, JSON.stringify({ orderId: 'A-1', customer: 'Jane Doe' }));
    await until('the first delivery', WAIT_MS, async () => (r.delivered().length === 1 ? true : undefined));

    const [replayed, unknownId, unknownEndpoint] = await Promise.all([
      json<WebhooksReplayResult>(hook, ['replay', 'hook', '--id', id]),
      cli(hook, ['replay', 'hook', '--id', '1-0']),
      cli(hook, ['replay', 'nope', '--id', id]),
    ]);
    expect(replayed).toMatchObject({ endpoint: 'hook', from: id, queued: 1, alreadyQueued: 0 });
    expect([unknownId.code, unknownEndpoint.code]).toEqual([3, 3]);
    await until('the replayed delivery', WAIT_MS, async () => (r.delivered().length === 2 ? true : undefined));
    expect(r.received.map((e) => e.id)).toEqual([id, id]);
    expect(r.received[1]!.body).toEqual(r.received[0]!.body);
    expect(r.received[1]!.verified).toEqual([true, true]);
  });

  it('--from sends every event from that point again, each transfer in version order behind what it still waits for', async () => {
    const { receiver: r, url } = await receiver();
    // Retries 300 ms apart for as long as the replay may take to start on a busy machine.
    const hook = await startHook(redis, url, { WEBHOOK_RETRY_SCHEDULE: ['0', ...Array<string>(99).fill('300ms')].join(',') });
    const a1 = await hook.publish('seq-a', 1);
    const a2 = await hook.publish('seq-a', 2);
    const b1 = await hook.publish('seq-b', 1);
    await until('the first three deliveries', WAIT_MS, async () => (r.delivered().length === 3 ? true : undefined));
    // seq-a's version 3 is refused until the replay is queued: it waits, queued, while the replay comes in.
    let hold = true;
    r.answer = (e, _n, res) => res.writeHead(hold && e.body.data.version === 3 ? 500 : 200).end();
    const a3 = await hook.publish('seq-a', 3);
    await until('a refused try of version 3', WAIT_MS, async () => (r.received.length === 4 ? true : undefined));

    const replayed = await json<WebhooksReplayResult>(hook, ['replay', 'hook', '--from', a2]);
    hold = false;
    expect(replayed).toMatchObject({ from: a2, to: a3, read: 3, queued: 2, alreadyQueued: 1, skipped: 0 });
    const afterReplay = () => r.delivered().slice(3);
    await until('the replayed events and version 3', WAIT_MS, async () =>
      new Set(afterReplay().map((e) => e.id)).size === 3 ? true : undefined,
    );
    expect(new Set(afterReplay().map((e) => e.id))).toEqual(new Set([a2, b1, a3]));
    // Version 2 went before its transfer's version 3, although 3 was queued first.
    expect([...new Set(versionsOf(afterReplay(), 'seq-a'))]).toEqual([2, 3]);
    expect(r.received.filter((e) => e.id === a1)).toHaveLength(1);

    // An ISO time starts at the first event of that millisecond or later: b1's, and a2 too when it was
    // published in the same millisecond.
    const mark = r.received.length;
    const msOf = (id: string) => Number(id.split('-')[0]);
    const fromTime = new Date(msOf(b1)).toISOString();
    const fromThen = [a2, b1, a3].filter((id) => msOf(id) >= msOf(b1));
    const byTime = await json<WebhooksReplayResult>(hook, ['replay', 'hook', '--from', fromTime]);
    expect(byTime).toMatchObject({ from: `${Date.parse(fromTime)}-0`, to: a3, read: fromThen.length, queued: fromThen.length });
    await until('the events from that time', WAIT_MS, async () => (r.received.length - mark === fromThen.length ? true : undefined));
    expect(new Set(r.received.slice(mark).map((e) => e.id))).toEqual(new Set(fromThen));
  });
});
