-- Sliding log: exactly `limit` units of cost in any interval of `period` microseconds. Every
-- admitted unit is one entry, scored by its time; an entry at time t counts while now - period < t
-- and leaves the window at t + period.
--
-- KEYS: one, the rule's state key.
-- State: a sorted set of entries, score = time in µs since the epoch, member = "<time>:<n>" with
--        n = 1, 2, ... among the entries of that same microsecond (so a cost of 3, or two requests
--        in one µs, are distinct entries). Read first; written only when a request is admitted:
--        entries at or before the window's start are dropped, the new ones added, and the TTL set
--        to when the newest leaves. A key so never holds more than `limit` entries.
--        Entries ahead of now (the clock went back) count, unless the newest lies more than a
--        period ahead: no entry of this rule can matter that long, so the log is foreign
--        (another rule's, or from before a clock step back by more than a period) and honouring
--        it would deny for as long as it lies ahead. It then counts as empty and the next
--        admission replaces it, so no reported wait or TTL exceeds two periods.
-- Rule arguments (see decide.lua): limit (at most 10,000, checked when the policy is built),
--        period (µs); burst and the fourth are unused.
-- Returns verdict, remaining, used, full_after_us, retry_after_us and a write function to run
-- if every rule of the policy admits the request (nil when nothing is to be written).

-- ZADD takes its members as arguments, and Lua's unpack() has a stack limit of a few thousand:
-- add large costs in batches.
local ZADD_BATCH = 500

ALGORITHMS[3] = function(key, now, cost, limit, period)
  local cutoff = now - period
  local in_window = '(' .. num(cutoff)
  local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  local foreign = newest ~= nil and newest - now > period
  local count = 0
  if newest ~= nil and newest > cutoff and not foreign then
    count = redis.call('ZCOUNT', key, in_window, '+inf')
  end
  -- When the newest entry leaves the window, the full limit is back.
  local full_after = 0
  if count > 0 then
    full_after = newest + period - now
  end
  -- `count` exceeds `limit` only when the limit was lowered while the log was live.
  local room = math.max(0, limit - count)
  if cost > limit then
    return NEVER, room, count, full_after, 0, nil
  end
  local excess = count + cost - limit
  if excess > 0 then
    -- The request fits once `excess` entries have left: the excess-th oldest is the last.
    local oldest = redis.call('ZRANGEBYSCORE', key, in_window, '+inf', 'WITHSCORES', 'LIMIT', excess - 1, 1)
    return DENIED, room, count, full_after, tonumber(oldest[2]) + period - now, nil
  end
  local used = count + cost
  local write = nil
  if cost > 0 then
    full_after = math.max(full_after, period)
    write = function()
      if foreign then
        redis.call('DEL', key)
      else
        redis.call('ZREMRANGEBYSCORE', key, '-inf', num(cutoff))
      end
      -- Entries of one microsecond are added and dropped together, so they are numbered 1..n.
      local at = num(now)
      local taken = redis.call('ZCOUNT', key, at, at)
      local added = 0
      while added < cost do
        local args = {}
        local batch = math.min(ZADD_BATCH, cost - added)
        for i = 1, batch do
          args[2 * i - 1] = at
          args[2 * i] = at .. ':' .. num(taken + added + i)
        end
        redis.call('ZADD', key, unpack(args))
        added = added + batch
      end
      redis.call('PEXPIRE', key, ttl_ms(full_after))
    end
  end
  return ALLOWED, limit - used, used, full_after, 0, write
end
