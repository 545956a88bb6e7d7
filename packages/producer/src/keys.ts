/**
 * The Redis keys a producer reads besides BullMQ's queue: the events stream and a transfer's ledger
 * record (its `events` field lists the transfer's stream ids). The worker derives its own keys from
 * these, so the two never disagree.
 */
export function transferKey(prefix: string, sequenceId: string): string {
  return `${prefix}:transfer:${sequenceId}`;
}

/**
 * What outlives an ended transfer's record (RETENTION) for TOMBSTONE_RETENTION: `<terminal state>:<last
 * version>`. While it exists, the sequenceId is never started again.
 */
export function tombstoneKey(prefix: string, sequenceId: string): string {
  return `${prefix}:ended:${sequenceId}`;
}

/**
 * A transfer's attempts (a string, one JSON entry a line): each send attempt and each lookup that
 * settled one, appended by the transition that recorded its outcome, kept as long as the record
 * (transition.lua).
 */
export function attemptsKey(prefix: string, sequenceId: string): string {
  return `${prefix}:attempts:${sequenceId}`;
}

/** The job payload a transfer keeps until it is submitted, apart from its ledger hash. */
export function transferPayloadKey(prefix: string, sequenceId: string): string {
  return `${prefix}:transfer-payload:${sequenceId}`;
}

/**
 * The ledger's indexes, its epoch and the worker's recorded settings (worker-settings.ts): the
 * worker's src/ledger/keys.ts derives its keys from these.
 */
export function ledgerKeys(prefix: string): {
  /**
   * The index of non-terminal transfers that workers before contract v1.4 kept (a sorted set): the
   * state indexes took its place. A worker moves what it still holds into them (Ledger.adoptLegacyActive).
   */
  legacyActive: string;
  terminal: string;
  broadcast: string;
  trackerOutbox: string;
  epoch: string;
  workerSettings: string;
} {
  return {
    legacyActive: `${prefix}:transfers:active`,
    terminal: `${prefix}:transfers:terminal`,
    broadcast: `${prefix}:transfers:broadcast`,
    trackerOutbox: `${prefix}:trackers:pending`,
    epoch: `${prefix}:ledger:epoch`,
    workerSettings: `${prefix}:ledger:worker`,
  };
}

/**
 * Why a transfer needs an operator's attention (transition.lua, attentionOf), in the order of its
 * KEYS[11..15]: unresolved (SEND_OUTCOME_UNKNOWN or SEQUENCE_ID_IN_USE), a send whose outcome is
 * unknown, halted upstream, expired with SEND_OUTCOME_UNKNOWN, waiting for an approval.
 */
export const ATTENTION_REASONS = ['unresolved', 'send-unknown', 'halted', 'expired-unknown', 'approval'] as const;
export type AttentionReason = (typeof ATTENTION_REASONS)[number];

/** The listing indexes the transition script keeps with every record (its header, KEYS[9..17]). */
export function indexKeys(prefix: string): {
  ids: string;
  endedEntries: string;
  search: string;
  attention(reason: AttentionReason): string;
  state(state: string): string;
} {
  return {
    ids: `${prefix}:transfers:ids`,
    endedEntries: `${prefix}:transfers:ended-entries`,
    search: `${prefix}:transfers:search`,
    attention: (reason) => `${prefix}:transfers:attention:${reason}`,
    state: (state) => `${prefix}:transfers:state:${state}`,
  };
}

/**
 * KEYS[9..17+n] of transition.lua for a transition from `from` to `to` (see its header): the listing
 * indexes, then the index of `to` and of each state of `from` but '-' (no record yet).
 */
export function transitionIndexKeys(prefix: string, from: readonly string[], to: string): string[] {
  const index = indexKeys(prefix);
  return [
    index.ids,
    index.endedEntries,
    ...ATTENTION_REASONS.map((reason) => index.attention(reason)),
    index.search,
    index.state(to),
    ...from.filter((state) => state !== '-').map((state) => index.state(state)),
  ];
}

/** The keys of transition.lua for a transition of a transfer without claims, in the script's order (see its header). */
export function transitionKeys(prefix: string, eventsStream: string, sequenceId: string, from: readonly string[], to: string): string[] {
  const ledger = ledgerKeys(prefix);
  return [
    transferKey(prefix, sequenceId),
    eventsStream,
    ledger.terminal,
    ledger.broadcast,
    transferPayloadKey(prefix, sequenceId),
    tombstoneKey(prefix, sequenceId),
    ledger.trackerOutbox,
    ledger.epoch,
    ...transitionIndexKeys(prefix, from, to),
    attemptsKey(prefix, sequenceId),
  ];
}

/** EVENTS_STREAM's default for a QUEUE_PREFIX. */
export function defaultEventsStream(prefix: string): string {
  return `${prefix}:transfer-events`;
}

/**
 * A `TransferEvents` consumer's default dead-letter: `<events stream>:dead`, the stream that takes the
 * entries no handler could take (malformed, of an unknown type, or failing `maxDeliveries` times). It
 * shares the events stream's hash tag, so on Redis Cluster it lives in the same slot.
 */
export function defaultDeadLetterStream(eventsStream: string): string {
  return `${eventsStream}:dead`;
}

/**
 * Where a `TransferEvents` consumer group records what it handled: one key per event under this,
 * `<prefix>:events:seen:<group>:<sequenceId>:<version>` (events of no transfer: `...:@<entry id>`), each
 * with its own TTL. An event that carries an epoch has it appended, `...:<sequenceId>:<version>:<epoch>`
 * (`...:@<entry id>:<epoch>`): a sequenceId has no `:`, so the two forms never meet, and the markers of
 * events without an epoch keep the key they always had.
 */
export function seenKey(prefix: string, group: string): string {
  return `${prefix}:events:seen:${group}`;
}

/**
 * Where a `TransferEvents` consumer group records the epochs it handled events of, per transfer:
 * `<prefix>:consumer:<group>:epoch:<sequenceId>`, a hash of epoch -> when its first event was handled
 * (ms), with the seen markers' TTL, refreshed by every event of the transfer that carries an epoch.
 */
export function consumerEpochKey(prefix: string, group: string): string {
  return `${prefix}:consumer:${group}:epoch`;
}

/**
 * Where a `TransferEvents` consumer group records the highest version it handled per transfer and life:
 * `<prefix>:consumer:<group>:version:<sequenceId>`, a sorted set of epoch (empty for events without
 * one) scored by the version, with the seen markers' TTL, refreshed by every handled event of the
 * transfer. A lower version handled later is reported as stale.
 */
export function consumerVersionKey(prefix: string, group: string): string {
  return `${prefix}:consumer:${group}:version`;
}
