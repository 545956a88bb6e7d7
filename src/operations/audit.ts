import { ISO_TIME_LUA } from '../ledger/request.ts';
import type { RedisClient } from '../redis.ts';

/** Who asks for an operator action, and through which surface (docs/contract.md, "Operator console and audit"). */
export interface Actor {
  /** The user: a console or dashboard user, or the CLI's `--by` (default: the operating-system user). */
  name: string;
  role: 'viewer' | 'operator';
  via: 'console' | 'api' | 'cli';
  /** The peer's address (HTTP); empty for the CLI. */
  remote?: string;
}

/**
 * Every operator action and every outcome its audit entry (and `custody_console_actions_total`) can
 * name. `forbidden`: the actor's role may not do it; `not-replicated`: decided on the primary, fewer
 * replicas acknowledged it in time; `error`: the action failed on its way (Redis, a bug) and may or may
 * not have taken effect. The others are the action's own answers.
 */
export const ACTION_OUTCOMES = {
  cancel: ['cancelled', 'too-late', 'already-ended', 'version-mismatch', 'not-replicated', 'forbidden', 'error'],
  resolve: [
    'resolved',
    'not-found',
    'wrong-state',
    'lease-held',
    'refused',
    'txid-required',
    'no-provider',
    'provider-disagrees',
    'provider-found',
    'provider-unsure',
    'provider-unreachable',
    'not-replicated',
    'forbidden',
    'error',
  ],
  recheck: ['promoted', 'added', 'polling', 'not-found', 'wrong-state', 'forbidden', 'error'],
  'accept-epoch': ['accepted', 'no-epoch', 'not-replicated', 'forbidden', 'error'],
} as const;

export type Action = keyof typeof ACTION_OUTCOMES;
export type ActionOutcome<A extends Action = Action> = (typeof ACTION_OUTCOMES)[A][number];

/** Every action with every outcome it can have: the series that exist from start-up. */
export function knownActionOutcomes(): Array<{ action: Action; outcome: ActionOutcome }> {
  return (Object.keys(ACTION_OUTCOMES) as Action[]).flatMap((action) =>
    ACTION_OUTCOMES[action].map((outcome) => ({ action, outcome: outcome as ActionOutcome })),
  );
}

/** One entry of the audit stream, every field a string (docs/contract.md section 10). */
export interface AuditEntry {
  /** Redis's clock when the entry was written, ISO 8601. */
  at: string;
  user: string;
  role: Actor['role'];
  via: Actor['via'];
  remote: string;
  action: Action;
  /** Empty for an action on no transfer (accept-epoch). */
  sequenceId: string;
  reason: string;
  outcome: ActionOutcome;
  /** `true` when the actor asked to skip the action's check (resolve with force), else `false`. */
  forced: 'true' | 'false';
}

/**
 * KEYS[1] the audit stream; ARGV[1] AUDIT_RETENTION (ms); ARGV[2..] the entry's fields but `at`.
 * Appends one entry stamped with Redis's clock (TIME, so every process's entries are ordered by one
 * clock and the stream id and `at` agree) and trims the entries older than the retention by id
 * (`MINID ~`: whole stream nodes, so a few older entries may stay a little longer; never by count, so
 * a burst of actions never pushes an entry out before its time). Returns the entry's stream id.
 */
const AUDIT_APPEND_LUA = `${ISO_TIME_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local minId = now - tonumber(ARGV[1])
if minId < 0 then minId = 0 end
return redis.call('XADD', KEYS[1], 'MINID', '~', minId, '*', 'at', isoTime(now), unpack(ARGV, 2))`;

interface AuditCommands {
  auditAppend(key: string, retentionMs: number, ...fields: string[]): Promise<string>;
}

/** The audit stream `<QUEUE_PREFIX>:audit`: written here only, one entry per operator action. */
export class AuditLog {
  readonly #redis: RedisClient;
  readonly #key: string;
  readonly #retentionMs: number;

  constructor(redis: RedisClient, key: string, retentionMs: number) {
    this.#redis = redis;
    this.#key = key;
    this.#retentionMs = retentionMs;
    if (!('auditAppend' in redis)) redis.defineCommand('auditAppend', { numberOfKeys: 1, lua: AUDIT_APPEND_LUA });
  }

  /** Appends one entry (`at` is Redis's clock); resolves with its stream id. */
  async append(entry: Omit<AuditEntry, 'at'>): Promise<string> {
    const fields: Array<[keyof AuditEntry, string]> = [
      ['user', entry.user],
      ['role', entry.role],
      ['via', entry.via],
      ['remote', entry.remote],
      ['action', entry.action],
      ['sequenceId', entry.sequenceId],
      ['reason', entry.reason],
      ['outcome', entry.outcome],
      ['forced', entry.forced],
    ];
    const id = await (this.#redis as unknown as AuditCommands).auditAppend(this.#key, this.#retentionMs, ...fields.flat());
    return String(id);
  }
}

/** An audit entry with its stream id (the stream's order: newest has the highest). */
export interface StoredAuditEntry extends AuditEntry {
  id: string;
}

export interface AuditPage {
  items: StoredAuditEntry[];
  /** Give it as `before` for the next (older) page; null at the oldest entry. */
  next: string | null;
}

/** The most entries AuditReader.forTransfer reads looking for one transfer's (the stream has no index by transfer). */
export const AUDIT_SCAN_MAX = 10_000;
const SCAN_BATCH = 500;
const STREAM_ID = /^\d+-\d+$/;

/**
 * Reads of the audit stream: newest first, by page, and one transfer's entries. Reads only; the
 * entries are AuditLog's.
 */
export class AuditReader {
  readonly #redis: RedisClient;
  readonly #key: string;

  constructor(redis: RedisClient, key: string) {
    this.#redis = redis;
    this.#key = key;
  }

  /** Whether `text` can be a page's `before` (a stream id this reader gave). */
  static isCursor(text: string): boolean {
    return STREAM_ID.test(text);
  }

  /** Up to `limit` entries older than `before` (a stream id; unset: the newest), newest first. */
  async page(limit: number, before?: string): Promise<AuditPage> {
    const flat = await this.#redis.xrevrange(this.#key, before === undefined ? '+' : `(${before}`, '-', 'COUNT', limit + 1);
    const items = flat.slice(0, limit).map(([id, fields]) => toEntry(id, fields));
    return { items, next: flat.length > limit ? items[items.length - 1]!.id : null };
  }

  /**
   * The entries naming `sequenceId`, oldest first, written at or after `since` (ms, Redis time: the
   * transfer's creation, before which no action on it can have found it). A bounded scan, newest
   * first, of at most AUDIT_SCAN_MAX entries: `complete` is false when older entries in the window
   * were left unread.
   */
  async forTransfer(
    sequenceId: string,
    since: number,
    maxScanned = AUDIT_SCAN_MAX,
  ): Promise<{ entries: StoredAuditEntry[]; complete: boolean }> {
    const entries: StoredAuditEntry[] = [];
    let upper = '+';
    let scanned = 0;
    while (scanned < maxScanned) {
      const count = Math.min(SCAN_BATCH, maxScanned - scanned);
      const flat = await this.#redis.xrevrange(this.#key, upper, String(Math.max(0, since)), 'COUNT', count);
      scanned += flat.length;
      for (const [id, fields] of flat) {
        const entry = toEntry(id, fields);
        if (entry.sequenceId === sequenceId) entries.push(entry);
      }
      if (flat.length < count) return { entries: entries.reverse(), complete: true };
      upper = `(${flat[flat.length - 1]![0]}`;
    }
    return { entries: entries.reverse(), complete: false };
  }
}

function toEntry(id: string, fields: string[]): StoredAuditEntry {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) record[fields[i]!] = fields[i + 1]!;
  return {
    id,
    at: record.at ?? '',
    user: record.user ?? '',
    role: record.role as AuditEntry['role'],
    via: record.via as AuditEntry['via'],
    remote: record.remote ?? '',
    action: record.action as Action,
    sequenceId: record.sequenceId ?? '',
    reason: record.reason ?? '',
    outcome: record.outcome as ActionOutcome,
    forced: record.forced === 'true' ? 'true' : 'false',
  };
}
