import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths that never reach a log line. Authorization headers in any common shape, the client secret and
 * tokens wherever they sit, and the person (`user`) inside a submitted record's `raw`, whether `raw`
 * is still the upstream JSON text (then the whole text goes) or already parsed.
 */
export const REDACT_PATHS = [
  'authorization',
  'Authorization',
  'headers.authorization',
  'headers.Authorization',
  '*.headers.authorization',
  '*.headers.Authorization',
  'req.headers.authorization',
  'clientSecret',
  'client_secret',
  '*.clientSecret',
  '*.client_secret',
  'custody.clientSecret',
  'accessToken',
  'access_token',
  'token',
  '*.accessToken',
  '*.access_token',
  '*.token',
  'custody.accessToken',
  // Config['custody'].settings, the chosen provider's own settings (src/custody/providers.ts): opaque
  // here, so every value is hidden, and a later provider's secret is whatever its descriptor names it.
  'custody.settings.*',
  // BITGO_ACCESS_TOKEN as the config holds it (custody.bitgo.accessToken) and wherever an adapter's options carry it.
  'bitgo.accessToken',
  'custody.bitgo.accessToken',
  '*.bitgo.accessToken',
  'password',
  '*.password',
  'user',
  'raw.user',
  '*.raw.user',
  '*.*.raw.user',
  'record.raw',
  'transfer.raw',
  '*.transfer.raw',
  'data.transfer.raw',
];

/**
 * `mixin`: fields added to every line (the worker adds `trace_id` and `span_id` of the active span
 * when tracing is on; called per line, so it must be cheap and return {} otherwise).
 */
export function createLogger(options: { level: string; name?: string; mixin?: () => object }, destination?: DestinationStream): Logger {
  return pino(
    {
      name: options.name ?? 'custody-worker',
      level: options.level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError },
      ...(options.mixin ? { mixin: options.mixin } : {}),
    },
    destination,
  );
}

/**
 * pino's error serializer, minus ioredis's `command.args`: a failed Redis command carries all of its
 * arguments (whole Lua scripts, job payloads), which have no place in a log line. The command's name stays.
 */
function serializeError(error: Error): ReturnType<typeof pino.stdSerializers.err> {
  const serialized = pino.stdSerializers.err(error);
  const command = (serialized as { command?: { name?: unknown } }).command;
  if (command && typeof command === 'object') (serialized as { command?: unknown }).command = { name: command.name };
  return serialized;
}
