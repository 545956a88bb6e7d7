import { TravelRuleCache } from '../custody/travel-rule-cache.ts';
import { createSubmitHandler } from '../jobs/submit-transaction/handler.ts';
import { QueueName } from '../queues/names.ts';
import type { QueueWorker } from '../queues/workers.ts';
import { sendDeadlineMs, sendLeaseMs, SUBMIT_RETRY, withBase } from '../timing.ts';
import type { Subsystem, SubsystemDeps } from './subsystem.ts';

/** Submitting: the submit-transaction queue's worker, and the travel-rule gate it asks (docs/architecture.md). */
export function submitting({ config, redis, keys, ledger, custody, trackers, workers, metrics }: SubsystemDeps): Subsystem {
  // A provider without the gate capability never blocks and is never asked (port.ts: getTravelRuleSetting).
  const gateSetting = custody.getTravelRuleSetting?.bind(custody);
  const travelRule = gateSetting
    ? new TravelRuleCache(redis, { getTravelRuleSetting: gateSetting }, keys, {
        ttlMs: config.submit.travelRuleCacheTtlMs,
        refreshTimeoutMs: config.custody.timeoutMs + 1_000,
        onLookup: (source) => metrics.travelRuleLookups.inc({ source }),
      })
    : { setting: async () => null };

  const handler = createSubmitHandler({
    ledger,
    travelRule,
    custody,
    trackers,
    attempts: config.submit.attempts,
    lookupBeforeFirstSend: config.submit.lookupBeforeFirstSend,
    retry: withBase(SUBMIT_RETRY, config.submit.retryBaseMs, config.submit.retryMaxMs),
    sendDeadlineMs: sendDeadlineMs(config.custody.timeoutMs),
    sendLeaseMs: sendLeaseMs(config.custody.timeoutMs),
    unresolvedAfterMs: config.submit.unresolvedAfterMs,
    deadlineMs: config.track.deadlineMs,
    onAmbiguous: (step) => metrics.ambiguousMatches.inc({ step }),
    onSendWindowShut: () => metrics.sendWindowShut.inc(),
    onPayloadConflict: () => metrics.payloadConflicts.inc(),
    onRecoveryLookup: (found) => metrics.recoveryLookups.inc({ found }),
    ...(config.redis.minReplicas > 0
      ? {
          replicasAcknowledged: async (session: string) => {
            const { acknowledged, required } = await ledger.replicated(session, config.redis.minReplicas, config.redis.replicaTimeoutMs);
            if (acknowledged >= required) return true;
            metrics.replicaWaitFailures.inc();
            return false;
          },
        }
      : {}),
  });

  let worker: QueueWorker | undefined;
  return {
    async start() {
      worker = workers.start(QueueName.SUBMIT, handler, { concurrency: config.submit.concurrency });
    },
    async close() {
      await worker?.close();
    },
  };
}
