-- Fixed window: at most `limit` units of cost per window of `period` microseconds. A window
-- starts with the first request a key makes after its previous window ended (windows are not
-- aligned to the epoch, so clients do not all reset at the same instant).
--
-- KEYS: one, the rule's state key.
-- State: a hash { s = window start (µs since the epoch), n = units used in the window },
--        written only when a request is admitted: whole, with a TTL at the end of the window,
--        when a window starts; its count alone (HINCRBY) while the window goes on. A start
--        ahead of now (the clock went back) is still that window, unless it lies more than a
--        period ahead: no window of this rule starts that late, so the state is foreign (another
--        rule's, or from before a clock step back by more than a period) and honouring it would
--        deny for as long as it lies ahead; a window starts now instead. So no reported wait or
--        TTL exceeds two periods.
-- Rule arguments (see decide.lua): limit, period (µs); burst and the fourth are unused.
-- Returns verdict, remaining, used, full_after_us, retry_after_us and a write function to run
-- if every rule of the policy admits the request (nil when nothing is to be written).
ALGORITHMS[1] = function(key, now, cost, limit, period)
  local state = redis.call('HMGET', key, 's', 'n')
  local start, used = tonumber(state[1]), tonumber(state[2])
  local continues = true
  if start == nil or used == nil or now >= start + period or start - now > period then
    start, used, continues = now, 0, false
  end
  local full_after = start + period - now
  -- `used` can exceed `limit` when a rule's limit was lowered while its window was live.
  local room = math.max(0, limit - used)
  if cost > limit then
    return NEVER, room, used, full_after, 0, nil
  end
  if used + cost > limit then
    return DENIED, room, used, full_after, full_after, nil
  end
  used = used + cost
  local write = nil
  if cost > 0 and continues then
    -- The window goes on: its start and its TTL (the window's end) were written when it began,
    -- so one command counts the cost, where three would on every admitted request.
    write = function()
      redis.call('HINCRBY', key, 'n', cost)
    end
  elseif cost > 0 then
    write = function()
      redis.call('HSET', key, 's', num(start), 'n', num(used))
      redis.call('PEXPIRE', key, ttl_ms(full_after))
    end
  end
  return ALLOWED, limit - used, used, full_after, 0, write
end
