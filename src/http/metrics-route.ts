import type { FastifyPluginAsync } from 'fastify';
import type { App } from '../app.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { refreshScrapeGauges } from '../metrics-scrape.ts';
import { SCRAPE_REDIS_BUDGET_MS, TIMED_OUT, withinBudget } from './within-budget.ts';

/** `/metrics`: open (src/http/auth.ts OPEN_PATHS), the Prometheus scrape carries no transfer. */
export const metricsPlugin: FastifyPluginAsync<{ app: App; metrics: Metrics; logger: Logger }> = async (
  server,
  { app, metrics, logger },
) => {
  // One refresh of the Redis-read gauges at a time: while Redis hangs, scrapes do not pile commands up
  // behind the one in flight, and each scrape waits for it at most SCRAPE_REDIS_BUDGET_MS.
  let refreshing: Promise<void> | undefined;
  server.get('/metrics', async (_request, reply) => {
    refreshing ??= refreshScrapeGauges(app, metrics)
      .catch((err) => logger.warn({ err }, 'queue counts unavailable for metrics'))
      .finally(() => {
        refreshing = undefined;
      });
    if ((await withinBudget(refreshing, SCRAPE_REDIS_BUDGET_MS)) === TIMED_OUT) {
      // Redis did not answer in time: the process metrics still go out, with readiness 0 and the
      // Redis-read gauges as last read (docs/contract.md section 5).
      metrics.ready.set(0);
      logger.warn({ budgetMs: SCRAPE_REDIS_BUDGET_MS }, 'redis did not answer within the scrape budget, metrics served without it');
    }
    return reply.header('content-type', metrics.registry.contentType).send(await metrics.registry.metrics());
  });
};
