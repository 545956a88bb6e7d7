/**
 * OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT set, the real worker exports spans of its jobs and
 * of its upstream calls to an OTLP/HTTP collector (here a local HTTP server that keeps what it gets);
 * without it, nothing is started.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/logger.ts';
import { startTracing } from '../../src/telemetry.ts';
import { startHarness, type Harness } from '../helpers/harness.ts';
import { samplePayload } from '../../tools/sample-payloads.ts';
import { killAllWorkers, spawnWorker } from '../helpers/worker-process.ts';
import { PROCESS_MS, processesTimeout } from '../helpers/timeouts.ts';

// A worker start, the transfer submitted (15 s), the stop that flushes the exporter (15 s).
describe('tracing', { timeout: processesTimeout(1, 40_000) }, () => {
  let h: Harness;
  let collector: Server;
  let endpoint: string;
  const exports: Array<{ path: string; contentType: string; body: Buffer }> = [];

  beforeAll(async () => {
    h = await startHarness({ name: 'otel', worker: false });
    collector = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        exports.push({ path: request.url ?? '', contentType: String(request.headers['content-type']), body: Buffer.concat(chunks) });
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await killAllWorkers();
    await h.close();
    await new Promise((resolve) => collector.close(resolve));
  });

  it('exports spans of jobs and upstream calls to the OTLP endpoint', async () => {
    const worker = spawnWorker({ ...h.env, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'custody-test', LOG_LEVEL: 'info' });
    await worker.waitForLog('worker started', PROCESS_MS);
    const payload = samplePayload();
    await h.producer.submit(payload);
    await h.waitForEvents((events) =>
      events.some((e) => e.event === 'transfer.submitted' && e.sequenceId === payload.halfSigned.sequenceId),
    );
    // SIGTERM flushes the exporter before exit.
    expect(await worker.stop(15_000)).toEqual({ code: 0, signal: null });

    expect(exports.length).toBeGreaterThan(0);
    expect(exports.every((e) => e.path === '/v1/traces')).toBe(true);
    const text = Buffer.concat(exports.map((e) => e.body)).toString('latin1');
    expect(text).toContain('custody send');
    expect(text).toContain('custody gate');
    expect(text).toContain('submit-transaction');
    expect(text).toContain('custody-test');
    // Spans carry endpoint names and codes, never credentials.
    expect(text).not.toContain(h.sim.clientSecret);

    // Log lines written inside a job carry the ids of its span, and that trace was exported.
    const submittedLine = worker
      .output()
      .split('\n')
      .find((line) => line.includes('"msg":"transfer submitted"'));
    expect(submittedLine, 'the submit handler logs "transfer submitted"').toBeDefined();
    const ids = JSON.parse(submittedLine!) as { trace_id?: string; span_id?: string };
    expect(ids.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(ids.span_id).toMatch(/^[0-9a-f]{16}$/);
    const bodies = Buffer.concat(exports.map((e) => e.body));
    expect(bodies.includes(Buffer.from(ids.trace_id!, 'hex')) || bodies.includes(Buffer.from(ids.trace_id!))).toBe(true);
  });

  it('starts nothing when OTEL_EXPORTER_OTLP_ENDPOINT is unset', async () => {
    const config = loadConfig(h.env);
    expect(config.telemetry.otlpEndpoint).toBeUndefined();
    expect(await startTracing(config, createLogger({ level: 'silent' }))).toBeUndefined();
  });
});
