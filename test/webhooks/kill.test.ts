/**
 * Outbound webhooks against the crash that matters: the real worker process (`node src/worker.ts`)
 * SIGKILLed every few seconds and restarted while N transfers publish their events and the receiver
 * flaps (500 for a while, then 200, again and again). Whatever a kill cut off (an entry read from the
 * stream but not yet queued, a try sent but not yet recorded, a lane leased by the dead process), every
 * event must reach the receiver at least once, every copy under the event's own webhook-id with the
 * same body, and each transfer's versions in order.
 *
 * N is WEBHOOK_KILL_TRANSFERS (default 150, for `npm test`); `WEBHOOK_KILL_TRANSFERS=1000 npx vitest
 * run test/webhooks/kill.test.ts` by hand (its result and duration: bench/README.md, "Webhooks").
 */
import { afterEach, describe, expect, it } from 'vitest';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';
import { sleep, until } from '../helpers/wait.ts';
import { closeWebhooks, receiver, SECRETS, type Received } from '../helpers/webhooks.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';

const TRANSFERS = Number(process.env.WEBHOOK_KILL_TRANSFERS ?? 150);
/** SIGKILLs, each a few seconds after the worker before it started. */
const KILLS = 3;
/** The receiver answers 500 for FLAP_MS, then 200 for FLAP_MS, … until the kills are over. */
const FLAP_MS = 1_000;
/**
 * Entries a killed worker read but had not queued are claimed by a live one once idle for
 * WEBHOOK_CLAIM_IDLE_MS (10 s), and the claim runs that often: a bound for a hang, not a measure.
 */
const DELIVERED_WITHIN_MS = 90_000;

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await killAllWorkers();
  await closeWebhooks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

describe(`webhooks of ${TRANSFERS} transfers while the worker is SIGKILLed and the receiver flaps`, () => {
  it(
    'delivers every event at least once, under its own webhook-id, each transfer in version order',
    { timeout: processesTimeout(KILLS + 1, DELIVERED_WITHIN_MS + 60_000) },
    async () => {
      const { receiver: r, url } = await receiver();
      let flapping = true;
      const started = Date.now();
      r.answer = (_e, _n, res) => res.writeHead(flapping && Math.floor((Date.now() - started) / FLAP_MS) % 2 === 0 ? 500 : 200).end();

      const h: Harness = await startHarness({
        name: 'webhook-kill',
        worker: false,
        sim: { settings: { latencyMs: { sendTransaction: 20 }, visibleAfterMs: 200, txidAfterMs: 300 } },
        env: {
          LOG_LEVEL: 'info',
          JOB_LOCK_DURATION: '2s',
          SHUTDOWN_TIMEOUT: '10s',
          WEBHOOK_ENDPOINTS: JSON.stringify([{ name: 'hook', url, secrets: SECRETS }]),
          WEBHOOK_ALLOW_HTTP: '1',
          WEBHOOK_ALLOW_PRIVATE: '1',
          WEBHOOK_TIMEOUT: '1s',
          // Tries 250 ms apart for about 25 s: the flapping never spends them (no dead-letter).
          WEBHOOK_RETRY_SCHEDULE: ['0', ...Array<string>(99).fill('250ms')].join(','),
        },
      });
      cleanups.push(() => h.close());

      const workers: WorkerProcess[] = [];
      const start = async () => {
        const worker = spawnWorker(h.env, { name: `webhook-kill-worker-${workers.length + 1}` });
        workers.push(worker);
        await worker.waitForLog('worker started', PROCESS_MS);
        return worker;
      };
      let worker = await start();
      // The endpoint's consumer group starts at the stream's end: submit once it exists.
      await until('the webhook consumer group', PROCESS_MS, async () => {
        const groups = (await h.redis.xinfo('GROUPS', h.config.queue.eventsStream).catch(() => [])) as unknown[];
        return groups.length > 0 ? true : undefined;
      });
      const payloads = Array.from({ length: TRANSFERS }, () => samplePayload());
      await Promise.all(payloads.map((p) => h.producer.submit(p)));

      const terminal = async () => (await h.events()).filter((e) => e.event === 'transfer.broadcast').length;
      let kills = 0;
      while (kills < KILLS) {
        // A few seconds of work, then the kill wherever it falls.
        await sleep(1_500 + Math.random() * 1_500);
        worker.kill('SIGKILL');
        const exit = await worker.waitForExit(5_000);
        expect(exit.signal, `${worker.name} should have died of SIGKILL`).toBe('SIGKILL');
        kills += 1;
        worker = await start();
      }
      flapping = false;

      await until(`every transfer's terminal event`, 60_000, async () => ((await terminal()) === TRANSFERS ? true : undefined), 200);
      const stream = await h.redis.xrange(h.config.queue.eventsStream, '-', '+');
      const published = new Map(stream.map(([id]) => [id, true]));
      const delivered = () => new Set(r.delivered().map((e) => e.id));
      try {
        await until(
          `all ${published.size} events delivered`,
          DELIVERED_WITHIN_MS,
          async () => ([...published.keys()].every((id) => delivered().has(id)) ? true : undefined),
          200,
        );
      } catch (error) {
        const missing = [...published.keys()].filter((id) => !delivered().has(id));
        throw new Error(`${(error as Error).message}; ${missing.length} never delivered, e.g. ${missing.slice(0, 5).join(', ')}`, {
          cause: error,
        });
      }
      const last = await worker.stop(10_000);
      expect(last).toEqual({ code: 0, signal: null });

      // Every copy is of its own event: the same webhook-id always carries the same transfer, version and body.
      const events = new Map((await h.events()).map((e, i) => [stream[i]![0], e]));
      const wrong = r.received.filter((e) => {
        const event = events.get(e.id);
        return event === undefined || event.event !== e.body.type || (event.sequenceId !== '' && event.version !== e.body.data.version);
      });
      expect(wrong.map((e) => `${e.id}: ${e.body.type} v${e.body.data.version}`)).toEqual([]);
      expect(r.received.every((e) => e.verified.every(Boolean))).toBe(true);

      // Per transfer, the tries (delivered or not) never go back to an earlier version.
      const bySequence = new Map<string, Received[]>();
      for (const e of r.received) {
        if (e.body.data.sequenceId === '') continue;
        bySequence.set(e.body.data.sequenceId, [...(bySequence.get(e.body.data.sequenceId) ?? []), e]);
      }
      const outOfOrder = [...bySequence].filter(([, tries]) =>
        tries.some((e, i) => i > 0 && e.body.data.version < tries[i - 1]!.body.data.version),
      );
      expect(outOfOrder.map(([id, tries]) => `${id}: ${tries.map((e) => e.body.data.version).join(',')}`)).toEqual([]);

      // The run really cut into deliveries: some event was sent more than once (a failed try, or a
      // try whose 200 the killed worker never recorded).
      const copies = new Map<string, number>();
      for (const e of r.received) copies.set(e.id, (copies.get(e.id) ?? 0) + 1);
      const redelivered = [...copies.values()].filter((n) => n > 1).length;
      const deliveredTwice = [...new Set(r.delivered().map((e) => e.id))].filter(
        (id) => r.delivered().filter((e) => e.id === id).length > 1,
      );
      expect(redelivered).toBeGreaterThan(0);
      console.log(
        `[webhook kill] ${TRANSFERS} transfers, ${published.size} events, ${kills} SIGKILLs, ${r.received.length} requests ` +
          `(${r.delivered().length} answered 2xx), ${redelivered} events sent more than once, ` +
          `${deliveredTwice.length} delivered (2xx) more than once, ${Date.now() - started} ms`,
      );
    },
  );
});
