import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../redis.ts';

/**
 * The ledger's epoch: an identity written once into Redis, so that a worker can tell that Redis lost
 * its data (a node promoted empty, a flush). Everything a worker knows about which transfers it sent
 * lives in Redis; a Redis that comes back empty looks like one where nothing was ever sent, and a
 * producer that re-enqueues what showed no event would get every transfer sent again.
 *
 * Each process learns the epoch at start-up (or creates the first one: LEDGER_INIT=auto) and keeps it
 * in memory. The transition that records a send in flight (transition.lua) names that epoch and is
 * refused under any other: the process then declares the ledger lost (`lost`), which writes a new
 * epoch with a recovery window (LEDGER_RECOVERY_WINDOW) in which every transfer is looked up upstream
 * before its first send. Processes that meet the new epoch adopt it; one that still knows the old
 * epoch and finds a newer one that does not record the loss (another process initialised it on the
 * empty Redis after restarting) records it there and starts the window.
 *
 * Residual risk: when every process restarts onto an empty Redis before any of them tried a send, no
 * process remembers the old epoch. With LEDGER_INIT=auto the first one then initialises a new epoch
 * and sends without looking; with `manual` nothing is sent until an operator runs `ledger init`.
 */

/**
 * KEYS[1] the epoch hash. ARGV[1] mode: read | init | lost | declare | accept; ARGV[2] the epoch the
 * caller knows (lost); ARGV[3] a new id (init, lost, declare); ARGV[4] the recovery window, ms (lost,
 * declare); ARGV[5] the clock, ms ('' = Redis TIME); ARGV[6] the highest tick the caller saw under the
 * epoch it knows ('' = none; lost); ARGV[7] the caller's writer id ('' = none); ARGV[8] the tick of that
 * writer's last change it knows was made under the epoch it knows (lost). Fields: id, createdAt,
 * recoveryUntil (ms, 0 = none), supersedes (ids of lost epochs, comma-separated), lostAt, acceptedAt,
 * tick (advanced by every transition: transition.lua), `w:<writer>` (the tick of that writer's last
 * change: transition.lua), behind (set by a transition that found the ledger behind its caller, until
 * a loss is declared).
 *
 * `lost` declares a loss (a new epoch with a recovery window that supersedes every id it replaces)
 * when the ledger has no epoch, holds one that does not supersede the caller's, or holds the caller's
 * but went back in time (a lagging replica promoted, a snapshot or backup restored): with a tick below
 * the one the caller saw, without the caller's own last change (its `w:` field below the caller's
 * count), or marked `behind` by a transition that found either. `declare` does it whatever the ledger
 * holds (`ledger init --after-loss`). A declaration drops `behind` and every `w:` field (the new epoch
 * starts every writer's count again).
 * Returns {id or false, createdAt, recoveryUntil, supersedes, declared (1 when this call recorded a
 * loss or created the first epoch), now, lostAt (0: never), tick, behind ('1' or ''), the caller's
 * writer's tick ('' = none)}.
 */
const EPOCH_LUA = `
local now
if ARGV[5] ~= '' then now = tonumber(ARGV[5]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local mode = ARGV[1]
local writerField = 'w:' .. ARGV[7]
local e = redis.call('HMGET', KEYS[1], 'id', 'createdAt', 'recoveryUntil', 'supersedes', 'lostAt', 'tick', 'behind', writerField)
local declared = 0
local function listed(id)
  for one in string.gmatch(e[4] or '', '[^,]+') do
    if one == id then return true end
  end
  return false
end
-- A new epoch that replaces the ledger's (if any) and the caller's (if any): events of the new life
-- never share an epoch with those of a life the ledger forgot, or went back to.
local function supersede(known)
  local ids = {}
  for one in string.gmatch(e[4] or '', '[^,]+') do ids[#ids + 1] = one end
  if e[1] then ids[#ids + 1] = e[1] end
  if known ~= '' and known ~= e[1] and not listed(known) then ids[#ids + 1] = known end
  local untilMs = math.max(tonumber(e[3] or '0'), now + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], 'id', ARGV[3], 'createdAt', now, 'recoveryUntil', untilMs,
    'supersedes', table.concat(ids, ','), 'lostAt', now, 'tick', tonumber(e[6] or '0'))
  local drop = {'acceptedAt', 'behind'}
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.sub(field, 1, 2) == 'w:' then drop[#drop + 1] = field end
  end
  redis.call('HDEL', KEYS[1], unpack(drop))
  declared = 1
end
if mode == 'init' and not e[1] then
  redis.call('HSET', KEYS[1], 'id', ARGV[3], 'createdAt', now, 'recoveryUntil', 0, 'tick', 0)
  declared = 1
elseif mode == 'lost' then
  local known = ARGV[2]
  local seen = tonumber(ARGV[6]) or 0
  local mine = tonumber(ARGV[8]) or 0
  local wentBack = e[7] or tonumber(e[6] or '0') < seen or (ARGV[7] ~= '' and mine > 0 and (tonumber(e[8] or '0') < mine))
  if not e[1] or (e[1] ~= known and not listed(known)) or (e[1] == known and wentBack) then
    supersede(known)
  end
elseif mode == 'declare' then
  supersede('')
elseif mode == 'accept' and e[1] then
  redis.call('HSET', KEYS[1], 'recoveryUntil', 0, 'acceptedAt', now)
end
e = redis.call('HMGET', KEYS[1], 'id', 'createdAt', 'recoveryUntil', 'supersedes', 'lostAt', 'tick', 'behind', writerField)
return {e[1], e[2] or '0', e[3] or '0', e[4] or '', declared, tostring(now), e[5] or '0', e[6] or '0', e[7] or '', e[8] or ''}`;

type EpochReply = [string | null, string, string, string, number, string, string, string, string, string];

interface EpochCommands {
  ledgerEpoch(
    key: string,
    mode: string,
    known: string,
    newId: string,
    windowMs: number,
    clock: string,
    seen: string,
    writer: string,
    mine: string,
  ): Promise<EpochReply>;
}

/** The epoch as Redis holds it. */
export interface EpochState {
  /** undefined: the ledger has no epoch (never initialised, or lost and not yet noticed). */
  id: string | undefined;
  createdAt: number;
  /** While the ledger's clock is before this (ms), every first send is preceded by a lookup. */
  recoveryUntil: number;
  /** Epochs this one replaced because the ledger was found lost. */
  supersedes: string[];
  /** When the last loss was recorded (ms, ledger clock; 0: never). */
  lostAt: number;
  /** The ledger's clock when this was read (ms). */
  now: number;
  /** How many transitions the ledger has made (transition.lua advances it): it never goes back unless the ledger did. */
  tick: number;
  /** A transition found the ledger behind its caller (transition.lua); cleared by the declaration of the loss. */
  behind: boolean;
  /** The tick of this process's last change as the ledger holds it (0: none, or no writer id). */
  ownTick: number;
}

export type LedgerInit = 'auto' | 'manual';

export interface EpochOptions {
  /** LEDGER_INIT: whether a ledger without an epoch initialises itself (`auto`) or waits for an operator. */
  init: LedgerInit;
  /** LEDGER_RECOVERY_WINDOW, ms. */
  recoveryWindowMs: number;
  /** The ledger's test clock, when there is one (else Redis TIME). */
  clock?: (() => number) | undefined;
  /** This process declared the ledger lost (once per loss, in the process that recorded it). */
  onLost?: (lost: { previous: string; state: EpochState }) => void;
  /** The epoch this process knows changed, or its recovery window did (for the gauge). */
  onState?: (state: EpochState) => void;
  /** After this process wrote an epoch: wait for the replicas to acknowledge it (like a send). */
  replicate?: () => Promise<void>;
  /**
   * Mark this process's own changes in the ledger (`w:<writer>` in the epoch hash, the tick of its last
   * change), so that a ledger that went back in time before one of them is noticed however far other
   * processes' changes have advanced the tick since (the worker; a one-shot CLI needs none).
   */
  writer?: boolean;
}

function newEpochId(): string {
  return randomBytes(6).toString('hex');
}

export class LedgerEpoch {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #options: EpochOptions;
  #known: string | undefined;
  #state: EpochState | undefined;
  /** The highest tick this process saw under the epoch it knows: what the ledger may never fall below. */
  #seen = 0;
  /** This process's writer id ('' = it marks nothing): see EpochOptions.writer. */
  readonly #writer: string;
  /** The tick of this process's last change under the known epoch (0: none yet): its `w:` field may never be below it. */
  #mine = 0;

  constructor(redis: RedisClient, key: string, options: EpochOptions) {
    this.#redis = redis;
    this.#key = key;
    this.#options = options;
    this.#writer = options.writer === true ? randomBytes(8).toString('hex') : '';
    if (!('ledgerEpoch' in redis)) redis.defineCommand('ledgerEpoch', { numberOfKeys: 1, lua: EPOCH_LUA });
  }

  /** The epoch this process knows ('' when none): what its sends in flight are recorded under. */
  get known(): string {
    return this.#known ?? '';
  }

  /** The highest tick seen under the known epoch (0 when none): every transition is refused below it. */
  get seen(): number {
    return this.#seen;
  }

  /** This process's writer id ('' when it marks nothing). */
  get writer(): string {
    return this.#writer;
  }

  /** The tick of this process's last change under the known epoch (0 when none). */
  get mine(): number {
    return this.#mine;
  }

  /** The last state read (undefined before the first read). */
  get state(): EpochState | undefined {
    return this.#state;
  }

  /**
   * At start-up: adopts the ledger's epoch, or (LEDGER_INIT=auto) initialises the first one. With
   * `manual` and no epoch, the process runs but records no send until an operator runs `ledger init`.
   */
  async start(): Promise<EpochState> {
    return this.#options.init === 'auto' ? this.init() : this.#adopt(await this.#call('read'));
  }

  /** Writes the first epoch unless there is one (operator: `ledger init`; LEDGER_INIT=auto at start-up). */
  async init(): Promise<EpochState> {
    const state = await this.#call('init');
    return this.#adopt(state.declared ? await this.#replicated(state) : state);
  }

  /**
   * An operator declares the ledger lost (`ledger init --after-loss`): a new epoch with a recovery
   * window, superseding the one the ledger holds (if any), so that every transfer is looked up before
   * its first send. For a Redis that came back empty, or older, after every process restarted onto it.
   */
  async declareLost(): Promise<EpochState> {
    const previous = (await this.#call('read')).id ?? '';
    const state = await this.#replicated(await this.#call('declare'));
    this.#options.onLost?.({ previous, state });
    return this.#adopt(state);
  }

  /** An operator ends the recovery window early (`ledger accept-epoch`). */
  async accept(): Promise<EpochState> {
    return this.#adopt(await this.#call('accept'));
  }

  /**
   * Reads the epoch again: its recovery window may have been started or ended by another process.
   * Only the window is taken over; an epoch other than the one this process knows is never adopted
   * here (the next send in flight is refused under it, and `mismatch` decides what that means).
   */
  async refresh(): Promise<EpochState> {
    const state = await this.#call('read');
    return state.id === this.#known ? this.#adopt(state) : state;
  }

  /** The epoch as Redis holds it now, changing nothing this process knows (for the metrics). */
  async peek(): Promise<EpochState> {
    return this.#call('read');
  }

  /**
   * What a transition's reply said of the ledger (its epoch and tick). The same epoch: the tick seen
   * rises. Another one: the ledger was lost, went back to an older epoch, or another process declared
   * a loss; `mismatch` finds out which (resolves with whether it had to).
   */
  async observe(id: string, tick: number): Promise<boolean> {
    if (this.#known !== undefined && id === this.#known) {
      if (tick > this.#seen) this.#seen = tick;
      return false;
    }
    await this.mismatch();
    return true;
  }

  /** A change of this process's was made (its reply named this epoch and tick): the ledger must keep it. */
  madeChange(id: string, tick: number): void {
    if (this.#writer !== '' && id === this.#known && tick > this.#mine) this.#mine = tick;
  }

  /**
   * Compares the ledger with what this process saw (a periodic check, so that a ledger that went back
   * in time is noticed even while no transition runs): an epoch other than the known one, or the known
   * one with a tick below the one seen, is dealt with by `mismatch`. Resolves with the state after.
   */
  async check(): Promise<EpochState> {
    const state = await this.#call('read');
    if (this.#known === undefined || state.id !== this.#known || this.#wentBack(state)) return this.mismatch();
    return this.#adopt(state);
  }

  /**
   * The ledger no longer holds what this process knew: a send in flight (or any transition) was
   * refused under its epoch, or a reply or `check` showed another epoch or a tick gone back. With no
   * epoch known yet: adopt the ledger's, or initialise it (auto). Otherwise the ledger lost what this
   * process knew it held: record the loss (a new epoch with a recovery window, superseding the lost
   * one) and adopt the result; when another process recorded it already, adopt that.
   */
  async mismatch(): Promise<EpochState> {
    if (this.#known === undefined) return this.start();
    const previous = this.#known;
    const state = await this.#call('lost', previous, this.#seen);
    if (!state.declared) return this.#adopt(state);
    const replicated = await this.#replicated(state);
    this.#options.onLost?.({ previous, state: replicated });
    return this.#adopt(replicated);
  }

  /**
   * Runs `check` every `everyMs` until the returned stop is called (the worker's, so that a ledger
   * that went back in time is noticed within that long while any process that saw the newer one
   * lives, whether or not it makes a transition). A failed check is reported and tried again later.
   */
  watch(everyMs: number, onError: (error: unknown) => void): () => void {
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      this.check()
        .catch(onError)
        .finally(() => {
          running = false;
        });
    }, everyMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  async #replicated(state: EpochState & { declared: boolean }): Promise<EpochState & { declared: boolean }> {
    await this.#options.replicate?.();
    return state;
  }

  /** The known epoch, held with less than this process saw of it or made in it. */
  #wentBack(state: EpochState): boolean {
    return state.behind || state.tick < this.#seen || (this.#mine > 0 && state.ownTick < this.#mine);
  }

  #adopt(state: EpochState): EpochState {
    // A new epoch starts its own count of what was seen (and made); the same one only ever raises it.
    if (state.id !== this.#known) {
      this.#seen = state.tick;
      this.#mine = 0;
    } else this.#seen = Math.max(this.#seen, state.tick);
    this.#known = state.id;
    this.#state = state;
    this.#options.onState?.(state);
    return state;
  }

  async #call(mode: 'read' | 'init' | 'lost' | 'declare' | 'accept', known = '', seen = 0): Promise<EpochState & { declared: boolean }> {
    const clock = this.#options.clock?.();
    const [id, createdAt, recoveryUntil, supersedes, declared, now, lostAt, tick, behind, ownTick] = await (
      this.#redis as unknown as EpochCommands
    ).ledgerEpoch(
      this.#key,
      mode,
      known,
      newEpochId(),
      this.#options.recoveryWindowMs,
      clock === undefined ? '' : String(clock),
      String(seen),
      this.#writer,
      String(this.#mine),
    );
    return {
      id: id ?? undefined,
      createdAt: Number(createdAt),
      recoveryUntil: Number(recoveryUntil),
      supersedes: supersedes === '' ? [] : supersedes.split(','),
      lostAt: Number(lostAt),
      now: Number(now),
      tick: Number(tick),
      behind: behind === '1',
      ownTick: Number(ownTick || '0'),
      declared: Number(declared) === 1,
    };
  }
}
