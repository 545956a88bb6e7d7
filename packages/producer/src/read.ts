import type { Cluster, Redis } from 'ioredis';
import { parseStreamEntry, type TransferEvent } from './events.ts';

/** The two keys reading a transfer's events needs (the worker's Keys has them). */
export interface EventKeys {
  transfer(sequenceId: string): string;
  events: string;
}

/**
 * A transfer's events so far, oldest first, by the stream ids its ledger record keeps (no stream scan).
 * Events trimmed from the stream by MAXLEN are simply absent.
 */
export async function readTransferEvents(redis: Redis | Cluster, keys: EventKeys, sequenceId: string): Promise<TransferEvent[]> {
  const ids = await redis.hget(keys.transfer(sequenceId), 'events');
  if (!ids) return [];
  const entries = await Promise.all(ids.split(',').map((id) => redis.xrange(keys.events, id, id)));
  return entries.flat().map((entry) => parseStreamEntry(entry as [string, string[]]));
}
