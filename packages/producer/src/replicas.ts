import { Cluster, type Redis } from 'ioredis';
import { keySlot } from './redis-slot.ts';

/** What a replica wait found: how many acknowledged, and how many had to. */
export interface ReplicaAcknowledgement {
  /** 0 when the connection that wrote closed, or the key's slot moved, before WAIT answered. */
  acknowledged: number;
  /** The minimum asked for, or every replica the master listed online if there were more. */
  required: number;
}

const sessions = new WeakMap<Redis, { id: number; closes: number }>();
let nextSession = 1;

/**
 * Names the connection that serves `key` now; the name changes once that connection closes or, on a
 * Cluster, once another node serves the key's slot. Take it before a write and hand it to
 * replicaAcknowledgement: ioredis resends an unanswered command on the connection it opens next,
 * possibly to a promoted replica that never took the write, and a WAIT there counts nothing of it
 * yet answers at once with every replica. Seen in a failover test run: 43 transfers sent twice.
 */
export function connectionSession(client: Redis | Cluster, key: string): string {
  const node = client instanceof Cluster ? routedNodeIfKnown(client, key) : client;
  if (!node) return `unrouted-${nextSession++}`; // never equal to another
  let session = sessions.get(node);
  if (!session) {
    const created = { id: nextSession++, closes: 0 };
    node.on('close', () => created.closes++);
    sessions.set(node, created);
    session = created;
  }
  return `${session.id}.${session.closes}`;
}

/**
 * Waits (Redis WAIT, at most `timeoutMs`) until the replicas have every write this process made so far
 * through the connection that serves `key`, and says whether enough did: `acknowledged >= required`.
 * Enough is every replica the master lists online (ROLE), and at least `minimum`. Any fewer is not
 * enough: with two replicas and a minimum of 1, the one that did not acknowledge in time may be the
 * one Sentinel promotes (it ranks replicas by an offset it read up to a second before), and a failover
 * test run sent a transfer twice that way. A replica the master no longer lists (crashed, cut off)
 * is not waited for: its offset stopped, so Sentinel ranks it below those that acknowledged.
 *
 * WAIT counts the writes of the connection it is sent on, so it must go where the write went: the
 * client itself, or on a Cluster the connection ioredis routes `key`'s slot to. `session`, taken
 * by connectionSession before the write, proves it did: if that connection closed (a resent WAIT
 * runs on the next one) or the slot moved to another node in between, nothing is counted.
 */
export async function replicaAcknowledgement(
  client: Redis | Cluster,
  key: string,
  minimum: number,
  timeoutMs: number,
  session: string,
): Promise<ReplicaAcknowledgement> {
  const node = client instanceof Cluster ? routedNode(client, key) : client;
  const required = Math.max(minimum, onlineReplicas(await node.call('ROLE')));
  const acknowledged = Number(await node.call('WAIT', required, timeoutMs));
  // The write and the WAIT ran on one connection only if it neither closed nor moved in between.
  return { acknowledged: connectionSession(client, key) === session ? acknowledged : 0, required };
}

/** Replicas a master's ROLE reply lists (only those online); 0 for a replica's or an unreadable reply. */
export function onlineReplicas(role: unknown): number {
  return Array.isArray(role) && role[0] === 'master' && Array.isArray(role[2]) ? role[2].length : 0;
}

/** The Cluster's connection for `key`'s slot, as ioredis routes it (its public `slots` table). */
function routedNode(cluster: Cluster, key: string): Redis {
  const node = routedNodeIfKnown(cluster, key);
  if (!node) throw new Error(`no Redis Cluster connection serves slot ${keySlot(key)} yet`);
  return node;
}

function routedNodeIfKnown(cluster: Cluster, key: string): Redis | undefined {
  const address = cluster.slots[keySlot(key)]?.[0];
  return address ? cluster.nodes('all').find((n) => `${n.options.host}:${n.options.port}` === address) : undefined;
}
