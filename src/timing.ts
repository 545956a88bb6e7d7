/**
 * Every timing constant of the worker in one place, with its arithmetic written out. Durations a user
 * sets (CUSTODY_TIMEOUT, TRACK_POLL_*, …) come from the config; what is derived from them is derived
 * here, so a bound stated in a comment elsewhere can be checked against one file.
 */

/**
 * A backoff profile. A delay is capped exponential with "equal jitter": half of it fixed, half random,
 * so retries of many jobs spread out but never come sooner than half the nominal delay.
 */
export interface BackoffProfile {
  readonly name: string;
  readonly baseMs: number;
  readonly maxMs: number;
}

/** Submission steps (travel-rule lookup, sendTransaction, resolving an unknown send): 1 s, 2 s, 4 s … 60 s. */
export const SUBMIT_RETRY: BackoffProfile = { name: 'submit-retry', baseMs: 1_000, maxMs: 60_000 };

/** Upstream errors while polling get-transfer; the poll interval itself comes from TRACK_POLL_MIN/MAX. */
export const TRACK_ERROR_RETRY: BackoffProfile = { name: 'track-error-retry', baseMs: 2_000, maxMs: 60_000 };

/**
 * Unexpected errors (a bug, Redis gone mid-step) in any handler. Every step is resumable and a job
 * never holds the only copy of a transfer's fate, so such a job is retried, never failed: a transfer
 * must not be left without its terminal event because of a transient fault.
 */
export const UNEXPECTED_ERROR_RETRY: BackoffProfile = { name: 'unexpected-error-retry', baseMs: 1_000, maxMs: 30_000 };

export function backoffDelay(profile: BackoffProfile, attempt: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, Math.min(attempt - 1, 30));
  const nominal = Math.min(profile.maxMs, profile.baseMs * 2 ** exponent);
  return Math.round(nominal / 2 + (nominal / 2) * random());
}

/**
 * The tracking poll's schedule (TRACK_POLL_MIN, TRACK_POLL_MAX). The delay before the next poll grows
 * with the transfer's age since submission: `age + TRACK_POLL_MIN`, capped at TRACK_POLL_MAX. Polls so
 * land near min, 3 min, 7 min, 15 min … after submission, the capped exponential backoff of doubling
 * delays, jittered like backoffDelay (between half and all of the nominal delay). It counts nothing:
 * a run the request budget turned away, a tracker reconciliation recreated, a restart or a duplicate
 * tracker neither moves the schedule on nor starts it over, since the age is the ledger's.
 */
export function trackPollProfile(minMs: number, maxMs: number): BackoffProfile {
  return { name: 'track-poll', baseMs: minMs, maxMs: Math.max(minMs, maxMs) };
}

export function trackPollDelay(profile: BackoffProfile, ageMs: number, random: () => number = Math.random): number {
  const nominal = Math.min(profile.maxMs, Math.max(0, ageMs) + profile.baseMs);
  return Math.round(nominal / 2 + (nominal / 2) * random());
}

/** Scales a profile, e.g. for tests that want milliseconds instead of seconds (SUBMIT_RETRY_BASE). */
export function withBase(profile: BackoffProfile, baseMs: number, maxMs = profile.maxMs): BackoffProfile {
  return { ...profile, baseMs, maxMs: Math.max(baseMs, maxMs) };
}

// ---------------------------------------------------------------------------------------------------
// The send lease.

/**
 * The least TOMBSTONE_RETENTION the worker starts with (config.ts): 365 days. A transfer's tombstone
 * lives RETENTION + TOMBSTONE_RETENTION, and it alone keeps an ended sequenceId (a cancelled one too)
 * from being sent again once RETENTION removed its record; a producer's retry or replay older than
 * that sends it. A year outlasts any retry or replay a producer is expected to make; ledgers built in
 * code (tests) pass `tombstoneRetentionMs` to the Ledger directly and are not bound by it.
 */
export const TOMBSTONE_RETENTION_FLOOR_MS = 365 * 24 * 3_600_000;

/** Longest local sleep for a CUSTODY_MAX_RPS slot; beyond it the call fails as rate limited. */
export const MAX_RATE_LIMIT_WAIT_MS = 5_000;

/**
 * CUSTODY_MAX_PAUSE's default (the config parses `10m`; test/fuzz/config.test.ts holds the two
 * together): a provider's 429 pauses every request class for its Retry-After, at most this long, so
 * a broken header cannot park every transfer for days. Clients built without the config use it too.
 */
export const DEFAULT_MAX_PAUSE_MS = 10 * 60_000;

/**
 * What the lease adds to the send deadline: the Redis round trip that records the answer, and event-loop
 * or GC pauses between the deadline firing and that write. A pause longer than this is survivable for
 * the ledger: the late writer is no longer the lease's owner once someone else took it, so its
 * transition is refused. The send itself is the one act outside Redis, which Redis cannot refuse: see
 * sendWriteWindowMs.
 */
export const SEND_LEASE_MARGIN_MS = 10_000;

/**
 * One overall deadline over a whole sendTransaction call, started before the command that takes the
 * lease is issued (so it ends before the lease does, whenever that command's reply arrives):
 *
 *     rate-limit wait (≤ MAX_RATE_LIMIT_WAIT_MS)
 *   + token request + send                   (each ≤ CUSTODY_TIMEOUT)
 *   + after a 401: token request + send      (share what is left)
 *   = MAX_RATE_LIMIT_WAIT_MS + 2 × CUSTODY_TIMEOUT
 *
 * Every request inside it is cut at whichever comes first, its own CUSTODY_TIMEOUT or this deadline.
 * With the default 15 s: 5 + 30 = 35 s. A get-transfer lookup (one wait + one request) fits in it too.
 */
export function sendDeadlineMs(custodyTimeoutMs: number): number {
  return MAX_RATE_LIMIT_WAIT_MS + 2 * custodyTimeoutMs;
}

/**
 * The send lease: the deadline plus the margin (default 35 + 10 = 45 s). Judged by Redis's clock only
 * (the transition script reads TIME), so workers with skewed clocks agree on when it ends.
 */
export function sendLeaseMs(custodyTimeoutMs: number): number {
  return sendDeadlineMs(custodyTimeoutMs) + SEND_LEASE_MARGIN_MS;
}

/**
 * How much of its lease a runner may assume it still holds, at most: the lease starts in Redis when
 * the script runs, which is after this process issued the command, so the runner counts from the
 * moment before it issued it (a monotonic clock, performance.now()) and keeps this margin. The margin
 * covers the rate drift between that clock and Redis's (quartz: ~50 ppm, 2 ms of a 45 s lease; 1 s
 * allows 2 %) and the synchronous step from the check to the socket write.
 */
export const SEND_WRITE_MARGIN_MS = 1_000;

/**
 * The window, counted from the moment before the lease command was issued, in which a runner may
 * write a sendTransaction request: the earlier of the send deadline (nothing is written that the
 * deadline would cut) and the lease less SEND_WRITE_MARGIN_MS. By default min(35, 45 − 1) = 35 s.
 *
 * It is checked synchronously immediately before the request's first byte is handed to the socket
 * (custody/http/transport.ts, `beforeWrite`), after the replica WAIT, the budget wait and any token
 * request. A reply that arrived late (a partition, a frozen process, a long GC) therefore finds the
 * window shut and nothing is written. What is left is the time between that check and the write
 * within one synchronous stretch of code (microseconds): a freeze that lands exactly there still
 * writes. Ledger writes need no such check: the lease is judged in Redis, by Redis's clock.
 */
export function sendWriteWindowMs(deadlineMs: number, leaseMs: number): number {
  return Math.min(deadlineMs, leaseMs - SEND_WRITE_MARGIN_MS);
}

/** A runner that finds another's lease waits until it ends plus this, so it does not arrive a hair early. */
export const LEASE_WAIT_SLACK_MS = 50;

// ---------------------------------------------------------------------------------------------------
// Tracking.

/**
 * BullMQ's limiter on the tracking queue: it hands out jobs at about the budget's pace
 * (TRACK_LIMITER_BURST jobs per as many intervals), so a due poll is fetched when a slot is free
 * instead of being fetched, turned away and re-delayed; a slot a higher class took makes the queue
 * wait for the next one (WaitForSlot, BullMQ's manual rate limit, which needs a limiter to exist). The
 * interval is a little shorter than the budget's: a fetch that comes early waits for its slot inside
 * the budget (at most one interval), and one that comes late would leave the slot unused. With no limit
 * (CUSTODY_MAX_RPS=0) there is none: only a provider's 429 turns polls away then, and each is put back
 * on its own (a limiter would also show the queue as "rate limited" in the dashboard all the time).
 */
export function trackLimiter(intervalMs: number): { max: number; duration: number } | undefined {
  if (intervalMs === 0) return undefined;
  return {
    max: TRACK_LIMITER_BURST,
    duration: Math.max(1, Math.floor(TRACK_LIMITER_BURST * intervalMs * TRACK_FETCH_PACE)),
  };
}

/** The tracking queue's fetch interval as a share of the budget's (see trackLimiter). */
export const TRACK_FETCH_PACE = 0.95;

/**
 * Jobs the tracking queue hands out per limiter period (see trackLimiter), so that the limiter's wait is
 * paid once per this many jobs. Each period costs the worker a rate-limit wait whose timer fires late
 * on a busy machine, and a slot whose job comes late goes unused: one job per period leaves a share of
 * the budget unused that grows with R. More than two per period outruns the budget, which admits a
 * dispensed request at most DISPENSED_AHEAD = 2 slots ahead: more refusals, more commands per call.
 * Measured with bench:scale (bench/README.md, "The tracking queue's limiter").
 */
export const TRACK_LIMITER_BURST = 2;

/** Consecutive failed polls after which each further failure is logged as an error (tracking goes on). */
export const POLL_FAILURES_ALERT = 10;

/**
 * Polls in a row whose answer listed a `send` of the transfer's wallet that matched nothing: at this
 * many the transfer is counted (custody_track_unmatched_total) and logged once. A provider whose lists
 * are not narrowed shows other sends for a few polls before ours appears; 20 polls is minutes to hours.
 */
export const UNMATCHED_POLLS_ALERT = 20;

/**
 * How much earlier than our first send a listed record may be dated and still be weighed as ours (by
 * address and amount): the provider dates a record when it accepts the send, after the ledger stamped
 * the send (`firstSentAt`, Redis time, before the request is written), so only a difference between
 * the two clocks can put our own record earlier. NTP keeps servers within tens of milliseconds; 2 s
 * is ample for that, and short enough that a twin sent (same address, same amount) more than 2 s
 * before ours is never taken for ours. A twin closer than that is told apart by the ledger's claims
 * (a record another transfer holds is never a candidate), or not at all while neither is claimed.
 */
export const RECORD_DATE_SLACK_MS = 2_000;

/** Failed wallet-transaction lookups (upstream API 4.3) before the broadcast goes out with `walletTransaction: null`. */
export const ENRICH_ATTEMPTS = 3;

/**
 * A non-terminal transfer unchanged this long counts as stale in `custody_transfers_stale` (a submit step
 * retries within SUBMIT_RETRY_MAX = 60 s and reconciliation repairs within RECONCILE_EVERY = 5 min, so
 * 15 min means neither did). A transfer waiting for its txid is not touched on every poll: alert on the
 * `received`, `gated` and `submitting` states, watch `submitted` against TRACK_DEADLINE.
 */
export const STALE_TRANSFER_AGE_MS = 15 * 60_000;

/** Skipped upstream records are logged at most once per endpoint per this interval (the counter counts all). */
export const SKIPPED_RECORD_LOG_INTERVAL_MS = 60_000;

/**
 * Redis errors that repeat on every command while their cause lasts (a connection down, writes refused
 * for OOM, READONLY, MISCONF, NOREPLICAS, a node loading) are logged at most once per code per this
 * interval for the whole process, with a count of those left out (src/redis-errors.ts). A worker whose
 * moves are refused retries at once: unthrottled, that is a line per retry for as long as the cause lasts.
 */
export const REDIS_ERROR_LOG_INTERVAL_MS = 5_000;

/**
 * /readyz answers 503 when Redis does not answer PING, or the write probe, within this; the watchdog
 * waits as long for its probe.
 */
export const READY_CHECK_TIMEOUT_MS = 1_000;

/**
 * How often each worker process compares the ledger's epoch and tick with what it saw (epoch.ts,
 * `watch`): a ledger that went back in time (a lagging replica promoted, a snapshot restored) is noticed
 * within this long even while the process makes no transition, before processes that restarted onto the
 * older copy can make up the lost count. One read of one small hash per process per interval.
 */
export const LEDGER_CHECK_EVERY_MS = 1_000;

/**
 * The readiness write probe's key (`<QUEUE_PREFIX>:ready-probe`, one per deployment, rewritten by every
 * probe of every process) expires this long after the last probe: it holds nothing anyone reads, so it
 * should not outlive the probes by much, and one key rewritten costs Redis nothing it could run out of.
 */
export const READY_PROBE_TTL_MS = 10_000;

// ---------------------------------------------------------------------------------------------------
// Reconciliation.

/** A broadcast is re-verified within this window (24 h); older unverified entries leave the index. */
export const VERIFY_WINDOW_MS = 24 * 3_600_000;

/**
 * Verification time per run: each broadcast costs two upstream calls, slow ones when upstream is in
 * trouble, and the run lock holds off the next repair pass while it lasts. What is left is verified
 * by the next run (oldest first).
 */
export const VERIFY_BUDGET_MS = 60_000;

/** Candidates read from a ledger index per page. */
export const INDEX_PAGE = 500;

/**
 * The reconcile run lock expires this long after its last renewal, and the holder renews it every
 * RECONCILE_LOCK_RENEW_MS (a third of the TTL, so two renewals may fail before it lapses). A worker
 * killed mid-run stops renewing, so the schedule resumes within RECONCILE_LOCK_TTL_MS.
 */
export const RECONCILE_LOCK_TTL_MS = 30_000;
export const RECONCILE_LOCK_RENEW_MS = RECONCILE_LOCK_TTL_MS / 3;

/**
 * How many times reconciliation retries one failed submit job (counted per job in Redis, under
 * QUEUE_PREFIX, for RETENTION). A submit job fails only for Redis trouble (a move refused mid-failover,
 * too many stalls), which one or two retries outlast; a job that fails again after 5 retries, one
 * run apart (25 min at the default RECONCILE_EVERY), fails for a reason a retry does not fix (it kills
 * its worker, say), and retrying it every run for ever would only hide that. It is then left failed,
 * logged once and counted (custody_reconcile_retries_total{outcome="gave-up"}); its transfer, if it has
 * a record, shows as stale; an operator retries it by hand once the cause is fixed.
 */
export const RECONCILE_MAX_RETRIES = 5;

// ---------------------------------------------------------------------------------------------------
// Waiting steps.

/** A process waiting for another's travel-rule refresh looks at the cache this often. */
export const TRAVEL_RULE_WAIT_STEP_MS = 25;

/** When the token endpoint gives no `expires_in`, assume this lifetime (upstream API section 5: lifetime not shown). */
export const DEFAULT_TOKEN_LIFETIME_MS = 5 * 60_000;

/** Renew a token this long before expiry: a tenth of its lifetime, at most a minute. */
export const MAX_TOKEN_RENEW_MARGIN_MS = 60_000;

/**
 * How long a provider's webhook call, once taken, makes the same body a duplicate: a day covers the
 * provider's retries of one call (BitGo retries a call that was not answered 2xx); a replay after that
 * costs at most one poll, in the request budget.
 */
export const WAKEUP_SEEN_MS = 24 * 3_600_000;

/** How long a webhook call may take to answer (its Redis reads and the tracking job's promotion); past it, 503 (the provider calls again). */
export const WAKEUP_ANSWER_MS = 2_000;
