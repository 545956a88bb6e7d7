import { Cluster, type Redis } from 'ioredis';
import { keySlot } from './redis-slot.ts';

/**
 * How many replicas acknowledged every write this process made so far through the connection that
 * serves `key` (Redis WAIT, at most `timeoutMs`). WAIT counts the writes of the connection it is sent
 * on, so it must go where the write went: the client itself, or on a Cluster the connection ioredis
 * routes `key`'s slot to. That is the node that answered the write, unless the slot moved between the
 * write and this call (a failover in that instant); then WAIT is sent to the new master, which never
 * took the write, and its replicas can be counted for it. A Redis that refuses writes without a
 * replica (`min-replicas-to-write`) narrows that window; the README says so.
 */
export async function acknowledgingReplicas(client: Redis | Cluster, key: string, replicas: number, timeoutMs: number): Promise<number> {
  const node = client instanceof Cluster ? routedNode(client, key) : client;
  return Number(await node.call('WAIT', replicas, timeoutMs));
}

/** The Cluster's connection for `key`'s slot, as ioredis routes it (its public `slots` table). */
function routedNode(cluster: Cluster, key: string): Redis {
  const slot = keySlot(key);
  const address = cluster.slots[slot]?.[0];
  const node = address ? cluster.nodes('all').find((n) => `${n.options.host}:${n.options.port}` === address) : undefined;
  if (!node) throw new Error(`no Redis Cluster connection serves slot ${slot} yet`);
  return node;
}
