/**
 * Outbound webhooks under test: a real HTTP receiver on 127.0.0.1 that verifies every signature with
 * the Standard Webhooks reference library, and the webhook subsystem of one endpoint `hook` started
 * in-process on real Redis. Traffic goes only to loopback, so the configuration allows http:// and
 * private addresses. Call `closeWebhooks()` in afterEach.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { createMetrics, type Metrics } from '../../src/metrics.ts';
import { startWebhooks, type Webhooks } from '../../src/webhooks/subsystem.ts';
import { uniquePrefix } from './redis.ts';
import { streamEntryFields } from './stream-entry.ts';
import { until } from './wait.ts';

export const SECRETS = [`whsec_${randomBytes(24).toString('base64')}`, `whsec_${randomBytes(32).toString('base64')}`];
export const WAIT_MS = 20_000;

export interface Received {
  id: string;
  timestamp: string;
  body: { type: string; timestamp: string; data: { sequenceId: string; version: number; metadata: unknown; data: unknown } };
  /** Verified with each secret on its own (the header carries one signature per secret). */
  verified: boolean[];
  at: number;
  status: number;
}

export type Answer = (request: Received, nth: number, res: ServerResponse, req: IncomingMessage) => void;

export class Receiver {
  readonly received: Received[] = [];
  readonly server: Server;
  answer: Answer = (_r, _n, res) => res.writeHead(200).end('ok');
  constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const headers = req.headers as Record<string, string>;
        const verified = SECRETS.map((secret) => {
          try {
            new Webhook(secret).verify(raw, headers);
            return true;
          } catch {
            return false;
          }
        });
        const entry: Received = {
          id: headers['webhook-id']!,
          timestamp: headers['webhook-timestamp']!,
          body: JSON.parse(raw) as Received['body'],
          verified,
          at: Date.now(),
          status: 0,
        };
        this.received.push(entry);
        const end = res.end.bind(res);
        res.end = ((...args: Parameters<typeof res.end>) => {
          entry.status = res.statusCode;
          return end(...args);
        }) as typeof res.end;
        this.answer(entry, this.received.length, res, req);
      });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  delivered(): Received[] {
    return this.received.filter((r) => r.status >= 200 && r.status < 300);
  }
}

const receivers: Receiver[] = [];
const running: Webhooks[] = [];

/** Stops every subsystem started and every receiver (afterEach). */
export async function closeWebhooks(): Promise<void> {
  await stopRunning();
  for (const receiver of receivers.splice(0)) {
    receiver.server.closeAllConnections();
    await new Promise((resolve) => receiver.server.close(resolve));
  }
}

/** Stops every subsystem started, as a worker's shutdown does (a restart follows with `start()`). */
export async function stopRunning(): Promise<void> {
  await Promise.all(running.splice(0).map((webhooks) => webhooks.close()));
}

export async function receiver(): Promise<{ receiver: Receiver; url: string }> {
  const created = new Receiver();
  receivers.push(created);
  return { receiver: created, url: await created.listen() };
}

/** The settings of one endpoint `hook` at `url` under `prefix`, plus `env` (what the CLI needs of them too). */
export function hookEnv(prefix: string, url: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    QUEUE_PREFIX: prefix,
    DASHBOARD_METADATA_KEYS: 'orderId',
    WEBHOOK_ENDPOINTS: JSON.stringify([{ name: 'hook', url, secrets: SECRETS }]),
    ...env,
  };
}

/**
 * The worker's configuration with these webhook settings over quick test defaults (loopback allowed,
 * retries 20 ms apart) and custody settings that are never used. A try's time-out is generous: a
 * loopback answer on a loaded machine must never be counted as a time-out (and tried again) unless
 * the test means one, and sets its own WEBHOOK_TIMEOUT.
 */
export function configWith(env: Record<string, string>): Readonly<Config> {
  return loadConfig({
    CUSTODY_SDK_URL: 'http://127.0.0.1:9/sdk',
    CUSTODY_BASE_URL: 'http://127.0.0.1:9/api',
    CUSTODY_CLIENT_ID: 'id',
    CUSTODY_CLIENT_SECRET: 'secret',
    CUSTODY_ACCESS_TOKEN: 'token',
    WEBHOOK_ALLOW_HTTP: '1',
    WEBHOOK_ALLOW_PRIVATE: '1',
    WEBHOOK_TIMEOUT: '10s',
    WEBHOOK_RETRY_SCHEDULE: '0,20ms,20ms,20ms,20ms',
    ...env,
  });
}

export interface Hook {
  prefix: string;
  stream: string;
  metrics: Metrics;
  /** The environment the subsystem runs with (for the CLI: add REDIS_URL). */
  env: Record<string, string>;
  publish(sequenceId: string, version: number, metadata?: string, event?: string): Promise<string>;
  start(): Webhooks;
}

/** Starts the webhook subsystem of one endpoint `hook` at `url`, once its consumer group exists. */
export async function startHook(redis: Redis, url: string, env: Record<string, string> = {}): Promise<Hook> {
  const prefix = uniquePrefix('webhooks');
  const hookSettings = hookEnv(prefix, url, env);
  const config = configWith(hookSettings);
  const metrics = createMetrics();
  const stream = config.queue.eventsStream;
  const start = () => {
    const webhooks = startWebhooks({
      redis,
      prefix,
      eventsStream: stream,
      settings: config.webhooks,
      metadataKeys: config.http.dashboardMetadataKeys,
      logger: createLogger({ level: 'silent' }),
      metrics,
    });
    running.push(webhooks);
    return webhooks;
  };
  start();
  await until('the consumer group', WAIT_MS, async () => {
    const groups = (await redis.xinfo('GROUPS', stream).catch(() => [])) as unknown[];
    return groups.length > 0 ? true : undefined;
  });
  const publish = async (sequenceId: string, version: number, metadata = '', event = 'transfer.cancelled') =>
    (await redis.xadd(
      stream,
      '*',
      ...streamEntryFields({
        event,
        sequenceId,
        version: String(version),
        data: JSON.stringify({ reason: `step ${version}`, by: 'test' }),
        metadata,
      }),
    ))!;
  return { prefix, stream, metrics, env: hookSettings, publish, start };
}
