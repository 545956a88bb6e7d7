import type { RedisClient } from '../redis.ts';

/**
 * One endpoint's deliveries in Redis, so that they outlive the process (every key under QUEUE_PREFIX,
 * so one hash tag keeps them in the stream's Cluster slot):
 *
 * - `lane:<lane>`: a list of stream entry ids, the events of one transfer (the lane is its sequenceId,
 *   or `@<entry id>` for an event of no transfer) in the order they were queued. Only the head is
 *   being delivered: the next waits while it is undelivered, which keeps one transfer in version order.
 * - `due`: a sorted set of lanes whose head is due, scored by when (ms). A lane a process is trying is
 *   leased: its score moved past the try's time-out, so a process that dies mid-try leaves it due again.
 * - `delivery:<entry id>`: the body, the type, the lane and the tries made so far.
 * - `backlog`: every queued entry id, scored by the event's time (ms), for the age of the oldest.
 * - `disabled`: set when the endpoint answered 410 (JSON: when, which entry), until
 *   `npm run cli -- webhooks enable <endpoint>` (enable below).
 * - `dead`: the dead-letter stream: deliveries whose tries ran out.
 */
export interface EndpointKeys {
  due: string;
  backlog: string;
  disabled: string;
  dead: string;
  lane(lane: string): string;
  delivery(entryId: string): string;
}

export function endpointKeys(prefix: string, endpoint: string): EndpointKeys {
  const base = `${prefix}:webhooks:${endpoint}`;
  return {
    due: `${base}:due`,
    backlog: `${base}:backlog`,
    disabled: `${base}:disabled`,
    dead: `${base}:dead`,
    lane: (lane) => `${base}:lane:${lane}`,
    delivery: (entryId) => `${base}:delivery:${entryId}`,
  };
}

/** The consumer group of one endpoint on the events stream. */
export function endpointGroup(endpoint: string): string {
  return `webhooks:${endpoint}`;
}

/**
 * KEYS: delivery, lane, due, backlog. ARGV: entry id, lane, body, type, due at (ms), event time (ms).
 * Queues one event for the endpoint, once: an entry already queued (a redelivery of the stream entry,
 * or a replay of one not yet delivered) changes nothing. The lane stays in stream order, which is one
 * transfer's version order: an entry older than some already queued (a replay, or an entry another
 * consumer read first but queued later) goes before them, at the head when it is the oldest. A lane
 * that was empty becomes due at the due time; one that was not keeps its time. Returns 1 when queued,
 * 0 when it was already.
 */
const ENQUEUE_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'body', ARGV[3], 'type', ARGV[4], 'lane', ARGV[2], 'tries', 0)
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function older(a, b)
  local am, as = parts(a)
  local bm, bs = parts(b)
  return am < bm or (am == bm and as < bs)
end
local queued = redis.call('LRANGE', KEYS[2], 0, -1)
local after = nil
for i = #queued, 1, -1 do
  if older(queued[i], ARGV[1]) then after = queued[i] break end
end
if #queued == 0 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[2])
elseif after == nil then
  redis.call('LPUSH', KEYS[2], ARGV[1])
else
  redis.call('LINSERT', KEYS[2], 'AFTER', after, ARGV[1])
end
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[1])
return 1`;

/**
 * KEYS: due, disabled, backlog. ARGV: now (ms), lease end (ms), count. Unless the endpoint is
 * disabled, leases up to `count` due lanes (their score moves to the lease end). Returns whether it is
 * disabled, the time of the oldest queued event (nil: none) and the lanes leased: a dispatcher's round
 * in one step.
 */
const CLAIM_LUA = `
local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2]
if redis.call('EXISTS', KEYS[2]) == 1 then return {1, oldest, {}} end
local count = tonumber(ARGV[3])
local lanes = {}
if count > 0 then lanes = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, count) end
for _, lane in ipairs(lanes) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], lane) end
return {0, oldest, lanes}`;

/** The scripts, sent by SHA (EVALSHA) once Redis knows them. */
interface StoreCommands {
  webhookEnqueue(...args: Array<string | number>): Promise<number>;
  webhookClaim(...args: Array<string | number>): Promise<[number, string | null, string[]]>;
  webhookFinish(...args: Array<string | number>): Promise<number>;
}

/** One round of a dispatcher: the endpoint's state, and the deliveries at the heads of the lanes it leased. */
export interface ClaimedRound {
  disabled: boolean;
  /** The time (ms) of the oldest undelivered event; undefined when there is none. */
  oldestAt: number | undefined;
  claimed: QueuedDelivery[];
}

/**
 * KEYS: delivery, lane, due, backlog, dead. ARGV: entry id, lane, now (ms), then for a dead-letter the
 * fields of its entry (name, value, …). Ends the delivery at the head of the lane (delivered, or
 * dead-lettered with one XADD in the same step) and makes the lane's next event due at once. Returns
 * 0 when the entry is no longer the head (another process ended it already).
 */
const FINISH_LUA = `
if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[1] then return 0 end
if #ARGV > 3 then redis.call('XADD', KEYS[5], '*', unpack(ARGV, 4)) end
redis.call('LPOP', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('LLEN', KEYS[2]) > 0 then redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2]) else redis.call('ZREM', KEYS[3], ARGV[2]) end
return 1`;

/** Pending entries of the group looked at per round: more than any batch in flight. */
const PENDING_LOOKED_AT = 1_000;
/** Stream entries whose sequenceId claim remembers, then it starts afresh. */
export const SEQUENCE_IDS_KEPT = 10_000;

/** Whether stream id `a` comes before `b`. */
function olderId(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am < bm || (am === bm && as < bs);
}

export interface QueuedDelivery {
  entryId: string;
  lane: string;
  body: string;
  type: string;
  /** Tries made before this one. */
  tries: number;
}

/** What a 410 recorded: when, and the delivery it answered. */
export interface DisabledRecord {
  at: string;
  entryId: string;
}

export interface EndpointSummary {
  /** Set while the endpoint is disabled (it answered 410). */
  disabled: DisabledRecord | undefined;
  /** Events queued and neither delivered nor dead-lettered. */
  backlog: number;
  /** The time (ms) of the oldest of them; undefined when there is none. */
  oldestAt: number | undefined;
  /** Entries of the dead-letter stream (deliveries whose tries ran out, kept until trimmed by hand). */
  deadLettered: number;
}

function parseDisabled(text: string): DisabledRecord {
  try {
    const { at, entryId } = JSON.parse(text) as Partial<DisabledRecord>;
    return { at: typeof at === 'string' ? at : '', entryId: typeof entryId === 'string' ? entryId : '' };
  } catch {
    return { at: '', entryId: '' };
  }
}

export class EndpointStore {
  readonly keys: EndpointKeys;
  readonly #redis: RedisClient;

  /** The events stream and the endpoint's consumer group on it (for claim's hold-back; the CLI needs neither). */
  readonly #source: { stream: string; group: string } | undefined;
  /** The sequenceId of stream entries seen pending (an entry never changes): one read per entry. */
  readonly #sequenceIds = new Map<string, string>();

  constructor(redis: RedisClient, prefix: string, endpoint: string, eventsStream?: string) {
    this.#redis = redis;
    if (!('webhookEnqueue' in redis)) {
      redis.defineCommand('webhookEnqueue', { numberOfKeys: 4, lua: ENQUEUE_LUA });
      redis.defineCommand('webhookClaim', { numberOfKeys: 3, lua: CLAIM_LUA });
      redis.defineCommand('webhookFinish', { numberOfKeys: 5, lua: FINISH_LUA });
    }
    this.keys = endpointKeys(prefix, endpoint);
    this.#source = eventsStream === undefined ? undefined : { stream: eventsStream, group: endpointGroup(endpoint) };
  }

  /** Queues an event (idempotent per entry id); resolves true when it was new. */
  async enqueue(entry: { entryId: string; lane: string; body: string; type: string; dueAt: number; eventAt: number }): Promise<boolean> {
    const k = this.keys;
    const queued = await this.#commands.webhookEnqueue(
      k.delivery(entry.entryId),
      k.lane(entry.lane),
      k.due,
      k.backlog,
      entry.entryId,
      entry.lane,
      entry.body,
      entry.type,
      entry.dueAt,
      entry.eventAt,
    );
    return queued === 1;
  }

  get #commands(): StoreCommands {
    return this.#redis as unknown as StoreCommands;
  }

  /**
   * Unless the endpoint is disabled, leases up to `count` due lanes until `leaseUntil` and reads the
   * delivery at the head of each; with the endpoint's state (for the gauges).
   *
   * Holds back (due again at `retryAt`, no try spent) the lanes whose transfer has an earlier event
   * not yet queued: read from the stream by a consumer of the endpoint's group but not acknowledged,
   * which a worker killed between the read and the queue leaves pending until a live one claims it;
   * or another consumer read it first and queues it a moment later. Queued, it takes its place before
   * the head (ENQUEUE_LUA), and the transfer's versions stay in order. An entry is queued before it is
   * acknowledged, so at every moment it is pending or queued (or delivered): the pending list is read
   * before the heads (one pipeline, run in order), so an earlier event is seen in one or the other.
   */
  async claim(now: number, leaseUntil: number, count: number, retryAt: number): Promise<ClaimedRound> {
    const k = this.keys;
    const [disabled, oldest, lanes] = await this.#commands.webhookClaim(k.due, k.disabled, k.backlog, now, leaseUntil, count);
    const round: ClaimedRound = { disabled: disabled === 1, oldestAt: oldest === null ? undefined : Number(oldest), claimed: [] };
    if (lanes.length === 0) return round;
    const source = lanes.some((lane) => !lane.startsWith('@')) ? this.#source : undefined;
    const first = this.#redis.pipeline();
    if (source) first.xpending(source.stream, source.group, '-', '+', PENDING_LOOKED_AT);
    for (const lane of lanes) first.lindex(k.lane(lane), 0);
    const replies = (await first.exec()) ?? [];
    const pending = source ? ((replies.shift()?.[1] ?? []) as Array<[string, ...unknown[]]>).map(([id]) => id) : [];
    const heads = replies.map(([, id]) => (typeof id === 'string' ? id : null));

    // Emptied before the look-up, so that every pending entry is read again or still known.
    if (this.#sequenceIds.size > SEQUENCE_IDS_KEPT) this.#sequenceIds.clear();
    const unknown = source ? pending.filter((id) => !this.#sequenceIds.has(id)) : [];
    const second = this.#redis.pipeline();
    for (const id of unknown) second.xrange(source!.stream, id, id);
    for (const head of heads) if (head !== null) second.hgetall(k.delivery(head));
    const reads = (await second.exec()) ?? [];
    unknown.forEach((id, i) => {
      const [entry] = (reads[i]?.[1] ?? []) as Array<[string, string[]]>;
      const fields = entry?.[1] ?? [];
      const at = fields.indexOf('sequenceId');
      // Trimmed from the stream: nothing left to wait for.
      this.#sequenceIds.set(id, at >= 0 && at % 2 === 0 ? (fields[at + 1] ?? '') : '');
    });
    const hashes = reads.slice(unknown.length).map(([, fields]) => (fields ?? {}) as Record<string, string>);

    const behind: string[] = [];
    const held: string[] = [];
    let read = 0;
    lanes.forEach((lane, i) => {
      const entryId = heads[i] ?? null;
      const fields = entryId === null ? {} : (hashes[read++] ?? {});
      if (entryId === null || fields.body === undefined) {
        // A lane left behind (its last delivery ended between the two reads): nothing to try.
        behind.push(lane);
        return;
      }
      if (!lane.startsWith('@') && pending.some((id) => this.#sequenceIds.get(id) === lane && olderId(id, entryId))) {
        held.push(lane);
        return;
      }
      round.claimed.push({ entryId, lane, body: fields.body, type: fields.type ?? '', tries: Number(fields.tries ?? 0) });
    });
    if (behind.length > 0 || held.length > 0) {
      const settle = this.#redis.multi();
      if (behind.length > 0) settle.zrem(k.due, ...behind);
      for (const lane of held) settle.zadd(k.due, 'XX', retryAt, lane);
      await settle.exec();
    }
    return round;
  }

  /** Counts a try before it is made, so that a process dying mid-try still spends it. */
  async countTry(entryId: string): Promise<number> {
    return this.#redis.hincrby(this.keys.delivery(entryId), 'tries', 1);
  }

  /** The next try of the lane's head at `dueAt`, with the last try's result kept for operators. */
  async retryAt(delivery: QueuedDelivery, dueAt: number, result: string): Promise<void> {
    await this.#redis
      .multi()
      .hset(this.keys.delivery(delivery.entryId), 'last', result)
      .zadd(this.keys.due, 'XX', dueAt, delivery.lane)
      .exec();
  }

  /** Ends the lane's head: delivered, or (with `deadLetter` fields) dead-lettered. */
  async finish(delivery: QueuedDelivery, now: number, deadLetter?: Record<string, string>): Promise<void> {
    const k = this.keys;
    const fields = deadLetter === undefined ? [] : Object.entries(deadLetter).flat();
    await this.#commands.webhookFinish(
      k.delivery(delivery.entryId),
      k.lane(delivery.lane),
      k.due,
      k.backlog,
      k.dead,
      delivery.entryId,
      delivery.lane,
      now,
      ...fields,
    );
  }

  /** Disables the endpoint (a 410) and leaves the lane due, to be tried again once enabled. */
  async disable(delivery: QueuedDelivery, now: number): Promise<void> {
    await this.#redis
      .multi()
      .set(this.keys.disabled, JSON.stringify({ at: new Date(now).toISOString(), entryId: delivery.entryId }))
      .hset(this.keys.delivery(delivery.entryId), 'last', 'gone')
      .zadd(this.keys.due, 'XX', now, delivery.lane)
      .exec();
  }

  /**
   * Enables the endpoint again after a 410: its waiting deliveries resume at the dispatchers' next round
   * (their lanes stayed due). Resolves with what the disable recorded, or undefined when it was not disabled.
   */
  async enable(): Promise<DisabledRecord | undefined> {
    const [[, record]] = (await this.#redis.multi().get(this.keys.disabled).del(this.keys.disabled).exec()) as [[unknown, string | null]];
    return record === null ? undefined : parseDisabled(record);
  }

  /** What an operator asks of the endpoint: disabled or not, its backlog and its oldest, its dead-letters. */
  async summary(): Promise<EndpointSummary> {
    const [disabled, backlog, oldest, dead] = await Promise.all([
      this.#redis.get(this.keys.disabled),
      this.#redis.zcard(this.keys.backlog),
      this.#redis.zrange(this.keys.backlog, '0', '0', 'WITHSCORES'),
      this.#redis.xlen(this.keys.dead),
    ]);
    return {
      disabled: disabled === null ? undefined : parseDisabled(disabled),
      backlog,
      oldestAt: oldest[1] === undefined ? undefined : Number(oldest[1]),
      deadLettered: dead,
    };
  }
}
