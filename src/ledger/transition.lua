--[[
  Moves one transfer from an expected state to a new one and, in the same atomic step, publishes its
  event on the stream and keeps the ledger's indexes. Because the checks, the change and the XADD run
  together, a transition (and so its event) happens at most once, and `version` counts 1, 2, 3 ... with
  no gaps. Time is Redis's own (TIME), so every process judges leases by one clock.

  KEYS[1] ledger hash of the transfer (or of a rejected job without a usable sequenceId)
  KEYS[2] events stream
  KEYS[3] index of terminal transfers (sorted set, score = terminal time ms)
  KEYS[4] index of broadcast transfers still to verify (sorted set, score = broadcast time ms)
  KEYS[5] the transfer's payload (string), kept apart from the hash: the hash then never holds a value
          over 64 bytes and stays in the compact listpack encoding. To the caller it is the record's
          `payload` field: set, deleted (unset) and returned ('*') like one. A record written before
          the payload moved out may still hold it as a hash field: deleting `payload` drops both.
  KEYS[6] the transfer's tombstone (string '<terminal state>:<version>'): written by the terminal
          transition with a TTL of RETENTION + TOMBSTONE_RETENTION, so that once the hash is gone a
          transfer with this sequenceId is never created again (refused: 'ended').

  KEYS[7] the tracker outbox (sorted set, score = when its entry was recorded, ms): the ledger's own
          key; this script writes no key of BullMQ's.
  KEYS[8] the ledger's epoch (hash: id, recoveryUntil, tick, ...; see epoch.ts): read by every
          transition; written here: `tick` (every change advances it by one), the caller's `w:<writer>`
          (that tick, when the caller names a writer) and `behind` (see the rules below). Every event
          carries its id; a transition that records a send in flight needs it to be the epoch the
          caller knows (else refused: 'epoch'), and, while recovery lasts, a lookup made first (else
          refused: 'recovery'). Any transition whose caller saw a higher tick under the same epoch is
          refused ('epoch'): the ledger went back in time (a lagging replica promoted, a snapshot or a
          backup restored) and may have forgotten sends.
  KEYS[9..17+n] the listing indexes (docs/architecture.md "Listing transfers"), kept with the record
          so they never disagree with it; written only for a transition with an index member. The
          state indexes of the non-terminal states are also the ledger's index of what is not over
          (reconciliation walks them):
    KEYS[9]  every sequenceId (sorted set, score 0: prefix search by ZRANGEBYLEX)
    KEYS[10] what retention removes of an ended transfer (hash, sequenceId -> JSON {state, jobId,
             txid, attention}; jobId '' when the job id has no entry of its own in KEYS[16]): the
             record expires by its TTL, so retention cannot read it any more
    KEYS[11..15] needs attention, one sorted set per reason (score = since when, ms): unresolved,
             send-unknown, halted, expired-unknown, approval (in that order; attentionOf below says when)
    KEYS[16] txids and job ids, for lookups exact and by prefix (sorted set, score 0: ZRANGEBYLEX),
             members 't:<txid>\n<sequenceId>' (the txid in its canonical spelling) and
             'j:<job id>\n<sequenceId>' (the job that owns the transfer now, unless its id is
             JOB_ID_PREFIX .. sequenceId, jobIdFor's: KEYS[9] finds those, src/ledger/queries.ts)
    KEYS[17] the index of the state `to` (sorted set, score = last change ms)
    KEYS[18..17+n] the index of each state of `from` but '-', in `from`'s order
  KEYS[18+n] the claims (a hash, field -> sequenceId: src/ledger/keys.ts, Keys.claims), only when the
          change stores some: `req.claims` names their fields, one per upstream record id or txid this
          change stores for the transfer (Keys.claimField). A cancel passes none.
  KEYS[#KEYS] the transfer's attempts (a string of JSON entries, one per line; src/ledger/keys.ts
          Keys.attempts): one entry per send attempt or settling lookup, appended by the transition that
          records its outcome (`attempt` below), the newest ATTEMPTS_CAP kept; it expires with the
          record (RETENTION).

  ARGV[1] the request, one JSON object (cjson), encoded by the ledger (src/ledger/request.ts):
    seq       sequenceId for the event ('' when the payload had none)
    from      expected states; '-' stands for "no record yet"
    to        new state;   terminal: true when it is terminal
    now       ms since epoch as text; '' = Redis TIME (a test clock passes its own). The event's
              `at` is this time, but never earlier than the transfer's last event (`lastEventAt`):
              within one transfer `at` never decreases, whatever a failover does to the clock
    event     event type, '' for a transition without event;   data: event data (JSON text)
    maxLen    stream MAXLEN (approximate trimming);   retention: ms a terminal record is kept
    member    index member ('' = do not index)
    lease     { mode = '' | 'take' acquire or renew | 'own' caller must own it | 'free' no live lease
                | 'proven' whoever holds it (to `submitted` only: proven accepted upstream),
                owner = token (take, own), ms = duration (take) }
    operator  true for an operator's resolution (may fail a transfer whose send may have gone out)
    unset     fields to delete;   incr: { field = n };   absent: fields that must not exist (else 'present')
    stamp     fields set to now;   stampOnce: fields set to now only when absent
    read      what to return of the record after the change: '*' all of it (HGETALL, and the payload),
              else a list of hash fields (their values after the change, in that order; empty = nothing)
    payload   the payload to keep ('' = leave it as it is)
    tracker   true to record the transfer in the tracker outbox (KEYS[7]) with this change: the
              `submitted` transition does, so a submitted transfer is never without either its tracking
              job or the record that it still needs one (the caller adds the job with BullMQ's own
              Queue.add and removes the entry; a sweep adds what a crash left)
    tombstoneTtl  how long the tombstone of a terminal transition lives, ms (RETENTION + TOMBSTONE_RETENTION)
    set       field, value, field, value ... to set (all text)
    epoch     { check = true for a transition that records a send in flight, id = the epoch the
                caller knows ('' = none: always refused), lookedUpAt = the ledger's time (ms, text)
                before the caller looked the transfer up upstream ('' = it did not), seen = the highest
                tick the caller saw under that epoch (text; '0' = none), writer = the caller's writer id
                ('' = none), mine = the tick of that writer's last change under that epoch (text) }
    attempt   what the send attempt or lookup this change concludes found (a JSON object's text, without
              `at`; '' = none): appended to KEYS[#KEYS] with `at` = now prepended, trimmed to ATTEMPTS_CAP
    intact    true for a change that vouches for what never happened before it (a cancel: "no send of
              this transfer was ever made"): refused ('ledger') unless KEYS[8] holds an epoch whose
              recovery window is over. A ledger without one may have lost its record of sends.
    claims    the fields of the claims hash (KEYS[18+n]) this change stores for the transfer
              (`record:<id>`, `txid:<txid>`; empty or absent = none)

  Rules that hold whatever the caller passes:
  - a terminal state is never left;
  - leaving `submitting` needs lease mode 'own' (the owner) or 'free' (nobody holds a live lease), or
    'proven' for `submitted` alone (the caller's send was proven accepted: true whoever holds the lease);
  - 'take' succeeds when nobody holds the lease, the caller holds it, or it has expired; taking over a
    lease whose holder left `pending` = 1 (a send it never reported) records `unknownSince`;
  - `failed` is refused while a send may have been accepted (`unknownSince` set, or another runner's
    send `pending`) or the sequenceId was found in use upstream (`inUseSince`), unless the request says
    an operator decided; also from `submitting` while the epoch's recovery window is open, which then
    records `unknownSince` (a send the ledger forgot may have been accepted);
  - a transfer whose tombstone exists is never created again: a transition from "no record" is
    refused ('ended'), and the refusal carries the tombstone;
  - a send in flight is recorded only under the epoch the caller knows ('epoch': the ledger was lost,
    or this process has none yet) and, while the epoch's recovery lasts, only after a lookup made one
    lease (lease.ms) or more after the loss was recorded, when every send of the lost life has ended
    ('recovery'); such a send records `unknownSince` (a send of the lost life may have been accepted:
    never `failed` without an operator);
  - a change that needs an intact ledger (`intact`) is refused while the ledger has no epoch or
    recovers from a loss ('ledger');
  - no change is made under the caller's epoch when it went back in time ('epoch'): its tick below the
    one the caller saw, or its `w:<writer>` below the caller's `mine` (its own last change forgotten,
    however far other writers advanced the tick since), or `behind` already set by such a refusal
    (then set until a loss is declared, so that nobody changes the older copy before that); the
    refusal carries the ledger's epoch id;
  - an upstream record id or txid (the claims' fields) is claimed by one sequenceId only: a change that
    would store one another sequenceId claimed is refused ('claimed'); the claim lives as long as the
    transfer has a record or a tombstone (reconciliation removes it after: Ledger.forgetClaims), so a
    record once ours is never taken for another transfer's.

  The record is read once (one HMGET of every field any step needs, before any write) and written
  once (one HSET, and one HDEL for what is unset): a call from Lua costs Redis more than the field it
  touches. The steps below change a copy of the record (`rec`) in their order, so a field changed by
  several steps ends as it did when each step was its own command; what the script returns and what
  the indexes see is that copy after the change.

  Returns {1, version, streamId, fields, tick, epochId} on success, fields being what `read` asked for
  of the record after the change (field, value pairs for '*'; values, false for an absent field, for a
  list), tick the ledger's tick after the change and epochId its epoch (false: none);
  {0, currentState, reason, leaseUntil, now, tombstone} when refused, reason one of
  state | terminal | lease | owner | present | unknown | ended | epoch | recovery | ledger | claimed (tombstone:
  '<state>:<version>', only with 'ended'; with 'epoch' the ledger's epoch id instead, false if none).
]]
--[[iso time]]
local req = cjson.decode(ARGV[1])

-- The record, read once before any write (so every check sees it as it was when the script started):
-- what the checks, the event and the indexes need, and whatever the request's steps and `read` name.
local FIELDS = {'state', 'leaseOwner', 'leaseUntil', 'pending', 'unknownSince', 'inUseSince', 'lastEventAt',
  'unresolvedAt', 'haltedAs', 'haltedSince', 'jobId', 'txid', 'approvalSince', 'expiredCode', 'version',
  'walletId', 'coin', 'metadata', 'events'}
local fieldList = {}
local listed = {}
local function want(field)
  if not listed[field] then
    listed[field] = true
    fieldList[#fieldList + 1] = field
  end
end
for _, field in ipairs(FIELDS) do want(field) end
for _, field in ipairs(req.absent) do want(field) end
for _, field in ipairs(req.stampOnce) do want(field) end
for field in pairs(req.incr) do want(field) end
for _, field in ipairs(req.unset) do want(field) end
if req.read ~= '*' then
  for _, field in ipairs(req.read) do want(field) end
end
local values = redis.call('HMGET', KEYS[1], unpack(fieldList))
-- `old`: the record before the change; `rec`: the copy the steps change (false = absent).
local old, rec = {}, {}
for i, field in ipairs(fieldList) do
  old[field] = values[i] or false
  rec[field] = old[field]
end
local current = old.state or '-'

-- The listing indexes' keys (see the header): the state indexes, then the claims after them.
local IDS, ENDED_ENTRIES, SEARCH = KEYS[9], KEYS[10], KEYS[16]
local stateIndex = {[req.to] = KEYS[17]}
local nextKey = 18
local attemptsKey = KEYS[#KEYS]
for _, state in ipairs(req.from) do
  if state ~= '-' then
    stateIndex[state] = KEYS[nextKey]
    nextKey = nextKey + 1
  end
end
-- The claims' fields (none from a cancel, whose request has no `claims`) and their hash.
local claims = req.claims or {}
local CLAIMS = KEYS[nextKey]
local attentionIndex = {['unresolved'] = KEYS[11], ['send-unknown'] = KEYS[12], ['halted'] = KEYS[13], ['expired-unknown'] = KEYS[14], ['approval'] = KEYS[15]}

-- Why a transfer needs an operator's attention, and since when (ms), from its record's fields; nil
-- when it does not. The console's time bounds (longer than UNRESOLVED_AFTER, within the last 7 days)
-- are applied when reading, by score, so that time passing costs no write. The one rule, here only.
local function attentionOf(state, r, at)
  if state == 'submitting' then
    if r.unresolvedAt or r.inUseSince then return 'unresolved', tonumber(r.unresolvedAt or r.inUseSince) end
    if r.unknownSince then return 'send-unknown', tonumber(r.unknownSince) end
  elseif state == 'submitted' or state == 'halted' then
    -- A record written before haltedSince existed: since this change (at), or unknown before it (nil).
    if r.haltedAs or state == 'halted' then return 'halted', (r.haltedSince and tonumber(r.haltedSince)) or at end
    -- Waiting for the provider's approval since approvalSince (the console's bound: CONSOLE_APPROVAL_WAIT).
    if state == 'submitted' and r.approvalSince then return 'approval', tonumber(r.approvalSince) end
  elseif state == 'expired' and at and r.expiredCode == 'SEND_OUTCOME_UNKNOWN' then
    return 'expired-unknown', at
  end
  return nil, nil
end
local lease = req.lease
-- How many attempts a transfer keeps (the newest); docs/contract.md section 5.
local ATTEMPTS_CAP = 50
-- The producer's job ids (packages/producer/src/job-id.ts, jobIdFor): no search entry of their own.
local JOB_ID_PREFIX = 'transfer-'

local now
if req.now ~= '' then
  now = tonumber(req.now)
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Written as text once: every number handed to Redis is formatted again (printf-style) otherwise.
local nowText = tostring(now)

local function refuse(reason)
  return {0, current, reason, old.leaseUntil or '0', nowText}
end

-- The epoch, read by every transition (one HMGET): a ledger below the tick its caller saw under the
-- same epoch went back in time, and whatever it forgot (this transfer's send, its last event) it
-- cannot be trusted to have kept. Refused before any check that could read the older record as fact.
local writerField = 'w:' .. req.epoch.writer
local epoch = redis.call('HMGET', KEYS[8], 'id', 'recoveryUntil', 'lostAt', 'tick', 'behind', writerField)
if req.epoch.id ~= '' and epoch[1] == req.epoch.id then
  -- Behind the caller: below the tick it saw, or without its own last change (however far other
  -- writers advanced the tick since), or found so before and not yet declared lost. Marked in the
  -- epoch hash, so that whoever comes next is refused too until a loss is declared (epoch.ts `lost`).
  local mine = tonumber(req.epoch.mine)
  local wentBack = tonumber(epoch[4] or '0') < tonumber(req.epoch.seen)
    or (req.epoch.writer ~= '' and mine > 0 and tonumber(epoch[6] or '0') < mine)
  if wentBack and not epoch[5] then redis.call('HSET', KEYS[8], 'behind', '1') end
  if wentBack or epoch[5] then return {0, current, 'epoch', old.leaseUntil or '0', nowText, epoch[1]} end
end

-- The contract's terminal states, put in by the ledger when it loads this script (catalog.ts).
local terminal = {--[[catalog: terminal states]]}
if terminal[current] then return refuse('terminal') end
if current == '-' then
  local tombstone = redis.call('GET', KEYS[6])
  if tombstone then return {0, current, 'ended', '0', nowText, tombstone} end
end

local allowed = false
for _, state in ipairs(req.from) do
  if state == current then allowed = true end
end
if not allowed then return refuse('state') end

for _, field in ipairs(req.absent) do
  if old[field] then return refuse('present') end
end

-- Claims: a record id or txid another sequenceId stored is never this transfer's.
if #claims > 0 then
  for _, holder in ipairs(redis.call('HMGET', CLAIMS, unpack(claims))) do
    if holder and holder ~= req.seq then return refuse('claimed') end
  end
end

local mode = lease.mode
local owner = old.leaseOwner or ''
local leaseUntil = tonumber(old.leaseUntil or '0')
local live = owner ~= '' and leaseUntil > now
-- 'proven': the transfer was proven accepted upstream by the caller's own send's answer (or its
-- lookup's finding), and the ledger no longer holds the caller's lease as it left it (another runner
-- took it over, or the ledger went back in time): what was proven is recorded whoever holds it now.
if mode == 'proven' and req.to ~= 'submitted' then return refuse('lease') end
if current == 'submitting' and req.to ~= 'submitting' and mode ~= 'own' and mode ~= 'free' and mode ~= 'proven' then
  return refuse('lease')
end
if mode == 'take' then
  if live and owner ~= lease.owner then return refuse('lease') end
elseif mode == 'own' then
  if owner ~= lease.owner then return refuse('owner') end
elseif mode == 'free' then
  if live then return refuse('lease') end
end

local pendingOfOther = old.pending == '1' and owner ~= lease.owner
if req.to == 'failed' and not req.operator then
  if old.unknownSince or old.inUseSince or pendingOfOther then return refuse('unknown') end
  if current == 'submitting' and tonumber(epoch[2] or '0') > now then
    -- The ledger recovers from a loss: a send of this transfer it forgot (a runner's, made between the
    -- copy it went back to and the loss) may have been accepted, whatever this send was answered. From
    -- now on the send's outcome is unknown (sticky), and the refusal sends the caller that way.
    if redis.call('HSETNX', KEYS[1], 'unknownSince', nowText) == 1 and req.member ~= '' then
      -- Neither unknownSince nor inUseSince was set (checked above), so it needed no attention before.
      redis.call('ZADD', attentionIndex['send-unknown'], nowText, req.member)
    end
    return refuse('unknown')
  end
end

-- A send in flight recorded while the ledger recovers: the transfer may have been sent in the life
-- the ledger forgot (whatever state the older copy shows it in), so from now on that send may have
-- been accepted: sticky `unknownSince`, as a lookup before a first send after a loss records it.
local recovering = false
if req.epoch.check then
  -- A ledger that no longer holds the caller's epoch was lost (or replaced): what it forgot may
  -- include this very transfer's earlier send.
  if epoch[1] ~= req.epoch.id or req.epoch.id == '' then return {0, current, 'epoch', old.leaseUntil or '0', nowText, epoch[1]} end
  if tonumber(epoch[2] or '0') > now then
    local lookedUpAt = tonumber(req.epoch.lookedUpAt)
    if not lookedUpAt or lookedUpAt < tonumber(epoch[3] or '0') + tonumber(lease.ms) then return refuse('recovery') end
    recovering = true
  end
end

if req.intact then
  -- No epoch: never initialised, or lost and nobody noticed yet. Recovering: the ledger forgot sends.
  -- Either way it cannot vouch that no send was ever made.
  if not epoch[1] or tonumber(epoch[2] or '0') > now then return refuse('ledger') end
end

-- Every check passed: from here on the steps change `rec`, in their order, and the record is written
-- once at the end (changed fields in the order first changed: one HSET, one HDEL).
local changed, changeOrder = {}, {}
local function put(field, value)
  if not changed[field] then
    changed[field] = true
    changeOrder[#changeOrder + 1] = field
  end
  rec[field] = value
end

if mode == 'take' then
  -- The previous holder sent and never said how it went (crashed, or outlived its lease): from now on
  -- that send may have been accepted, whatever happens to later ones.
  if pendingOfOther then
    if not rec.unknownSince then put('unknownSince', nowText) end
    put('pending', false)
  end
  put('leaseOwner', lease.owner)
  put('leaseUntil', tostring(now + tonumber(lease.ms)))
end

if req.payload ~= '' then redis.call('SET', KEYS[5], req.payload) end
for i = 1, #req.set, 2 do put(req.set[i], req.set[i + 1]) end
for _, field in ipairs(req.stamp) do put(field, nowText) end
for _, field in ipairs(req.stampOnce) do
  if not rec[field] then put(field, nowText) end
end
if recovering and not rec.unknownSince then put('unknownSince', nowText) end
for field, by in pairs(req.incr) do
  local was = tonumber(rec[field] or '0')
  if not was or was ~= math.floor(was) then return redis.error_reply('ERR hash value is not an integer') end
  put(field, string.format('%d', was + by))
end
local dropsLong = false
for _, field in ipairs(req.unset) do
  if field == 'payload' then
    redis.call('DEL', KEYS[5])
    -- A record written before the payload moved out of the hash holds it as a field.
    if old.payload then dropsLong = true end
  end
  put(field, false)
end
-- A job id made by jobIdFor is left out once the transfer is submitted: only the submit job's hold on
-- the transfer needed it, and toRecord gives it back for a submitted record without one (record.ts,
-- recordJobId). 54 bytes of a record that only a listpack of 512 bytes or less makes smaller.
if req.to == 'submitted' and rec.jobId == JOB_ID_PREFIX .. req.seq then put('jobId', false) end

local streamId = ''
local version
if req.event ~= '' then
  version = tonumber(rec.version or '0') + 1
  local versionText = tostring(version)
  local atMs = math.max(now, tonumber(old.lastEventAt or '0'))
  streamId = redis.call('XADD', KEYS[2], 'MAXLEN', '~', req.maxLen, '*',
    'event', req.event,
    'sequenceId', req.seq,
    'walletId', rec.walletId or '',
    'coin', rec.coin or '',
    'version', versionText,
    'at', isoTime(atMs),
    'data', req.data,
    'metadata', rec.metadata or '',
    'epoch', epoch[1] or '')
  local ids = rec.events
  if ids then ids = ids .. ',' .. streamId else ids = streamId end
  put('events', ids)
  put('state', req.to)
  put('version', versionText)
  put('updatedAt', nowText)
  put('lastEventAt', tostring(atMs))
else
  version = tonumber(rec.version or '0')
  put('state', req.to)
  put('version', tostring(version))
  put('updatedAt', nowText)
end

-- The record's one write.
local sets, dels = {}, {}
for _, field in ipairs(changeOrder) do
  local value = rec[field]
  if value then
    sets[#sets + 1] = field
    sets[#sets + 1] = value
  else
    dels[#dels + 1] = field
  end
end
if #sets > 0 then redis.call('HSET', KEYS[1], unpack(sets)) end
if #dels > 0 then redis.call('HDEL', KEYS[1], unpack(dels)) end
if dropsLong then
  -- A hash that once held a long value (the job payload, before it moved to KEYS[5]) keeps the large
  -- hashtable encoding for good; written anew it takes the compact listpack encoding again.
  local all = redis.call('HGETALL', KEYS[1])
  local ttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  if #all > 0 then redis.call('HSET', KEYS[1], unpack(all)) end
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
end

-- The attempt this change concludes: one APPEND (a line of JSON), and the oldest lines dropped only
-- once the text may hold more than ATTEMPTS_CAP of them (no entry is shorter than 24 bytes).
if req.attempt and req.attempt ~= '' then
  local line = '{"at":' .. nowText .. ',' .. string.sub(req.attempt, 2) .. '\n'
  local length = redis.call('APPEND', attemptsKey, line)
  if length > ATTEMPTS_CAP * 24 then
    local text = redis.call('GET', attemptsKey)
    local starts = {}
    local at = 1
    while at <= #text do
      starts[#starts + 1] = at
      local nl = string.find(text, '\n', at, true)
      if not nl then break end
      at = nl + 1
    end
    if #starts > ATTEMPTS_CAP then
      local ttl = redis.call('PTTL', attemptsKey)
      redis.call('SET', attemptsKey, string.sub(text, starts[#starts - ATTEMPTS_CAP + 1]))
      if ttl > 0 then redis.call('PEXPIRE', attemptsKey, ttl) end
    end
  end
end

local member = req.member
if req.terminal then
  redis.call('PEXPIRE', KEYS[1], req.retention)
  redis.call('PEXPIRE', KEYS[5], req.retention)
  redis.call('PEXPIRE', attemptsKey, req.retention)
  if member ~= '' then
    redis.call('SET', KEYS[6], req.to .. ':' .. tostring(version), 'PX', req.tombstoneTtl)
    redis.call('ZREM', KEYS[7], member)
    redis.call('ZADD', KEYS[3], nowText, member)
    if req.to == 'broadcast' then redis.call('ZADD', KEYS[4], nowText, member) end
  end
end

if req.tracker and member ~= '' then redis.call('ZADD', KEYS[7], nowText, member) end

-- The listing indexes: one ZADD for most changes (the state index's score), a few more when the
-- state, the attention, the job or the txid changes, or the transfer is created or ends.
if member ~= '' then
  if current ~= req.to and stateIndex[current] then redis.call('ZREM', stateIndex[current], member) end
  redis.call('ZADD', stateIndex[req.to], nowText, member)
  if current == '-' then redis.call('ZADD', IDS, 0, member) end
  local was, wasSince = attentionOf(current, old, nil)
  local is, isSince = attentionOf(req.to, rec, now)
  if was and was ~= is then redis.call('ZREM', attentionIndex[was], member) end
  if is and (is ~= was or isSince ~= wasSince) then redis.call('ZADD', attentionIndex[is], isSince, member) end
  local jobId = rec.jobId
  if jobId and jobId ~= old.jobId then
    if old.jobId then redis.call('ZREM', SEARCH, 'j:' .. old.jobId .. '\n' .. member) end
    if jobId ~= JOB_ID_PREFIX .. member then redis.call('ZADD', SEARCH, 0, 'j:' .. jobId .. '\n' .. member) end
  end
  -- One spelling per txid, as Keys.claim (src/lib/txid.ts): hex in lower case, with or without 0x.
  local function canonical(txid)
    if txid and (string.match(txid, '^0[xX]%x+$') or string.match(txid, '^%x+$')) then return string.lower(txid) end
    return txid
  end
  local txid = canonical(rec.txid)
  local txidBefore = canonical(old.txid)
  if txid and txid ~= txidBefore then
    if txidBefore then redis.call('ZREM', SEARCH, 't:' .. txidBefore .. '\n' .. member) end
    redis.call('ZADD', SEARCH, 0, 't:' .. txid .. '\n' .. member)
  end
  if req.terminal then
    local searched = (jobId and jobId ~= JOB_ID_PREFIX .. member) and jobId or ''
    redis.call('HSET', ENDED_ENTRIES, member, cjson.encode({state = req.to, jobId = searched, txid = txid or '', attention = is or ''}))
  end
end

-- Kept while the transfer has a record or a tombstone (Ledger.forgetClaims removes them after).
if #claims > 0 then
  local held = {}
  for _, field in ipairs(claims) do
    held[#held + 1] = field
    held[#held + 1] = req.seq
  end
  redis.call('HSET', CLAIMS, unpack(held))
end

-- Every change advances the ledger's tick (an epoch-less ledger has none to advance): one HSET, the
-- caller's `w:<writer>` with it. The script runs alone, so the tick it read is the tick to advance.
local tick = 0
if epoch[1] then
  tick = tonumber(epoch[4] or '0') + 1
  local tickText = string.format('%d', tick)
  if req.epoch.writer ~= '' then
    redis.call('HSET', KEYS[8], 'tick', tickText, writerField, tickText)
  else
    redis.call('HSET', KEYS[8], 'tick', tickText)
  end
end

-- Decoding a whole record costs the caller more than the change itself: it names what it reads.
local reply = {}
if req.read == '*' then
  reply = redis.call('HGETALL', KEYS[1])
  local payload = redis.call('GET', KEYS[5])
  if payload then
    reply[#reply + 1] = 'payload'
    reply[#reply + 1] = payload
  end
elseif #req.read > 0 then
  for i, field in ipairs(req.read) do reply[i] = rec[field] end
end
return {1, version, streamId, reply, tick, epoch[1] or false}
