/**
 * A provider's webhook as a wake-up for tracking (docs/providers.md), registered only when the custody
 * port has the capability (port.ts, Wakeups; BitGo with BITGO_WEBHOOK_SECRET): `POST <wakeups.path>`.
 * The adapter checks the signature and says which transfer the call names (its transfer id, the
 * txid); the transfer is found by the ledger's claims, and its tracking job polls now (Trackers.pollNow,
 * the operator's recheck's path), in the request budget like every poll. Nothing of the body is taken
 * as fact: what the poll finds decides. Every call is answered and counted
 * (`custody_provider_webhooks_total`): 401 when forged, 2xx otherwise (an unknown or duplicate call
 * answered otherwise would be retried by the provider for ever).
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import type { App } from '../app.ts';
import type { WakeupOutcome, Wakeups } from '../custody/port.ts';
import type { Keys } from '../ledger/keys.ts';
import { TransferState } from '../ledger/ledger.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Trackers } from '../queues/trackers.ts';
import { WAKEUP_ANSWER_MS, WAKEUP_SEEN_MS } from '../timing.ts';
import { TIMED_OUT, withinBudget } from './within-budget.ts';

/** A webhook body is a few hundred bytes; anything much larger is not one. */
const WAKEUP_BODY_LIMIT = 64 * 1024;

export interface WakeupsPluginOptions {
  app: App;
  wakeups: Wakeups;
  keys: Keys;
  metrics: Metrics;
  logger: Logger;
}

export const providerWakeupsPlugin: FastifyPluginAsync<WakeupsPluginOptions> = async (server, { app, wakeups, keys, metrics, logger }) => {
  // This plugin's own scope: the raw bytes, whatever the content type, since the signature is over them.
  server.removeAllContentTypeParsers();
  server.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WAKEUP_BODY_LIMIT }, (_request, body, done) => done(null, body));
  const log = logger.child({ component: 'provider-wakeups', provider: wakeups.provider });
  const count = (outcome: WakeupOutcome) => metrics.providerWebhooks.inc({ provider: wakeups.provider, outcome });

  server.post(wakeups.path, async (request, reply) => {
    const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
    const wakeup = wakeups.read(request.headers, body);
    if (wakeup.kind === 'forged') {
      count('forged');
      return reply.code(401).send({ error: 'bad signature' });
    }
    const answered = await withinBudget(wake(app, app.trackers, keys, wakeups.provider, body, wakeup), WAKEUP_ANSWER_MS).catch(
      (error: unknown) => {
        log.warn({ err: error instanceof Error ? error.message : String(error) }, 'webhook call not handled (Redis), answered 503');
        return undefined;
      },
    );
    if (answered === undefined || answered === TIMED_OUT) return reply.code(503).send({ error: 'try again' });
    count(answered.outcome);
    if (answered.outcome === 'accepted') log.info({ sequenceId: answered.sequenceId, tracker: answered.tracker }, 'webhook woke tracking');
    return reply.code(200).send({ outcome: answered.outcome });
  });
};

interface Woken {
  outcome: Exclude<WakeupOutcome, 'forged'>;
  sequenceId?: string;
  tracker?: string;
}

async function wake(
  app: App,
  trackers: Trackers,
  keys: Keys,
  provider: string,
  body: Buffer,
  named: { providerTransferId?: string | undefined; txid?: string | undefined },
): Promise<Woken> {
  const seenKey = keys.wakeupSeen(provider, createHash('sha256').update(body).digest('hex'));
  if ((await app.redis.exists(seenKey)) === 1) return { outcome: 'duplicate' };
  const woken = await wakeNamed(app, trackers, named);
  // Marked once handled, so a call that failed half-way is taken again when the provider retries;
  // two identical calls at once both reach pollNow, and the second finds the poll due ('duplicate').
  await app.redis.set(seenKey, '1', 'PX', WAKEUP_SEEN_MS);
  return woken;
}

async function wakeNamed(
  app: App,
  trackers: Trackers,
  named: { providerTransferId?: string | undefined; txid?: string | undefined },
): Promise<Woken> {
  const sequenceId = await app.ledger.claimedBy({ recordId: named.providerTransferId, txid: named.txid });
  if (sequenceId === undefined) return { outcome: 'unknown' };
  // Only a submitted transfer is tracked: before, its submission looks it up itself; after, it ended.
  if ((await app.ledger.get(sequenceId))?.state !== TransferState.SUBMITTED) return { outcome: 'ignored', sequenceId };
  // A call naming the hash jumps the line (the txid is there to be confirmed); one without it is due only.
  const tracker = await trackers.pollNow(sequenceId, { headOfLine: named.txid !== undefined });
  return { outcome: tracker === 'polling' ? 'duplicate' : 'accepted', sequenceId, tracker };
}
