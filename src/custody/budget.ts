import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { MAX_RATE_LIMIT_WAIT_MS } from '../timing.ts';
import { CustodyError, CustodyErrorCode, type CustodyEndpoint } from './errors.ts';

/**
 * The provider's request budget (CUSTODY_MAX_RPS), shared by every worker process through Redis and
 * spent by priority. The classes, highest first:
 *
 * | class    | calls                                                                       | when the budget is short |
 * |----------|-----------------------------------------------------------------------------|--------------------------|
 * | send     | sendTransaction, and the lookup that must precede a resend                  | reserves the next slot, waits up to MAX_RATE_LIMIT_WAIT_MS |
 * | gate     | the travel-rule setting on the way to a send                               | the same                 |
 * | settle   | lookups settling a send of unknown outcome                                  | the same                 |
 * | enrich   | the wallet transaction of a found txid                                      | takes a free slot or is told when to come back |
 * | poll     | routine get-transfer polls                                                  | the same, after enrich   |
 * | verify   | reconciliation's re-verification of broadcasts                              | the same, after poll     |
 *
 * The first three *reserve*: the schedule (a GCRA "theoretical arrival time" in Redis) moves forward
 * and the caller sleeps until its slot. The last three reserve at most the next slot, and only when it
 * is at most one interval away, so a send arriving after them waits at most one slot behind them, and
 * they use the slots the reserving classes leave. Refused, they are told when to come back: behind
 * what is reserved, behind every waiting requester of the classes above and behind those of their own
 * class refused before them (a per-class line in Redis, first refused first), COME_BACK_SPREAD of a
 * slot each: each waiter gets its own time, so they do not all come back at once. A refused poll is
 * therefore re-delayed by a stretched interval that grows with the number of transfers competing for
 * what is left, instead of bouncing at once or holding a worker's concurrency slot while it waits.
 *
 * A 429 from the provider moves the schedule to the end of its Retry-After (`pause`): every class of
 * every process stops, and afterwards the reserving classes take the first slots.
 *
 * *Dispensed* requests (polls and enrichment, made by tracking jobs) are not kept in a line here:
 * their queue hands its jobs out at the budget's pace (BullMQ's limiter, then its manual rate limit
 * until the slot this refusal names), so a refused one is told only when the next slot is free for
 * its class, and nothing else is fetched before then. A turn-away then costs one fetch per slot a
 * higher class took, instead of one per tracked transfer due.
 */
export const BudgetClass = {
  SEND: 'send',
  GATE: 'gate',
  SETTLE: 'settle',
  ENRICH: 'enrich',
  POLL: 'poll',
  VERIFY: 'verify',
} as const;
export type BudgetClass = (typeof BudgetClass)[keyof typeof BudgetClass];

/** Highest first. */
export const BUDGET_CLASSES: readonly BudgetClass[] = Object.values(BudgetClass);
/** The classes that reserve slots ahead (and wait for them); the others only take a free one. */
export const RESERVING_CLASSES: ReadonlySet<BudgetClass> = new Set([BudgetClass.SEND, BudgetClass.GATE, BudgetClass.SETTLE]);
/** The classes that never reserve ahead, in priority order (their waiting sets, in Redis). */
export const OPPORTUNISTIC_CLASSES: readonly BudgetClass[] = BUDGET_CLASSES.filter((c) => !RESERVING_CLASSES.has(c));

export interface BudgetParams {
  /** ms between two requests (1000 / CUSTODY_MAX_RPS); 0 = no limit (only a provider's 429 pauses). */
  intervalMs: number;
  /** Requests the reserving classes may make at once after an idle spell. */
  burst: number;
  /** Longest wait a reserving class accepts for its slot. */
  horizonMs: number;
}

/** What the budget tells a requester. */
export type Admission =
  /** Go after `waitMs` (0: now); the slot is taken. */
  | { admitted: true; waitMs: number }
  /** Nothing taken: come back after `retryAfterMs`. */
  | { admitted: false; retryAfterMs: number };

/**
 * How far apart refused requesters are told to come back, in slots. One slot each would bring them
 * back at exactly the rate left for them; their arrivals are not evenly spaced (job delays, other
 * pollers' regular polls), and a slot nobody asks for within its interval is lost, so at one slot each
 * many slots go unused (bench/README.md, "The request budget"). A third of a slot each brings three
 * requests per free slot: the slot is nearly always taken, and the two refused cost a Redis call each.
 */
export const COME_BACK_SPREAD = 1 / 3;

/**
 * How many slots ahead a dispensed request may take (and sleep for): its queue hands out jobs a little
 * faster than the budget's rate (timing.ts, TRACK_FETCH_PACE), so that timer delays never leave a slot
 * unused; the early ones wait for their slot instead of being turned away, and only when they run
 * this far ahead is one turned away (and the queue told to wait). A send waits at most this many
 * slots behind polls.
 */
export const DISPENSED_AHEAD = 2;

/**
 * How long a refused requester keeps its place in line without being admitted: one that gave up (its
 * job ended another way) stops counting after this; one still waiting then goes to the back.
 */
export const WAITING_LAPSE_MS = 10 * 60_000;

/** The shared state, as Redis holds it: the schedule and, per opportunistic class, who waits since when. */
export interface BudgetState {
  /** The theoretical arrival time of the next free slot (ms, Redis clock). */
  tat: number;
  /** Per opportunistic class: member → when it was first refused (ms). */
  waiting: Map<BudgetClass, Map<string, number>>;
}

/**
 * The scheduler's rules, as a pure function (the Lua script below does exactly this in Redis; a test
 * runs both over the same random sequences). Mutates `state`.
 */
export function admit(
  state: BudgetState,
  params: BudgetParams,
  now: number,
  klass: BudgetClass,
  member: string,
  dispensed = false,
): Admission {
  const tat = Math.max(state.tat, now);
  if (dispensed && !RESERVING_CLASSES.has(klass)) {
    if (tat - now <= params.intervalMs * DISPENSED_AHEAD) {
      state.tat = tat + params.intervalMs;
      return { admitted: true, waitMs: Math.ceil(tat - now) };
    }
    return { admitted: false, retryAfterMs: Math.max(1, Math.ceil(tat - now - params.intervalMs * DISPENSED_AHEAD)) };
  }
  if (RESERVING_CLASSES.has(klass)) {
    const tolerance = params.intervalMs * (params.burst - 1);
    const wait = Math.max(0, tat - tolerance - now);
    if (wait > params.horizonMs) return { admitted: false, retryAfterMs: Math.ceil(wait - params.horizonMs) };
    state.tat = tat + params.intervalMs;
    return { admitted: true, waitMs: Math.ceil(wait) };
  }
  // Waiting entries that lapsed are gone; those of the classes above count, and this class's up to
  // this member's place in line (first refused, first told to come back).
  let ahead = 0;
  for (const other of OPPORTUNISTIC_CLASSES) {
    const entries = state.waiting.get(other) ?? new Map<string, number>();
    for (const [who, since] of entries) if (since < now - WAITING_LAPSE_MS) entries.delete(who);
    state.waiting.set(other, entries);
    if (OPPORTUNISTIC_CLASSES.indexOf(other) < OPPORTUNISTIC_CLASSES.indexOf(klass)) ahead += entries.size;
  }
  const mine = state.waiting.get(klass)!;
  if (tat - now <= params.intervalMs) {
    mine.delete(member);
    state.tat = tat + params.intervalMs;
    return { admitted: true, waitMs: Math.ceil(tat - now) };
  }
  if (!mine.has(member)) mine.set(member, now);
  const since = mine.get(member)!;
  // ZRANK's order: by the time of the first refusal, then by member.
  for (const [who, when] of mine) if (when < since || (when === since && who < member)) ahead += 1;
  const retryAfterMs = Math.ceil(tat - now + (ahead + 1) * Math.max(params.intervalMs, 1) * COME_BACK_SPREAD);
  return { admitted: false, retryAfterMs };
}

/**
 * A provider's 429: nothing is sent before `now + ms`. The schedule moves past that by the burst
 * tolerance, so a reserving class's first request lands at the pause's end, not a burst early.
 */
export function pause(state: BudgetState, params: BudgetParams, now: number, ms: number): void {
  state.tat = Math.max(state.tat, now + ms + params.intervalMs * (params.burst - 1));
}

/** Lua: `now` (ms) from ARGV[index] when a test clock passed one, else Redis TIME. */
function luaNow(index: number): string {
  return `local now
if ARGV[${index}] ~= '' then
  now = tonumber(ARGV[${index}])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;
}

/*
 * KEYS[1] the schedule (TAT, ms)   KEYS[2..n-1] the waiting sets of the opportunistic classes, in order
 * KEYS[n] the ledger record of the transfer the request is made for (its calls are counted there)
 * ARGV[1] interval ms   ARGV[2] burst   ARGV[3] horizon ms   ARGV[4] class   ARGV[5] member
 * ARGV[6] '1' when the class reserves   ARGV[7] the class's index among the opportunistic ones (1-based)
 * ARGV[8] the record's field counting calls ('' = count nothing); an absent record is never created
 * ARGV[9] now, ms ('' = Redis TIME; a test passes its own clock)   ARGV[10] COME_BACK_SPREAD
 * ARGV[11] WAITING_LAPSE_MS   ARGV[12] '1' when the request is dispensed (no line: see above)
 * ARGV[13] DISPENSED_AHEAD
 * Returns {1, wait} when admitted, {0, retryAfter} when not.
 */
const ADMIT_LUA = `
${luaNow(9)}
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local record = KEYS[#KEYS]
local function keep(nextTat)
  redis.call('SET', KEYS[1], string.format('%.17g', nextTat), 'PX', math.ceil(nextTat - now + 60000))
  if ARGV[8] ~= '' and redis.call('EXISTS', record) == 1 then redis.call('HINCRBY', record, ARGV[8], 1) end
end
if ARGV[6] == '1' then
  local tolerance = interval * (tonumber(ARGV[2]) - 1)
  local wait = tat - tolerance - now
  if wait < 0 then wait = 0 end
  if wait > tonumber(ARGV[3]) then return {0, math.ceil(wait - tonumber(ARGV[3]))} end
  keep(tat + interval)
  return {1, math.ceil(wait)}
end
if ARGV[12] == '1' then
  local ahead = interval * tonumber(ARGV[13])
  if tat - now <= ahead then
    keep(tat + interval)
    return {1, math.ceil(tat - now)}
  end
  local retry = math.ceil(tat - now - ahead)
  if retry < 1 then retry = 1 end
  return {0, retry}
end
local mine = tonumber(ARGV[7]) + 1
local ahead = 0
for i = 2, #KEYS - 1 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. (now - tonumber(ARGV[11])))
  if i < mine then ahead = ahead + redis.call('ZCARD', KEYS[i]) end
end
if tat - now <= interval then
  redis.call('ZREM', KEYS[mine], ARGV[5])
  keep(tat + interval)
  return {1, math.ceil(tat - now)}
end
redis.call('ZADD', KEYS[mine], 'NX', now, ARGV[5])
redis.call('PEXPIRE', KEYS[mine], tonumber(ARGV[11]) + 60000)
ahead = ahead + redis.call('ZRANK', KEYS[mine], ARGV[5])
local step = interval
if step < 1 then step = 1 end
local retry = math.ceil(tat - now + (ahead + 1) * step * tonumber(ARGV[10]))
return {0, retry}
`;

/**
 * KEYS[1] the schedule; KEYS[2] the pause (its end, ms, expiring then); ARGV[1] pause ms; ARGV[2] now
 * ('' = TIME); ARGV[3] the burst tolerance ms. The schedule moves to now + ms + tolerance unless it is
 * later already (see pause()); the pause key to now + ms unless it ends later already. Returns when the
 * pause ends (ms; 0 when none).
 */
const PAUSE_LUA = `
${luaNow(2)}
local ms = tonumber(ARGV[1])
local pauseEnd = now + ms + tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < pauseEnd then redis.call('SET', KEYS[1], string.format('%.17g', pauseEnd), 'PX', math.ceil(pauseEnd - now + 60000)) end
local ends = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if ms > 0 and now + ms > ends then
  ends = now + ms
  redis.call('SET', KEYS[2], string.format('%d', ends), 'PX', ms)
end
return ends
`;

/** KEYS[1] the pause: when it ends (ms), 0 when none. */
const PAUSED_UNTIL_LUA = `return tonumber(redis.call('GET', KEYS[1]) or '0') or 0`;

/** KEYS[1] a transfer's ledger record; ARGV[1] its calls field. Counts one call, never creating the record. */
const COUNT_LUA = `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBY', KEYS[1], ARGV[1], 1) end return 0`;

/** With no limit (CUSTODY_MAX_RPS=0), how often a process looks whether another one saw a 429. */
const PAUSE_REFRESH_MS = 250;

interface BudgetCommands {
  custodyBudgetCount(key: string, field: string): Promise<number>;
  custodyBudgetAdmit(...args: Array<string | number>): Promise<[number, number]>;
  custodyBudgetPause(key: string, pausedKey: string, ms: number, now: string, tolerance: number): Promise<number>;
  custodyBudgetPausedUntil(pausedKey: string): Promise<number>;
}

export interface BudgetObserver {
  /** A slot was taken by `klass` after waiting `waitMs` (0 when free at once). */
  admitted?(klass: BudgetClass, waitMs: number): void;
  /** `klass` was refused and told to come back after `retryAfterMs`. */
  refused?(klass: BudgetClass, retryAfterMs: number): void;
  /** A provider 429 paused every class for `ms`. */
  paused?(ms: number): void;
}

/** The local refusal of an opportunistic class, or of a reserving one whose wait exceeds its horizon. */
export function budgetRefusal(endpoint: CustodyEndpoint, klass: BudgetClass, retryAfterMs: number): CustodyError {
  return new CustodyError(CustodyErrorCode.RATE_LIMITED, `${endpoint}: request budget (CUSTODY_MAX_RPS) spent for class ${klass}`, {
    endpoint,
    retryAfterMs,
    // Refused here: nothing was written.
    maybeProcessed: false,
    budgetRefused: true,
  });
}

/** The budget in Redis; one per worker process, all sharing the same keys. */
export class RequestBudget {
  readonly #redis: Redis | Cluster;
  readonly #scheduleKey: string;
  /** A provider's pause: when it ends (ms, Redis clock), expiring then; read by every process. */
  readonly #pausedKey: string;
  readonly #waitingKeys: string[];
  readonly #params: BudgetParams;
  readonly #observer: BudgetObserver;

  readonly #clock: (() => number) | undefined;

  /** `clock`: tests only (the scripts read Redis TIME otherwise). */
  constructor(redis: Redis | Cluster, scheduleKey: string, requestsPerSecond: number, observer: BudgetObserver = {}, clock?: () => number) {
    this.#clock = clock;
    this.#redis = redis;
    this.#scheduleKey = scheduleKey;
    this.#pausedKey = `${scheduleKey}:paused`;
    this.#waitingKeys = OPPORTUNISTIC_CLASSES.map((klass) => `${scheduleKey}:waiting:${klass}`);
    this.#params = budgetParams(requestsPerSecond);
    this.#observer = observer;
    if (!('custodyBudgetAdmit' in redis)) {
      redis.defineCommand('custodyBudgetAdmit', { numberOfKeys: 2 + OPPORTUNISTIC_CLASSES.length, lua: ADMIT_LUA });
      redis.defineCommand('custodyBudgetPause', { numberOfKeys: 2, lua: PAUSE_LUA });
      redis.defineCommand('custodyBudgetPausedUntil', { numberOfKeys: 1, lua: PAUSED_UNTIL_LUA, readOnly: true });
      redis.defineCommand('custodyBudgetCount', { numberOfKeys: 1, lua: COUNT_LUA });
    }
  }

  /** With no limit: when the last 429 seen by any process ends (this process's clock), refreshed now and then. */
  #pausedUntil = 0;
  #pauseReadAt = 0;

  async #pausedFor(): Promise<number> {
    const now = Date.now();
    if (now >= this.#pauseReadAt) {
      this.#pauseReadAt = now + PAUSE_REFRESH_MS;
      const left = await this.#redis.pttl(this.#pausedKey);
      if (left > 0) this.#pausedUntil = Math.max(this.#pausedUntil, now + left);
    }
    return Math.max(0, this.#pausedUntil - Date.now());
  }

  /**
   * CUSTODY_MAX_RPS=0: no schedule to keep, so no Redis round trip per request. Only a provider's 429
   * (seen by any process, read at most every PAUSE_REFRESH_MS) stops requests; the call is still
   * counted on the transfer's record, without waiting for it.
   */
  async #takeUnlimited(
    endpoint: CustodyEndpoint,
    klass: BudgetClass,
    signal: AbortSignal | undefined,
    count?: { key: string; field: string },
  ): Promise<void> {
    const pausedFor = await this.#pausedFor();
    if (pausedFor > 0) {
      if (!RESERVING_CLASSES.has(klass) || pausedFor > this.#params.horizonMs) {
        // The reserving classes come back first: the others a little after the pause's end.
        const retryAfterMs = pausedFor + (OPPORTUNISTIC_CLASSES.indexOf(klass) + 1) * 100;
        this.#observer.refused?.(klass, retryAfterMs);
        throw budgetRefusal(endpoint, klass, retryAfterMs);
      }
      await this.#sleep(endpoint, pausedFor, signal);
    }
    this.#observer.admitted?.(klass, pausedFor);
    if (count) (this.#redis as unknown as BudgetCommands).custodyBudgetCount(count.key, count.field).catch(() => {});
  }

  async #sleep(endpoint: CustodyEndpoint, ms: number, signal: AbortSignal | undefined): Promise<void> {
    // A reserved slot goes unused if the caller's deadline ends the wait: harmless.
    await sleep(ms, undefined, { signal }).catch(() => {
      throw new CustodyError(CustodyErrorCode.TIMEOUT, `${endpoint}: deadline reached while waiting for a request slot`, {
        endpoint,
        maybeProcessed: false,
      });
    });
  }

  /**
   * Asks for a slot; never waits. `count`: the transfer's ledger record and field where the call is
   * counted when admitted (same hash slot as the budget's keys: one QUEUE_PREFIX).
   */
  async ask(klass: BudgetClass, member: string, count?: { key: string; field: string }, dispensed = false): Promise<Admission> {
    const { intervalMs, burst, horizonMs } = this.#params;
    const reserving = RESERVING_CLASSES.has(klass);
    const [ok, ms] = await (this.#redis as unknown as BudgetCommands).custodyBudgetAdmit(
      this.#scheduleKey,
      ...this.#waitingKeys,
      count?.key ?? `${this.#scheduleKey}:no-record`,
      intervalMs,
      burst,
      horizonMs,
      klass,
      member,
      reserving ? '1' : '0',
      reserving ? 0 : OPPORTUNISTIC_CLASSES.indexOf(klass) + 1,
      count?.field ?? '',
      this.#clock ? String(this.#clock()) : '',
      COME_BACK_SPREAD,
      WAITING_LAPSE_MS,
      dispensed ? '1' : '0',
      DISPENSED_AHEAD,
    );
    return ok === 1 ? { admitted: true, waitMs: Number(ms) } : { admitted: false, retryAfterMs: Number(ms) };
  }

  /**
   * Takes a slot for one request, sleeping for a reserved one; throws CUSTODY_RATE_LIMITED (local,
   * nothing sent) when refused, and CUSTODY_TIMEOUT (nothing sent) when `signal` ends the wait.
   */
  async take(
    endpoint: CustodyEndpoint,
    klass: BudgetClass,
    member: string,
    signal?: AbortSignal,
    count?: { key: string; field: string },
    dispensed = false,
  ): Promise<void> {
    if (this.#params.intervalMs === 0 && !this.#clock) return this.#takeUnlimited(endpoint, klass, signal, count);
    const answer = await this.ask(klass, member, count, dispensed);
    if (!answer.admitted) {
      this.#observer.refused?.(klass, answer.retryAfterMs);
      throw budgetRefusal(endpoint, klass, answer.retryAfterMs);
    }
    this.#observer.admitted?.(klass, answer.waitMs);
    if (answer.waitMs > 0) await this.#sleep(endpoint, answer.waitMs, signal);
  }

  /**
   * A provider's 429 with `Retry-After`: every class of every process stops for `ms` (already capped
   * at CUSTODY_MAX_PAUSE). Returns when the pause ends (ms, Redis clock): a longer one already running
   * is kept.
   */
  async pause(ms: number): Promise<number> {
    const wait = Math.max(0, Math.ceil(ms));
    if (this.#params.intervalMs === 0 && wait > 0) this.#pausedUntil = Math.max(this.#pausedUntil, Date.now() + wait);
    const ends = await (this.#redis as unknown as BudgetCommands).custodyBudgetPause(
      this.#scheduleKey,
      this.#pausedKey,
      wait,
      this.#clock ? String(this.#clock()) : '',
      this.#params.intervalMs * (this.#params.burst - 1),
    );
    this.#observer.paused?.(ms);
    return Number(ends);
  }

  /** When the pause a provider's 429 imposed ends (ms, Redis clock; 0 when none): the same for every process. */
  async pausedUntil(): Promise<number> {
    return Number(await (this.#redis as unknown as BudgetCommands).custodyBudgetPausedUntil(this.#pausedKey));
  }

  get params(): Readonly<BudgetParams> {
    return this.#params;
  }
}

export function budgetParams(requestsPerSecond: number): BudgetParams {
  if (requestsPerSecond <= 0) return { intervalMs: 0, burst: 1, horizonMs: MAX_RATE_LIMIT_WAIT_MS };
  return { intervalMs: 1000 / requestsPerSecond, burst: Math.max(1, Math.ceil(requestsPerSecond / 10)), horizonMs: MAX_RATE_LIMIT_WAIT_MS };
}
