/**
 * Start-up and shutdown of the real worker process (src/worker.ts) when what it needs is not there:
 * - Redis unreachable: HTTP answers at once (/healthz 200, /readyz 503, /metrics with ready 0), one
 *   log line per attempt and no stack, exit 69 after REDIS_CONNECT_TIMEOUT;
 * - Redis coming up later: the worker starts then, on the same port;
 * - the HTTP port taken: one JSON line naming the port, exit 69;
 * - an OpenTelemetry collector that does not answer: SIGTERM still exits 0;
 * - a bad CUSTODY_MAX_PAUSE: exit 78 before anything starts, one line naming the variable.
 * Before, the process never exited, served no HTTP and printed hundreds of ECONNREFUSED stacks, and a
 * taken port was an uncaught EADDRINUSE stack.
 */
import { createServer, type Server } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { EX_CONFIG, EX_UNAVAILABLE } from '../../src/config/config.ts';
import { startSimulator, type Simulator } from '../../src/simulator/index.ts';
import { getFreePort, startRedisServer, type RedisServerHandle } from '../../tools/redis/redis-server.ts';
import { workerEnv } from '../helpers/harness.ts';
import { uniquePrefix } from '../helpers/redis.ts';
import { killAllWorkers, spawnWorker, type WorkerProcess } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

let sim: Simulator | undefined;
const servers: RedisServerHandle[] = [];

async function simulator(): Promise<Simulator> {
  sim ??= await startSimulator({ port: 0 });
  return sim;
}

async function env(extra: Record<string, string>): Promise<Record<string, string>> {
  return { ...workerEnv(await simulator(), uniquePrefix('startup')), LOG_LEVEL: 'info', ...extra };
}

/** The URL the worker logged for its HTTP server (starting or full). */
async function httpUrl(worker: WorkerProcess, message: string): Promise<string> {
  const line = await worker.waitForLog(message, PROCESS_MS);
  return (JSON.parse(line) as { http: string }).http;
}

/** Lines that look like a stack trace or a raw uncaught error, in everything the process printed. */
function rawLines(worker: WorkerProcess): string[] {
  return worker
    .output()
    .split('\n')
    .filter((line) => /^\s+at\s|^Error:|Unhandled error event|uncaught/i.test(line));
}

afterEach(killAllWorkers);
afterAll(async () => {
  await sim?.close();
  for (const server of servers) await server.stop();
});

// The longest test: a start, 'waiting for Redis' (20 s), then the start onto the Redis that came up; or two
// starts one after another.
describe('worker start-up', { timeout: processesTimeout(1, 90_000) }, () => {
  it('Redis unreachable: HTTP up at once, one line per attempt, exit 69 after REDIS_CONNECT_TIMEOUT', async () => {
    const closedPort = await getFreePort();
    const worker = spawnWorker(await env({ REDIS_URL: `redis://127.0.0.1:${closedPort}`, REDIS_CONNECT_TIMEOUT: '5s' }), {
      name: 'startup-no-redis',
    });
    const url = await httpUrl(worker, 'http listening, starting');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/readyz`)).status).toBe(503);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^custody_worker_ready 0$/m);
    expect(metrics).toMatch(/^process_cpu_user_seconds_total/m);

    const exit = await worker.waitForExit(30_000);
    expect(exit.code).toBe(EX_UNAVAILABLE);
    const lines = worker
      .output()
      .split('\n')
      .filter((line) => line.trim() !== '');
    const waiting = lines.filter((line) => line.includes('waiting for Redis'));
    expect(waiting.length).toBeGreaterThanOrEqual(1);
    expect(waiting.length).toBeLessThanOrEqual(3);
    for (const line of waiting) expect(JSON.parse(line)).toMatchObject({ level: 'warn', error: expect.stringContaining('ECONNREFUSED') });
    const last = JSON.parse(lines.at(-1)!) as { level: string; msg: string };
    expect(last).toMatchObject({ level: 'fatal' });
    expect(last.msg).toContain('REDIS_CONNECT_TIMEOUT');
    expect(rawLines(worker)).toEqual([]);
  });

  it('Redis coming up later: the worker starts then, on the port it answered on while waiting', async () => {
    const port = await getFreePort();
    const worker = spawnWorker(await env({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_CONNECT_TIMEOUT: '0' }), {
      name: 'startup-late-redis',
    });
    const startingUrl = await httpUrl(worker, 'http listening, starting');
    await worker.waitForLog('waiting for Redis', 20_000);
    servers.push(await startRedisServer({ port }));
    const url = await httpUrl(worker, 'worker started');
    expect(url).toBe(startingUrl);
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(worker.output()).toContain('Redis reachable');
    expect(rawLines(worker)).toEqual([]);
  });

  it('HTTP port taken: one JSON line naming the port, exit 69', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const worker = spawnWorker(await env({ HTTP_HOST: '127.0.0.1', HTTP_PORT: String(port) }), { name: 'startup-port-taken' });
      const exit = await worker.waitForExit(PROCESS_MS);
      expect(exit.code).toBe(EX_UNAVAILABLE);
      const lines = worker
        .output()
        .split('\n')
        .filter((line) => line.trim() !== '');
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'fatal', code: 'EADDRINUSE', port });
      expect(lines[0]).toContain(`HTTP port ${port}`);
    } finally {
      blocker.close();
    }
  });

  it('a bad CUSTODY_MAX_PAUSE: exit 78 before anything starts, naming the variable and not its value', async () => {
    for (const value of ['10 minutes', '500ms']) {
      const worker = spawnWorker(await env({ CUSTODY_MAX_PAUSE: value }), { name: 'startup-bad-max-pause' });
      const exit = await worker.waitForExit(PROCESS_MS);
      expect(exit.code).toBe(EX_CONFIG);
      const output = worker.output();
      expect(output).toContain('configuration error, not starting');
      const problems = output.split('\n').filter((line) => /^\s+[A-Z_]+: /.test(line));
      expect(problems).toHaveLength(1);
      expect(problems[0]!.trim()).toMatch(/^CUSTODY_MAX_PAUSE: must be/);
      expect(problems[0]).not.toContain(value);
      expect(output).not.toContain('worker started');
    }
  });

  it('an OpenTelemetry collector that does not answer does not change the exit code', async () => {
    const closedPort = await getFreePort();
    const worker = spawnWorker(await env({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closedPort}` }), { name: 'startup-otel-down' });
    await httpUrl(worker, 'worker started');
    worker.kill('SIGTERM');
    const exit = await worker.waitForExit(20_000);
    expect(exit.code).toBe(0);
    expect(worker.output()).toContain('"msg":"stopped"');
  });
});
