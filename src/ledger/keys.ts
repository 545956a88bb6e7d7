import {
  attemptsKey,
  indexKeys,
  ledgerKeys,
  tombstoneKey,
  transferKey,
  transferPayloadKey,
  transitionIndexKeys,
  type AttentionReason,
} from '../../packages/producer/src/keys.ts';
import { createHash } from 'node:crypto';
import { canonicalTxid } from '../lib/txid.ts';

/**
 * Every Redis key the worker owns besides BullMQ's own, all under QUEUE_PREFIX. With a hash-tagged
 * prefix such as `{wtx}` they all hash to one Redis Cluster slot, so the multi-key Lua scripts work.
 */
export interface Keys {
  transfer(sequenceId: string): string;
  /**
   * The job payload a transfer keeps until it is submitted (a string key): kept out of the ledger hash
   * so the hash never holds a value over 64 bytes and stays in Redis's compact listpack encoding.
   */
  transferPayload(sequenceId: string): string;
  /**
   * `<terminal state>:<version>` of an ended transfer, kept RETENTION + TOMBSTONE_RETENTION: a job for
   * that sequenceId, under any job id, is never started again once the record itself is gone.
   */
  tombstone(sequenceId: string): string;
  /**
   * Which sequenceId each upstream record id or txid belongs to: one hash, field `claimField`'s, value
   * the sequenceId. Written by the transition that stores it (transition.lua), kept while the transfer
   * has a record or a tombstone: reconciliation's retention removes the fields of sequenceIds that have
   * neither (Ledger.forgetClaims). A field costs about half of what a string key with a TTL did.
   */
  claims: string;
  /** The field of `claims` for a record id or a txid (in its canonical spelling, src/lib/txid.ts). */
  claimField(kind: 'record' | 'txid', id: string): string;
  /** Where Ledger.forgetClaims's HSCAN of `claims` goes on from (a string: the cursor). */
  claimsCursor: string;
  /**
   * A transfer's send attempts and settling lookups (a string of small JSON entries, one a line, the
   * newest 50): appended by the transition that records each outcome (transition.lua, its last key), expiring with
   * the record; the timeline of GET /api/v1/transfers/:sequenceId reads it.
   */
  attempts(sequenceId: string): string;
  /** The get-transfer record a tracker found with its txid, kept until the wallet-transaction lookup gets its slot. */
  foundTransfer(sequenceId: string): string;
  /** A rejected job whose payload had no usable sequenceId: its exactly-once record, by job id. */
  jobRejection(jobId: string): string;
  /**
   * Non-terminal transfers, score = last change (ms), as workers before contract v1.4 kept them: the
   * state indexes (byState) hold them now; Ledger.adoptLegacyActive moves what this key still holds.
   */
  legacyActive: string;
  /** Terminal transfers, score = when they ended (ms); drives retention clean-up. */
  terminal: string;
  /** Broadcast transfers, score = broadcast time (ms); reconciliation re-verifies recent ones. */
  broadcast: string;
  /**
   * The listing indexes (transition.lua, KEYS[10..]; queries.ts reads them): transfers per state
   * (score = last change, ms), per attention reason (score = since when, ms), every sequenceId (score
   * 0, for ZRANGEBYLEX), txids and job ids for lookups exact and by prefix (`search`: score 0, members
   * `t:<txid>\n<sequenceId>` and `j:<job id>\n<sequenceId>`), and what retention removes of an ended
   * transfer (a hash).
   */
  byState(state: string): string;
  attention(reason: AttentionReason): string;
  ids: string;
  search: string;
  endedEntries: string;
  /** The listing indexes a transition from `from` to `to` passes to transition.lua, in its order. */
  transitionIndex(from: readonly string[], to: string): string[];
  /** Submitted transfers whose tracking job is not confirmed added yet (the tracker outbox), score = ms. */
  trackerOutbox: string;
  travelRule: string;
  travelRuleLock: string;
  /** Whether get-transfer by sequenceId narrows its answers for a wallet (LookupNarrowing). */
  lookupNarrowing(walletId: number | string, coin: string): string;
  /**
   * Which sequenceId an accepted send's record id belongs to (a string, kept as long as a tombstone): a
   * hint for a provider's wake-up (its webhook names that id), never a claim (matching ignores it).
   */
  acceptedRecord(id: string): string;
  /** A provider's webhook call already taken, by the SHA-256 of its body (src/http/provider-wakeups.ts), kept WAKEUP_SEEN_MS. */
  wakeupSeen(provider: string, digest: string): string;
  rateLimit: string;
  reconcileLock: string;
  /** How often reconciliation retried one failed submit job (by job id and creation time), kept RETENTION. */
  reconcileRetries(jobId: string, createdAt: number): string;
  /** The ledger's epoch (epoch.ts): written once, so that a Redis that lost its data can be told apart. */
  epoch: string;
  /**
   * What the worker's cancels write with (its transition script's SHA1, the events stream, EVENTS_MAXLEN,
   * RETENTION, RETENTION + TOMBSTONE_RETENTION), recorded at start-up: a hash that the producer
   * package and the CLI compare their own with before a cancel (packages/producer/src/worker-settings.ts).
   */
  workerSettings: string;
  /** Marks that one run's system event (`reconcile.completed`) was published, with its stream id. */
  systemEventRun(runId: string): string;
  /**
   * Written by every readiness check (src/redis-errors.ts), expiring by itself: does Redis take a write?
   * Also the write before a replica wait for an answer that changed nothing (Ledger.writeReplicated).
   */
  readyProbe: string;
  /**
   * The audit stream (src/operations/audit.ts): one entry per operator action, allowed or refused,
   * trimmed by age (AUDIT_RETENTION). Part of the contract: `<QUEUE_PREFIX>:audit`.
   */
  audit: string;
  /**
   * The first answer to an `/api/v1` action sent with this `Idempotency-Key` by this user (a string,
   * expiring; src/http/api-v1/idempotency.ts). Named by a hash of both: neither is a key name's business.
   */
  idempotency(user: string, key: string): string;
  /**
   * The payload hash of an HTTP submit (src/http/api-v1/submit.ts), written SET NX before the job is
   * added: what a repeat is compared with until the worker wrote the record (which then holds it).
   */
  submittedPayloadHash(sequenceId: string): string;
  events: string;
}

export function createKeys(prefix: string, eventsStream: string): Keys {
  // The keys transition.lua touches come from the producer package, whose cancel() runs it too.
  const ledger = ledgerKeys(prefix);
  const index = indexKeys(prefix);
  return {
    transfer: (sequenceId) => transferKey(prefix, sequenceId),
    transferPayload: (sequenceId) => transferPayloadKey(prefix, sequenceId),
    tombstone: (sequenceId) => tombstoneKey(prefix, sequenceId),
    attempts: (sequenceId) => attemptsKey(prefix, sequenceId),
    claims: `${prefix}:claims`,
    claimField: (kind, id) => `${kind}:${kind === 'txid' ? canonicalTxid(id) : id}`,
    claimsCursor: `${prefix}:claims:cursor`,
    foundTransfer: (sequenceId) => `${prefix}:found-transfer:${sequenceId}`,
    jobRejection: (jobId) => `${prefix}:rejected-job:${jobId}`,
    legacyActive: ledger.legacyActive,
    terminal: ledger.terminal,
    broadcast: ledger.broadcast,
    byState: index.state,
    attention: index.attention,
    ids: index.ids,
    search: index.search,
    endedEntries: index.endedEntries,
    transitionIndex: (from, to) => transitionIndexKeys(prefix, from, to),
    trackerOutbox: ledger.trackerOutbox,
    travelRule: `${prefix}:travel-rule`,
    travelRuleLock: `${prefix}:travel-rule:lock`,
    lookupNarrowing: (walletId, coin) => `${prefix}:lookup-narrowing:${walletId}:${coin}`,
    acceptedRecord: (id) => `${prefix}:accepted-record:${id}`,
    wakeupSeen: (provider, digest) => `${prefix}:wakeup-seen:${provider}:${digest}`,
    rateLimit: `${prefix}:custody-rate`,
    reconcileLock: `${prefix}:reconcile:lock`,
    reconcileRetries: (jobId, createdAt) => `${prefix}:reconcile:retries:${jobId}:${createdAt}`,
    epoch: ledger.epoch,
    workerSettings: ledger.workerSettings,
    systemEventRun: (runId) => `${prefix}:system-event:${runId}`,
    readyProbe: `${prefix}:ready-probe`,
    audit: `${prefix}:audit`,
    idempotency: (user, key) => `${prefix}:idempotency:${createHash('sha256').update(user).update('\0').update(key).digest('hex')}`,
    submittedPayloadHash: (sequenceId) => `${prefix}:submitted-payload-hash:${sequenceId}`,
    events: eventsStream,
  };
}
