import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { SKIPPED_RECORD_LOG_INTERVAL_MS } from '../timing.ts';
import type { CustodyEndpoint } from './errors.ts';
import type { SkippedRecord } from './provider.ts';
import type { ProviderRateLimit } from './port.ts';

/**
 * Upstream list records that failed the schema: all counted; logged at most once per endpoint per
 * interval with the field paths (never values). A skipped record that carried the very sequenceId
 * looked for is an error every time: tracking that transfer cannot succeed until upstream changes.
 */
export function skippedRecordsReporter(logger: Logger, metrics: Metrics) {
  const lastLogged = new Map<string, number>();
  const suppressed = new Map<string, number>();
  return (endpoint: CustodyEndpoint, skipped: readonly SkippedRecord[]) => {
    for (const record of skipped) metrics.skippedRecords.inc({ endpoint, ours: String(record.ours) });
    const ours = skipped.filter((record) => record.ours);
    if (ours.length > 0) {
      logger.error(
        { endpoint, paths: ours.flatMap((record) => record.paths) },
        'the upstream record of this transfer fails the schema and is skipped: it cannot be matched',
      );
    }
    const now = Date.now();
    if (now - (lastLogged.get(endpoint) ?? 0) < SKIPPED_RECORD_LOG_INTERVAL_MS) {
      suppressed.set(endpoint, (suppressed.get(endpoint) ?? 0) + skipped.length);
      return;
    }
    logger.warn(
      {
        endpoint,
        skipped: skipped.length,
        paths: [...new Set(skipped.flatMap((record) => record.paths))].slice(0, 10),
        suppressed: suppressed.get(endpoint) ?? 0,
      },
      'upstream records failing the schema skipped',
    );
    lastLogged.set(endpoint, now);
    suppressed.set(endpoint, 0);
  };
}

/**
 * One line per provider 429: the endpoint, the Retry-After it asked (as sent, at most 64 characters:
 * the provider's text, never ours) and the pause applied, at most CUSTODY_MAX_PAUSE.
 */
export function providerPauseReporter(logger: Logger) {
  return (pauseMs: number, { endpoint, retryAfter, askedMs }: ProviderRateLimit, outcome: { until: number } | { error: unknown }) => {
    const asked = { endpoint, retryAfter: retryAfter?.slice(0, 64), askedMs, pauseMs, capped: pauseMs < askedMs };
    if ('error' in outcome) {
      logger.warn({ err: outcome.error, ...asked }, 'provider answered 429 but the request budget could not be paused');
      return;
    }
    logger.warn(
      { ...asked, pausedUntil: new Date(outcome.until).toISOString() },
      asked.capped
        ? 'provider answered 429: every request class paused, Retry-After capped at CUSTODY_MAX_PAUSE'
        : 'provider answered 429: every request class paused for its Retry-After',
    );
  };
}
