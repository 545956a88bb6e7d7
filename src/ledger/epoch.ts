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
 * KEYS[1] the epoch hash. ARGV[1] mode: read | init | lost | accept; ARGV[2] the epoch the caller knows
 * (lost); ARGV[3] a new id (init, lost); ARGV[4] the recovery window, ms (lost); ARGV[5] the clock, ms
 * ('' = Redis TIME). Fields: id, createdAt, recoveryUntil (ms, 0 = none), supersedes (ids of lost
 * epochs, comma-separated), lostAt, acceptedAt.
 * Returns {id or false, createdAt, recoveryUntil, supersedes, declared (1 when this call recorded a
 * loss or created the first epoch), now, lostAt (0: never)}.
 */
const EPOCH_LUA = `
local now
if ARGV[5] ~= '' then now = tonumber(ARGV[5]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local mode = ARGV[1]
local e = redis.call('HMGET', KEYS[1], 'id', 'createdAt', 'recoveryUntil', 'supersedes', 'lostAt')
local declared = 0
if mode == 'init' and not e[1] then
  redis.call('HSET', KEYS[1], 'id', ARGV[3], 'createdAt', now, 'recoveryUntil', 0)
  declared = 1
elseif mode == 'lost' then
  local known = ARGV[2]
  if not e[1] then
    redis.call('HSET', KEYS[1], 'id', ARGV[3], 'createdAt', now, 'recoveryUntil', now + tonumber(ARGV[4]),
      'supersedes', known, 'lostAt', now)
    declared = 1
  elseif e[1] ~= known then
    local supersedes = e[4] or ''
    local listed = false
    for id in string.gmatch(supersedes, '[^,]+') do
      if id == known then listed = true end
    end
    if not listed then
      if supersedes ~= '' then supersedes = supersedes .. ',' end
      local untilMs = math.max(tonumber(e[3] or '0'), now + tonumber(ARGV[4]))
      redis.call('HSET', KEYS[1], 'supersedes', supersedes .. known, 'recoveryUntil', untilMs, 'lostAt', now)
      declared = 1
    end
  end
elseif mode == 'accept' and e[1] then
  redis.call('HSET', KEYS[1], 'recoveryUntil', 0, 'acceptedAt', now)
end
e = redis.call('HMGET', KEYS[1], 'id', 'createdAt', 'recoveryUntil', 'supersedes', 'lostAt')
return {e[1], e[2] or '0', e[3] or '0', e[4] or '', declared, tostring(now), e[5] or '0'}`;

type EpochReply = [string | null, string, string, string, number, string, string];

interface EpochCommands {
  ledgerEpoch(key: string, mode: string, known: string, newId: string, windowMs: number, clock: string): Promise<EpochReply>;
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

  constructor(redis: RedisClient, key: string, options: EpochOptions) {
    this.#redis = redis;
    this.#key = key;
    this.#options = options;
    if (!('ledgerEpoch' in redis)) redis.defineCommand('ledgerEpoch', { numberOfKeys: 1, lua: EPOCH_LUA });
  }

  /** The epoch this process knows ('' when none): what its sends in flight are recorded under. */
  get known(): string {
    return this.#known ?? '';
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
   * A send in flight was refused under this process's epoch. With no epoch known yet: adopt the
   * ledger's, or initialise it (auto). Otherwise the ledger lost what this process knew it held:
   * record the loss (a new epoch with a recovery window, or the window on the epoch another process
   * made on the empty ledger) and adopt the result.
   */
  async mismatch(): Promise<EpochState> {
    if (this.#known === undefined) return this.start();
    const previous = this.#known;
    const state = await this.#call('lost', previous);
    if (!state.declared) return this.#adopt(state);
    const replicated = await this.#replicated(state);
    this.#options.onLost?.({ previous, state: replicated });
    return this.#adopt(replicated);
  }

  async #replicated(state: EpochState & { declared: boolean }): Promise<EpochState & { declared: boolean }> {
    await this.#options.replicate?.();
    return state;
  }

  #adopt(state: EpochState): EpochState {
    this.#known = state.id;
    this.#state = state;
    this.#options.onState?.(state);
    return state;
  }

  async #call(mode: 'read' | 'init' | 'lost' | 'accept', known = ''): Promise<EpochState & { declared: boolean }> {
    const clock = this.#options.clock?.();
    const [id, createdAt, recoveryUntil, supersedes, declared, now, lostAt] = await (this.#redis as unknown as EpochCommands).ledgerEpoch(
      this.#key,
      mode,
      known,
      newEpochId(),
      this.#options.recoveryWindowMs,
      clock === undefined ? '' : String(clock),
    );
    return {
      id: id ?? undefined,
      createdAt: Number(createdAt),
      recoveryUntil: Number(recoveryUntil),
      supersedes: supersedes === '' ? [] : supersedes.split(','),
      lostAt: Number(lostAt),
      now: Number(now),
      declared: Number(declared) === 1,
    };
  }
}
