-- Gives back the units of a quota lease (grant.lua) that were never spent. Composed after
-- common.lua and the algorithms (it uses no algorithm's decision, only the buckets' stored
-- levels, `LEVELS`).
--
-- KEYS[i]:  the state key of rule i, as for the grant.
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME).
-- ARGV[2]:  the units to give back (>= 1).
-- ARGV[3]:  lower bound for written TTLs in ms, as in decide.lua.
-- ARGV[4 + 6*(i-1) .. 9 + 6*(i-1)]: rule i: algorithm id (1 fixed window, 2 GCRA, 5 token
--           bucket), limit, period, burst (as in decide.lua), then the two integers of the rule's
--           state that the grant replied.
-- Reply:    nothing.
--
-- Giving back never lets the fleet admit more than it would have had the units never been
-- reserved:
-- - fixed window: units go back only to the window they were reserved in (same start); a later
--   window never held them;
-- - GCRA and token bucket: the level is lowered by the units, but by no more than what is left
--   of the grant's own level drained to now: capacity that time has already returned (the bucket
--   drained past the reserved units) is not returned a second time. The level is one number
--   shared by every instance, so whose units are drained first does not matter.
local now = call_time(ARGV[1])
local units = tonumber(ARGV[2])
MIN_TTL_MS = tonumber(ARGV[3])

-- The level (units of 1/period request) a bucket should drop by: `units` requests, but no more
-- than the grant's level at `granted_at`, drained to now.
local function bucket_refund(limit, period, granted_at, granted_level)
  local left = granted_level
  if now > granted_at then
    left = drain(granted_level, granted_at, now, limit)
  end
  return math.min(units * period, left)
end

for i = 1, #KEYS do
  local base = 4 + 6 * (i - 1)
  local id, limit, period, burst = ARGV[base], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]),
    tonumber(ARGV[base + 3])
  local a, b = tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5])
  local key = KEYS[i]
  if id == '1' then
    local state = redis.call('HMGET', key, 's', 'n')
    local start, used = tonumber(state[1]), tonumber(state[2])
    if start == a and used then
      -- HSET keeps the window's TTL.
      redis.call('HSET', key, 'n', num(math.max(0, used - units)))
    end
  elseif id == '2' or id == '5' then
    local capacity = burst * period
    local current, at = LEVELS[tonumber(id)](key, now, limit, capacity)
    local refund = bucket_refund(limit, period, a, b)
    if refund > 0 and current > 0 then
      local new_level = math.max(0, current - refund)
      local ttl = ttl_ms(from_now(ceil_div(new_level, limit), at - now))
      if new_level == 0 then
        redis.call('DEL', key)
      elseif id == '2' then
        redis.call('SET', key, num(at) .. ':' .. num(new_level), 'PX', ttl)
      else
        redis.call('HSET', key, 't', num(at), 'k', num(capacity - new_level))
        redis.call('PEXPIRE', key, ttl)
      end
    end
  else
    return redis.error_reply('not a leasable rate-limit algorithm: ' .. tostring(id))
  end
end
return nil
