/**
 * The Redis keys a producer reads besides BullMQ's queue: the events stream and a transfer's ledger
 * record (its `events` field lists the transfer's stream ids). The worker derives its own keys from
 * these, so the two never disagree.
 */
export function transferKey(prefix: string, sequenceId: string): string {
  return `${prefix}:transfer:${sequenceId}`;
}

/** EVENTS_STREAM's default for a QUEUE_PREFIX. */
export function defaultEventsStream(prefix: string): string {
  return `${prefix}:transfer-events`;
}
