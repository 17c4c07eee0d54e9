-- Concurrency permits: at most `limit` permits held at once per slot, each one expiring unless
-- renewed, so the permits of a crashed or partitioned server come back on their own.
--
-- KEYS[1]:  the slot key `<prefix>:<limit name>:cc:{<client key>}`: a sorted set of permit ids,
--           each scored by the moment it expires (µs since the Unix epoch).
-- ARGV[1]:  the operation: 'acquire', 'release' or 'renew'.
-- ARGV[2]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME).
-- ARGV[3]:  lower bound for the key's TTL in ms (0 in production; raised by callers that drive a
--           clock slower than real time, as in decide.lua).
-- acquire:  ARGV[4] permit id, ARGV[5] limit, ARGV[6] the permit's TTL in µs. Admits only while fewer than
--           `limit` permits are live. Reply: {admitted (1 or 0), live permits after the call, this
--           one included when admitted}. A refusal writes nothing.
-- release:  ARGV[4] permit id. Reply: {1 if it was live else 0, live permits after}.
-- renew:    ARGV[4] the permits' TTL in µs, ARGV[5..] permit ids. Reply: one integer per id, in order: 1 if
--           it now expires at now + TTL, 0 if it was gone (released or expired; an
--           expired permit is never revived, its slot may already be someone else's).
--
-- Every call that writes drops the expired permits (ZREMRANGEBYSCORE) and sets the key's TTL to
-- its latest expiry (PEXPIRE), so the set stays bounded and a key whose holders all died
-- disappears. An empty sorted set is deleted by Redis itself.
local key = KEYS[1]
local op = ARGV[1]
local now
if ARGV[2] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[2])
end
local min_ttl_ms = tonumber(ARGV[3])

-- Lua's own number-to-string conversion keeps 14 significant digits: too few for µs timestamps.
local function num(x)
  return string.format('%.17g', x)
end

local function live()
  return redis.call('ZCOUNT', key, '(' .. num(now), '+inf')
end

local function drop_expired()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', num(now))
end

-- The key lives exactly as long as its latest expiry (rounded up, at least 1 ms).
local function expire()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then
    local ms = math.ceil((tonumber(last[2]) - now) / 1000)
    redis.call('PEXPIRE', key, math.max(1, ms, min_ttl_ms))
  end
end

if op == 'acquire' then
  local id, limit, ttl = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
  local count = live()
  if count >= limit then
    return {0, count}
  end
  drop_expired()
  count = count + redis.call('ZADD', key, num(now + ttl), id)
  expire()
  return {1, count}
elseif op == 'release' then
  local id = ARGV[4]
  local score = redis.call('ZSCORE', key, id)
  local held = 0
  if score then
    if tonumber(score) > now then
      held = 1
    end
    redis.call('ZREM', key, id)
  end
  drop_expired()
  expire()
  return {held, redis.call('ZCARD', key)}
elseif op == 'renew' then
  local expires = num(now + tonumber(ARGV[4]))
  local reply = {}
  for i = 5, #ARGV do
    local score = redis.call('ZSCORE', key, ARGV[i])
    if score and tonumber(score) > now then
      -- GT: a renewal with a shorter ttl never shortens one granted before.
      redis.call('ZADD', key, 'GT', expires, ARGV[i])
      reply[#reply + 1] = 1
    else
      reply[#reply + 1] = 0
    end
  end
  drop_expired()
  expire()
  return reply
end
return redis.error_reply('unknown concurrency operation ' .. tostring(op))
