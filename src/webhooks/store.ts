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
 * - `backlog`: every queued entry id, scored by the event's time (ms), for the age of the oldest; an
 *   entry is queued while it is here (it comes and goes with its `delivery` hash).
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

/** What every key of one endpoint starts with. */
function endpointBase(prefix: string, endpoint: string): string {
  return `${prefix}:webhooks:${endpoint}`;
}

export function endpointKeys(prefix: string, endpoint: string): EndpointKeys {
  const base = endpointBase(prefix, endpoint);
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

/** Pending entries of the group looked at per lease: more than any batch in flight. */
const PENDING_LOOKED_AT = 1_000;

/**
 * The scripts below name the lane and delivery keys of the lanes they come upon (which a caller cannot
 * know beforehand) from the endpoint's key base: like every key they touch, those keys are under
 * QUEUE_PREFIX, so they share the events stream's Cluster slot (the config checks it).
 */
const ID_ORDER_LUA = `
local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function older(a, b)
  local am, as = parts(a)
  local bm, bs = parts(b)
  return am < bm or (am == bm and as < bs)
end`;

/**
 * KEYS: due, backlog. ARGV: key base, due at (ms), then per event its entry id, lane, body, type and
 * event time (ms). Queues each event for the endpoint, once: an entry already queued (a redelivery of
 * the stream entry, or a replay of one not yet delivered) changes nothing; an entry is queued while it
 * is in the backlog. The lane stays in stream order, which is one transfer's version order: an entry
 * older than some already queued (a replay, or an entry another consumer read first but queued later)
 * goes before them, at the head when it is the oldest. A lane that was empty becomes due at the due
 * time; one that was not keeps its time. Returns how many were queued.
 */
const ENQUEUE_LUA = `${ID_ORDER_LUA}
local base = ARGV[1]
local queued = 0
for a = 3, #ARGV, 5 do
  local id, lane = ARGV[a], ARGV[a + 1]
  if redis.call('ZADD', KEYS[2], 'NX', ARGV[a + 4], id) == 1 then
    local list = base .. ':lane:' .. lane
    redis.call('HSET', base .. ':delivery:' .. id, 'body', ARGV[a + 2], 'type', ARGV[a + 3], 'lane', lane, 'tries', 0)
    local last = redis.call('LINDEX', list, -1)
    if not last then
      redis.call('RPUSH', list, id)
      redis.call('ZADD', KEYS[1], ARGV[2], lane)
    elseif older(last, id) then
      redis.call('RPUSH', list, id)
    else
      local ids = redis.call('LRANGE', list, 0, -1)
      local after = nil
      for i = #ids, 1, -1 do
        if older(ids[i], id) then after = ids[i] break end
      end
      if after == nil then redis.call('LPUSH', list, id) else redis.call('LINSERT', list, 'AFTER', after, id) end
    end
    queued = queued + 1
  end
end
return queued`;

/**
 * Shared by the claim and the settling: `lease(lanes, known)` with KEYS[1] due, KEYS[5] the events
 * stream and ARGV[1] key base, ARGV[2] lease end (ms), ARGV[3] hold-back time (ms), ARGV[4] the
 * endpoint's group (empty: no stream to look at); `known`, when given, the lanes' heads as the caller
 * read them (false: none). For each lane: its head, when it has one. A lane left empty is dropped
 * from due. A transfer whose earlier event is read from the stream by a consumer of the group but not
 * yet queued (pending: its reader died, or another consumer read it first and queues it a moment
 * later) is held back: due again at the hold-back time, no try spent; queued, that event takes its
 * place before the head (ENQUEUE_LUA). An entry is queued before it is acknowledged, so it is always
 * pending or queued (or delivered), and one script sees both at once. Any other head is leased (due at
 * the lease end), its try counted before it is made (so a process dying mid-try still spends it), and
 * returned: lane, entry id, body, type, tries with this one.
 */
const LEASE_LUA = `${ID_ORDER_LUA}
local base = ARGV[1]
local function lease(lanes, known)
  local heads, newest = {}, nil
  for i, lane in ipairs(lanes) do
    local head
    if known then head = known[i] else head = redis.call('LINDEX', base .. ':lane:' .. lane, 0) end
    if head then
      heads[i] = head
      if ARGV[4] ~= '' and string.sub(lane, 1, 1) ~= '@' and (newest == nil or older(newest, head)) then newest = head end
    else
      redis.call('ZREM', KEYS[1], lane)
    end
  end
  -- The group's pending entries older than some head, and their transfers, looked up when needed.
  local pending, transfers = {}, {}
  if newest ~= nil then pending = redis.call('XPENDING', KEYS[5], ARGV[4], '-', '(' .. newest, ${PENDING_LOOKED_AT}) end
  local function transferOf(id)
    if transfers[id] == nil then
      local entry = redis.call('XRANGE', KEYS[5], id, id)[1]
      local found = ''
      if entry then
        local fields = entry[2]
        for f = 1, #fields - 1, 2 do
          if fields[f] == 'sequenceId' then found = fields[f + 1] break end
        end
      end
      transfers[id] = found
    end
    return transfers[id]
  end
  local leased = {}
  for i, lane in ipairs(lanes) do
    local head = heads[i]
    if head then
      local held = false
      if string.sub(lane, 1, 1) ~= '@' then
        for _, entry in ipairs(pending) do
          if not older(entry[1], head) then break end
          if transferOf(entry[1]) == lane then held = true break end
        end
      end
      local delivery = base .. ':delivery:' .. head
      local fields = held and {} or redis.call('HMGET', delivery, 'body', 'type')
      if held then
        redis.call('ZADD', KEYS[1], 'XX', ARGV[3], lane)
      elseif not fields[1] then
        -- Not a delivery queued by this code: nothing to try.
        redis.call('ZREM', KEYS[1], lane)
      else
        redis.call('ZADD', KEYS[1], 'XX', ARGV[2], lane)
        local tries = redis.call('HINCRBY', delivery, 'tries', 1)
        leased[#leased + 1] = {lane, head, fields[1], fields[2] or '', tries}
      end
    end
  end
  return leased
end`;

/**
 * KEYS: due, disabled, backlog, unused, events stream. ARGV: as lease's, then now (ms), count. Unless
 * the endpoint is disabled, leases up to `count` due lanes. Returns whether it is disabled, the time of
 * the oldest queued event (nil: none) and the heads leased: a dispatcher's round in one step.
 */
const CLAIM_LUA = `${LEASE_LUA}
local oldest = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2]
if redis.call('EXISTS', KEYS[2]) == 1 then return {1, oldest, {}} end
local count = tonumber(ARGV[6])
if count <= 0 then return {0, oldest, {}} end
return {0, oldest, lease(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[5], 'LIMIT', 0, count))}`;

/**
 * KEYS: due, disabled, backlog, dead, events stream. ARGV: as lease's, then now (ms), the number of
 * outcomes, then each outcome: what (`next`, `done`, `dead` or `retry`), entry id, lane, the
 * number of its own arguments, and those. Settles the tries of one dispatcher that ended meanwhile, in
 * one step. An outcome whose entry is no longer the head of its lane (another process ended it
 * already) changes nothing.
 * - `done`: delivered; the lane's next event is due at once.
 * - `next`: delivered, and the lane goes on under the same lease: its next head is leased and returned
 *   (as lease's), unless the endpoint is disabled (then due at once, as `done`).
 * - `dead`: its tries ran out; its arguments are the fields of its dead-letter entry (one XADD). The
 *   lane then goes on as after `done`.
 * - `retry`: its arguments are when it is due again (ms) and the try's result, kept for operators.
 */
const SETTLE_LUA = `${LEASE_LUA}
local now = ARGV[5]
local disabled = redis.call('EXISTS', KEYS[2]) == 1
local goOn, nextHeads = {}, {}
local a = 7
for _ = 1, tonumber(ARGV[6]) do
  local what, id, lane, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local list, delivery = base .. ':lane:' .. lane, base .. ':delivery:' .. id
  -- The head and the one after it.
  local first = redis.call('LRANGE', list, 0, 1)
  if first[1] == id then
    if what == 'retry' then
      redis.call('HSET', delivery, 'last', ARGV[a + 5])
      redis.call('ZADD', KEYS[1], 'XX', ARGV[a + 4], lane)
    else
      if what == 'dead' then redis.call('XADD', KEYS[4], '*', unpack(ARGV, a + 4, a + 3 + n)) end
      redis.call('LPOP', list)
      redis.call('DEL', delivery)
      redis.call('ZREM', KEYS[3], id)
      if what == 'next' and not disabled then
        goOn[#goOn + 1] = lane
        nextHeads[#goOn] = first[2] or false
      elseif first[2] then
        redis.call('ZADD', KEYS[1], now, lane)
      else
        redis.call('ZREM', KEYS[1], lane)
      end
    end
  end
  a = a + 4 + n
end
return lease(goOn, nextHeads)`;

/** The scripts, sent by SHA (EVALSHA) once Redis knows them. */
interface StoreCommands {
  webhookEnqueue(...args: Array<string | number>): Promise<number>;
  webhookClaim(...args: Array<string | number>): Promise<[number, string | null, LeasedReply[]]>;
  webhookSettle(...args: Array<string | number>): Promise<LeasedReply[]>;
}

/** A head a script leased: lane, entry id, body, type, tries with this one. */
type LeasedReply = [string, string, string, string, number];

/** One round of a dispatcher: the endpoint's state, and the deliveries at the heads of the lanes it leased. */
export interface ClaimedRound {
  disabled: boolean;
  /** The time (ms) of the oldest undelivered event; undefined when there is none. */
  oldestAt: number | undefined;
  claimed: QueuedDelivery[];
}

/** What ended a try of a lane's head, to settle (EndpointStore.settle). */
export type TryOutcome =
  /** Delivered; `goOn`: the lane's next event is leased at once, for the same dispatcher. */
  | { delivery: QueuedDelivery; kind: 'delivered'; goOn: boolean }
  /** Its tries ran out: to the dead-letter stream with these fields; the lane's next event is due at once. */
  | { delivery: QueuedDelivery; kind: 'dead'; deadLetter: Record<string, string> }
  /** Tried again at `dueAt`; `result` kept for operators. */
  | { delivery: QueuedDelivery; kind: 'retry'; dueAt: number; result: string };

/** An event to queue for the endpoint (message.ts, queuedEvent). */
export interface QueuedEvent {
  entryId: string;
  lane: string;
  body: string;
  type: string;
  /** When its first try is due (ms). */
  dueAt: number;
  /** The event's time (ms), for the age of the oldest. */
  eventAt: number;
}

function queuedDelivery([lane, entryId, body, type, tries]: LeasedReply): QueuedDelivery {
  return { entryId, lane, body, type, tries: Number(tries) };
}

export interface QueuedDelivery {
  entryId: string;
  lane: string;
  body: string;
  type: string;
  /** Tries made, this one included (counted when the head was leased). */
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
  readonly #base: string;

  /** The events stream and the endpoint's consumer group on it (for the hold-back; the CLI needs neither). */
  readonly #source: { stream: string; group: string } | undefined;

  constructor(redis: RedisClient, prefix: string, endpoint: string, eventsStream?: string) {
    this.#redis = redis;
    if (!('webhookEnqueue' in redis)) {
      redis.defineCommand('webhookEnqueue', { numberOfKeys: 2, lua: ENQUEUE_LUA });
      redis.defineCommand('webhookClaim', { numberOfKeys: 5, lua: CLAIM_LUA });
      redis.defineCommand('webhookSettle', { numberOfKeys: 5, lua: SETTLE_LUA });
    }
    this.keys = endpointKeys(prefix, endpoint);
    this.#base = endpointBase(prefix, endpoint);
    this.#source = eventsStream === undefined ? undefined : { stream: eventsStream, group: endpointGroup(endpoint) };
  }

  /** Queues an event (idempotent per entry id); resolves true when it was new. */
  async enqueue(entry: QueuedEvent): Promise<boolean> {
    return (await this.enqueueAll([entry], entry.dueAt)) === 1;
  }

  /** Queues events in one step, in the order given (each idempotent per entry id); resolves with how many were new. */
  async enqueueAll(entries: ReadonlyArray<Omit<QueuedEvent, 'dueAt'>>, dueAt: number): Promise<number> {
    if (entries.length === 0) return 0;
    const k = this.keys;
    const args: Array<string | number> = [k.due, k.backlog, this.#base, dueAt];
    for (const entry of entries) args.push(entry.entryId, entry.lane, entry.body, entry.type, entry.eventAt);
    return this.#commands.webhookEnqueue(...args);
  }

  get #commands(): StoreCommands {
    return this.#redis as unknown as StoreCommands;
  }

  /** The keys and arguments every leasing script starts with (LEASE_LUA). */
  #leaseArgs(leaseUntil: number, retryAt: number): Array<string | number> {
    const k = this.keys;
    return [
      k.due,
      k.disabled,
      k.backlog,
      k.dead,
      this.#source?.stream ?? k.due,
      this.#base,
      leaseUntil,
      retryAt,
      this.#source?.group ?? '',
    ];
  }

  /**
   * Unless the endpoint is disabled, leases up to `count` due lanes until `leaseUntil` and reads the
   * delivery at the head of each, its try counted; with the endpoint's state (for the gauges). A lane
   * whose transfer has an earlier event read from the stream and not yet queued is held back, due again
   * at `retryAt` with no try spent (LEASE_LUA).
   */
  async claim(now: number, leaseUntil: number, count: number, retryAt: number): Promise<ClaimedRound> {
    const [disabled, oldest, leased] = await this.#commands.webhookClaim(...this.#leaseArgs(leaseUntil, retryAt), now, count);
    return { disabled: disabled === 1, oldestAt: oldest === null ? undefined : Number(oldest), claimed: leased.map(queuedDelivery) };
  }

  /**
   * Settles the outcomes of tries (one step for all): delivered, dead-lettered or tried again later
   * (SETTLE_LUA). Resolves with the next deliveries of the lanes delivered with `goOn`, leased until
   * `leaseUntil` (a lane held back is due again at `retryAt`; an empty one is done).
   */
  async settle(outcomes: readonly TryOutcome[], now: number, leaseUntil: number, retryAt: number): Promise<QueuedDelivery[]> {
    const args: Array<string | number> = [...this.#leaseArgs(leaseUntil, retryAt), now, outcomes.length];
    for (const outcome of outcomes) {
      const { entryId, lane } = outcome.delivery;
      if (outcome.kind === 'delivered') args.push(outcome.goOn ? 'next' : 'done', entryId, lane, 0);
      else if (outcome.kind === 'retry') args.push('retry', entryId, lane, 2, outcome.dueAt, outcome.result);
      else {
        const fields = Object.entries(outcome.deadLetter).flat();
        args.push('dead', entryId, lane, fields.length, ...fields);
      }
    }
    return (await this.#commands.webhookSettle(...args)).map(queuedDelivery);
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
