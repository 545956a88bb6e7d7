import { Cluster, type Redis } from 'ioredis';
import { keySlot } from './redis-slot.ts';

/**
 * How many replicas acknowledged every write this process made so far through the connection that
 * serves `key` (Redis WAIT, at most `timeoutMs`). It waits for every replica the master has online
 * (ROLE), not only for `replicas`: with two replicas and `replicas` 1, returning on the first
 * acknowledgement would leave the other one behind, and Sentinel may promote that one (it ranks
 * replicas by an offset it read up to a second before). The caller compares the count with the
 * minimum it needs; a replica that lags costs at most `timeoutMs`. WAIT counts the writes of the
 * connection it is sent on, so it must go where the write went: the client itself, or on a Cluster the
 * connection ioredis routes `key`'s slot to. That is the node that answered the write, unless the slot moved between the
 * write and this call (a failover in that instant); then WAIT is sent to the new master, which never
 * took the write, and its replicas can be counted for it. A Redis that refuses writes without a
 * replica (`min-replicas-to-write`) narrows that window; the README says so.
 */
export async function acknowledgingReplicas(client: Redis | Cluster, key: string, replicas: number, timeoutMs: number): Promise<number> {
  const node = client instanceof Cluster ? routedNode(client, key) : client;
  const online = onlineReplicas(await node.call('ROLE'));
  return Number(await node.call('WAIT', Math.max(replicas, online), timeoutMs));
}

/** Replicas a master's ROLE reply lists (only those online); 0 for a replica's or an unreadable reply. */
export function onlineReplicas(role: unknown): number {
  return Array.isArray(role) && role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
}

/** The Cluster's connection for `key`'s slot, as ioredis routes it (its public `slots` table). */
function routedNode(cluster: Cluster, key: string): Redis {
  const slot = keySlot(key);
  const address = cluster.slots[slot]?.[0];
  const node = address ? cluster.nodes('all').find((n) => `${n.options.host}:${n.options.port}` === address) : undefined;
  if (!node) throw new Error(`no Redis Cluster connection serves slot ${slot} yet`);
  return node;
}
