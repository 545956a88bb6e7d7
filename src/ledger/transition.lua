--[[
  Moves one transfer from an expected state to a new one and, in the same atomic step, publishes its
  event on the stream and keeps the ledger's indexes. Because the checks, the change and the XADD run
  together, a transition (and so its event) happens at most once, and `version` counts 1, 2, 3 ... with
  no gaps. Time is Redis's own (TIME), so every process judges leases by one clock.

  KEYS[1] ledger hash of the transfer (or of a rejected job without a usable sequenceId)
  KEYS[2] events stream
  KEYS[3] index of non-terminal transfers (sorted set, score = last change ms)
  KEYS[4] index of terminal transfers (sorted set, score = terminal time ms)
  KEYS[5] index of broadcast transfers still to verify (sorted set, score = broadcast time ms)
  KEYS[6] the transfer's payload (string), kept apart from the hash: the hash then never holds a value
          over 64 bytes and stays in the compact listpack encoding. To the caller it is the record's
          `payload` field: set, deleted (unset) and returned ('*') like one. A record written before
          the payload moved out may still hold it as a hash field: deleting `payload` drops both.
  KEYS[7] the transfer's tombstone (string '<terminal state>:<version>'): written by the terminal
          transition with a TTL of RETENTION + TOMBSTONE_RETENTION, so that once the hash is gone a
          transfer with this sequenceId is never created again (refused: 'ended').

  ARGV[1]  sequenceId for the event ('' when the payload had none)
  ARGV[2]  expected states, comma-separated; '-' stands for "no record yet"
  ARGV[3]  new state
  ARGV[4]  '1' when the new state is terminal
  ARGV[5]  now, ms since epoch; '' = Redis TIME (a test clock passes its own)
  ARGV[6]  the event's `at` (ISO 8601 with milliseconds)
  ARGV[7]  event type, '' for a transition without event
  ARGV[8]  event data (JSON text)
  ARGV[9]  stream MAXLEN (approximate trimming)
  ARGV[10] retention of a terminal record, ms
  ARGV[11] index member ('' = do not index)
  ARGV[12] lease mode: '' none | 'take' acquire or renew | 'own' caller must own it | 'free' no live lease
  ARGV[13] lease owner token (take, own)
  ARGV[14] lease duration ms (take)
  ARGV[15] '1' for an operator's resolution (may fail a transfer whose send may have gone out)
  ARGV[16] fields to delete, comma-separated
  ARGV[17] increments, 'field=n,field=n'
  ARGV[18] fields that must be absent, comma-separated (else refused: 'present')
  ARGV[19] fields set to now, comma-separated; a leading '?' sets the field only when absent
  ARGV[20] what to return of the record after the change: '*' all of it (HGETALL, and the payload),
           '' nothing, else comma-separated hash fields (HMGET, in that order)
  ARGV[21] the payload to keep ('' = leave it as it is)
  ARGV[22] '1' to record the transfer in the tracker outbox (KEYS[8]) with this change: the `submitted`
           transition does, so a submitted transfer is never without either its tracking job or the
           record that it still needs one (the caller adds the job with BullMQ's own Queue.add and
           removes the entry; a sweep adds what a crash left)
  ARGV[23] how long the tombstone of a terminal transition lives, ms (RETENTION + TOMBSTONE_RETENTION)
  ARGV[24..] field, value pairs to set

  KEYS[8] the tracker outbox (sorted set, score = when its entry was recorded, ms): the ledger's own
          key; this script writes no key of BullMQ's.

  Rules that hold whatever the caller passes:
  - a terminal state is never left;
  - leaving `submitting` needs lease mode 'own' (the owner) or 'free' (nobody holds a live lease);
  - 'take' succeeds when nobody holds the lease, the caller holds it, or it has expired; taking over a
    lease whose holder left `pending` = 1 (a send it never reported) records `unknownSince`;
  - `failed` is refused while a send may have been accepted (`unknownSince` set, or another runner's
    send `pending`) or the sequenceId was found in use upstream (`inUseSince`), unless ARGV[15] says
    an operator decided;
  - a transfer whose tombstone exists is never created again: a transition from "no record" is
    refused ('ended'), and the refusal carries the tombstone.

  Every read of the record before the first write is one HMGET, and consecutive writes of the same
  kind are one command: a call from Lua costs Redis more than the field it touches. The order of the
  writes is the order of the steps below, so a field written by several steps ends as it did when each
  step was its own command.

  Returns {1, version, streamId, fields} on success, fields being what ARGV[20] asked for of the record
  after the change (field, value pairs for '*'; values, false for an absent field, for a list);
  {0, currentState, reason, leaseUntil, now, tombstone} when refused, reason one of
  state | terminal | lease | owner | present | unknown | ended (tombstone: '<state>:<version>', only
  with 'ended').
]]
-- Everything the checks read, in one call and before any write (so every check sees the record as
-- it was when the script started, as it always did).
local before = redis.call('HMGET', KEYS[1], 'state', 'leaseOwner', 'leaseUntil', 'pending', 'unknownSince', 'inUseSince')
local current = before[1] or '-'

local now
if ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Written as text once: every number handed to Redis is formatted again (printf-style) otherwise.
local nowText = tostring(now)

local function refuse(reason)
  return {0, current, reason, before[3] or '0', nowText}
end

-- The contract's terminal states, put in by the ledger when it loads this script (catalog.ts).
local terminal = {--[[catalog: terminal states]]}
if terminal[current] then return refuse('terminal') end
if current == '-' then
  local tombstone = redis.call('GET', KEYS[7])
  if tombstone then return {0, current, 'ended', '0', nowText, tombstone} end
end

local allowed = false
for state in string.gmatch(ARGV[2], '[^,]+') do
  if state == current then allowed = true end
end
if not allowed then return refuse('state') end

for field in string.gmatch(ARGV[18], '[^,]+') do
  if redis.call('HEXISTS', KEYS[1], field) == 1 then return refuse('present') end
end

local mode = ARGV[12]
local owner = before[2] or ''
local leaseUntil = tonumber(before[3] or '0')
local live = owner ~= '' and leaseUntil > now
if current == 'submitting' and ARGV[3] ~= 'submitting' and mode ~= 'own' and mode ~= 'free' then
  return refuse('lease')
end
if mode == 'take' then
  if live and owner ~= ARGV[13] then return refuse('lease') end
elseif mode == 'own' then
  if owner ~= ARGV[13] then return refuse('owner') end
elseif mode == 'free' then
  if live then return refuse('lease') end
end

local pendingOfOther = before[4] == '1' and owner ~= ARGV[13]
if ARGV[3] == 'failed' and ARGV[15] ~= '1' then
  if before[5] or before[6] or pendingOfOther then return refuse('unknown') end
end

-- Field, value pairs for the next HSET: consecutive sets go out as one command.
local sets = {}
local function flush()
  if #sets > 0 then
    redis.call('HSET', KEYS[1], unpack(sets))
    sets = {}
  end
end

if mode == 'take' then
  -- The previous holder sent and never said how it went (crashed, or outlived its lease): from now on
  -- that send may have been accepted, whatever happens to later ones.
  if pendingOfOther then
    redis.call('HSETNX', KEYS[1], 'unknownSince', nowText)
    redis.call('HDEL', KEYS[1], 'pending')
  end
  sets[#sets + 1] = 'leaseOwner'
  sets[#sets + 1] = ARGV[13]
  sets[#sets + 1] = 'leaseUntil'
  sets[#sets + 1] = tostring(now + tonumber(ARGV[14]))
end

if ARGV[21] ~= '' then redis.call('SET', KEYS[6], ARGV[21]) end
for i = 24, #ARGV do sets[#sets + 1] = ARGV[i] end
for field in string.gmatch(ARGV[19], '[^,]+') do
  if string.sub(field, 1, 1) == '?' then
    flush()
    redis.call('HSETNX', KEYS[1], string.sub(field, 2), nowText)
  else
    sets[#sets + 1] = field
    sets[#sets + 1] = nowText
  end
end
flush()
for pair in string.gmatch(ARGV[17], '[^,]+') do
  local field, by = string.match(pair, '^(.+)=(%-?%d+)$')
  redis.call('HINCRBY', KEYS[1], field, by)
end
if ARGV[16] ~= '' then
  local dropsLong = false
  local fields = {}
  for field in string.gmatch(ARGV[16], '[^,]+') do
    if field == 'payload' then
      redis.call('DEL', KEYS[6])
      if not dropsLong and redis.call('HEXISTS', KEYS[1], 'payload') == 1 then dropsLong = true end
    end
    fields[#fields + 1] = field
  end
  if #fields > 0 then redis.call('HDEL', KEYS[1], unpack(fields)) end
  if dropsLong then
    -- A hash that once held a long value (the job payload, before it moved to KEYS[6]) keeps the large
    -- hashtable encoding for good; written anew it takes the compact listpack encoding again.
    local all = redis.call('HGETALL', KEYS[1])
    local ttl = redis.call('PTTL', KEYS[1])
    redis.call('DEL', KEYS[1])
    if #all > 0 then redis.call('HSET', KEYS[1], unpack(all)) end
    if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
  end
end

local streamId = ''
local version
if ARGV[7] ~= '' then
  local after = redis.call('HMGET', KEYS[1], 'version', 'walletId', 'coin', 'metadata', 'events')
  version = tonumber(after[1] or '0') + 1
  local versionText = tostring(version)
  streamId = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[9], '*',
    'event', ARGV[7],
    'sequenceId', ARGV[1],
    'walletId', after[2] or '',
    'coin', after[3] or '',
    'version', versionText,
    'at', ARGV[6],
    'data', ARGV[8],
    'metadata', after[4] or '')
  local ids = after[5]
  if ids then ids = ids .. ',' .. streamId else ids = streamId end
  redis.call('HSET', KEYS[1], 'events', ids, 'state', ARGV[3], 'version', versionText, 'updatedAt', nowText)
else
  version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
  redis.call('HSET', KEYS[1], 'state', ARGV[3], 'version', tostring(version), 'updatedAt', nowText)
end

if ARGV[4] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[10])
  redis.call('PEXPIRE', KEYS[6], ARGV[10])
  if ARGV[11] ~= '' then
    redis.call('SET', KEYS[7], ARGV[3] .. ':' .. tostring(version), 'PX', ARGV[23])
    redis.call('ZREM', KEYS[3], ARGV[11])
    redis.call('ZREM', KEYS[8], ARGV[11])
    redis.call('ZADD', KEYS[4], nowText, ARGV[11])
    if ARGV[3] == 'broadcast' then redis.call('ZADD', KEYS[5], nowText, ARGV[11]) end
  end
elseif ARGV[11] ~= '' then
  redis.call('ZADD', KEYS[3], nowText, ARGV[11])
end

if ARGV[22] == '1' and ARGV[11] ~= '' then redis.call('ZADD', KEYS[8], nowText, ARGV[11]) end

-- Decoding a whole record costs the caller more than the change itself: it names what it reads.
local reply = {}
if ARGV[20] == '*' then
  reply = redis.call('HGETALL', KEYS[1])
  local payload = redis.call('GET', KEYS[6])
  if payload then
    reply[#reply + 1] = 'payload'
    reply[#reply + 1] = payload
  end
elseif ARGV[20] ~= '' then
  local fields = {}
  for field in string.gmatch(ARGV[20], '[^,]+') do fields[#fields + 1] = field end
  reply = redis.call('HMGET', KEYS[1], unpack(fields))
end
return {1, version, streamId, reply}
