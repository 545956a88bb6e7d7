import { SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';
import type { Config } from './config/config.ts';
import type { Logger } from './logger.ts';

export const TRACER_NAME = 'custody-transfer-worker';

/** What the worker wires into BullMQ and the custody port (custody/decorators.ts) when tracing is on. */
export interface Tracing {
  /** BullMQ's telemetry (job spans, context carried from producer to processor). */
  readonly bullmq: Telemetry;
  /** Wraps one upstream call in a client span. */
  readonly upstream: <T>(endpoint: string, call: () => Promise<T>) => Promise<T>;
  /** The active span's ids, for log lines (`trace_id`, `span_id`), or undefined outside any span. */
  logIds(): { trace_id: string; span_id: string } | undefined;
  /** Flushes and stops the exporter. */
  shutdown(): Promise<void>;
}

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set, otherwise returns undefined and
 * loads nothing: no SDK, no exporter, no span objects, so the default path pays nothing for it.
 */
export async function startTracing(config: Pick<Config, 'telemetry'>, logger: Logger): Promise<Tracing | undefined> {
  const endpoint = config.telemetry.otlpEndpoint;
  if (!endpoint) return undefined;
  const [{ NodeSDK }, { OTLPTraceExporter }, { BullMQOtel }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('bullmq-otel'),
  ]);
  const sdk = new NodeSDK({
    serviceName: config.telemetry.serviceName,
    traceExporter: new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, '')}/v1/traces` }),
    instrumentations: [],
    metricReaders: [],
  });
  sdk.start();
  logger.info({ endpoint }, 'tracing on');
  const tracer = trace.getTracer(TRACER_NAME);
  return {
    bullmq: new BullMQOtel({ tracerName: TRACER_NAME }),
    upstream: (endpointName, call) => traced(tracer, endpointName, call),
    logIds: () => {
      const context = trace.getActiveSpan()?.spanContext();
      return context ? { trace_id: context.traceId, span_id: context.spanId } : undefined;
    },
    shutdown: () => sdk.shutdown(),
  };
}

function traced<T>(tracer: Tracer, endpoint: string, call: () => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(
    `custody ${endpoint}`,
    { kind: SpanKind.CLIENT, attributes: { 'custody.endpoint': endpoint } },
    async (span) => {
      try {
        return await call();
      } catch (error) {
        // Only the code: messages of upstream errors are ours and secret-free, but codes are enough here.
        const code = (error as { code?: unknown }).code;
        span.setStatus({ code: SpanStatusCode.ERROR, message: typeof code === 'string' ? code : 'error' });
        if (typeof code === 'string') span.setAttribute('custody.error_code', code);
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
