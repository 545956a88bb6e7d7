--[[
  Moves one transfer from an expected state to a new one and, in the same atomic step, publishes its
  event on the stream. Because the state check and the XADD run together, a transition (and so its
  event) happens at most once, and `version` counts 1, 2, 3 ... with no gaps.

  KEYS[1] ledger hash of the transfer (or of a rejected job without a usable sequenceId)
  KEYS[2] events stream
  KEYS[3] index of non-terminal transfers (sorted set, score = last change ms)
  KEYS[4] index of terminal transfers (sorted set, score = terminal time ms)

  ARGV[1]  sequenceId for the event ('' when the payload had none)
  ARGV[2]  expected states, comma-separated; '-' stands for "no record yet"
  ARGV[3]  new state
  ARGV[4]  '1' when the new state is terminal
  ARGV[5]  now, ms since epoch
  ARGV[6]  now, ISO 8601 with milliseconds (the event's `at`)
  ARGV[7]  event type, '' for a transition without event
  ARGV[8]  event data (JSON text)
  ARGV[9]  stream MAXLEN (approximate trimming)
  ARGV[10] retention of a terminal record, ms
  ARGV[11] index member ('' = do not index)
  ARGV[12] fields to delete, comma-separated ('' = none)
  ARGV[13] '1' to require that no send lease is running (field leaseUntil <= now)
  ARGV[14] fields to increment by one, comma-separated ('' = none)
  ARGV[15..] field, value pairs to set

  Returns {1, version, streamId, fields} on success, where fields is the record after the change
  (HGETALL, so the caller need not read it again), {0, currentState} when the state was not
  expected, {0, currentState, leaseUntil} when a send lease is still running.
]]
local current = redis.call('HGET', KEYS[1], 'state')
if not current then current = '-' end

local allowed = false
for state in string.gmatch(ARGV[2], '[^,]+') do
  if state == current then allowed = true end
end
if not allowed then return {0, current} end

local now = ARGV[5]
if ARGV[13] == '1' then
  local lease = redis.call('HGET', KEYS[1], 'leaseUntil')
  if lease and tonumber(lease) > tonumber(now) then return {0, current, lease} end
end
if #ARGV >= 15 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 15))
end
if ARGV[14] ~= '' then
  for field in string.gmatch(ARGV[14], '[^,]+') do redis.call('HINCRBY', KEYS[1], field, 1) end
end
if ARGV[12] ~= '' then
  for field in string.gmatch(ARGV[12], '[^,]+') do redis.call('HDEL', KEYS[1], field) end
  -- A hash that once held a long value (the job payload) keeps the large hashtable encoding for good;
  -- written anew it takes the compact listpack encoding again when every value is short.
  local fields = redis.call('HGETALL', KEYS[1])
  local ttl = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  if #fields > 0 then redis.call('HSET', KEYS[1], unpack(fields)) end
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
end

local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local streamId = ''
if ARGV[7] ~= '' then
  version = version + 1
  local common = redis.call('HMGET', KEYS[1], 'walletId', 'coin', 'metadata')
  streamId = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[9], '*',
    'event', ARGV[7],
    'sequenceId', ARGV[1],
    'walletId', common[1] or '',
    'coin', common[2] or '',
    'version', tostring(version),
    'at', ARGV[6],
    'data', ARGV[8],
    'metadata', common[3] or '')
  local ids = redis.call('HGET', KEYS[1], 'events')
  if ids then ids = ids .. ',' .. streamId else ids = streamId end
  redis.call('HSET', KEYS[1], 'events', ids)
end
redis.call('HSET', KEYS[1], 'state', ARGV[3], 'version', version, 'updatedAt', now)

if ARGV[4] == '1' then
  redis.call('PEXPIRE', KEYS[1], ARGV[10])
  if ARGV[11] ~= '' then
    redis.call('ZREM', KEYS[3], ARGV[11])
    redis.call('ZADD', KEYS[4], now, ARGV[11])
  end
elseif ARGV[11] ~= '' then
  redis.call('ZADD', KEYS[3], now, ARGV[11])
end
return {1, version, streamId, redis.call('HGETALL', KEYS[1])}
