-- GCRA (generic cell rate algorithm): requests are spaced period/limit apart on average, and up
-- to `burst` may arrive back to back. Kept in its exact "bucket level" form (see `bucket` in
-- common.lua): the theoretical arrival time is t + level/limit, stored as its two integer parts
-- instead of one fractional timestamp that doubles could not hold exactly.
--
-- KEYS: one, the rule's state key.
-- State: a string "<t>:<level>" (t in µs since the epoch, level in units of 1/period request),
--        written only when a request is admitted, with a TTL at the moment the bucket is empty.
--        t never moves back (see `bucket_at` in common.lua).
-- Rule arguments (see decide.lua): limit and period (µs) divided by their gcd, burst, and the
-- horizon: the rule's max_delay (µs) times limit for a decision, a quota lease's for a grant
-- (see `bucket` in common.lua).
-- Returns verdict, remaining, used, full_after_us, retry_after_us, a write function to run if
-- every rule of the policy admits the request (nil when nothing is to be written), and the delay
-- in µs of a request admitted past the capacity.
LEVELS[2] = function(key, now, limit, capacity)
  local stored = redis.call('GET', key)
  if stored then
    -- Split at the first ':', in one call.
    local since, previous = string.match(stored, '^([^:]*):(.*)$')
    since, previous = tonumber(since), tonumber(previous)
    if since and previous then
      return bucket_at(previous, since, now, limit, capacity)
    end
  end
  return 0, now
end

ALGORITHMS[2] = function(key, now, cost, limit, period, burst, horizon)
  local level, at = LEVELS[2](key, now, limit, burst * period)
  local verdict, remaining, used, full_after, retry_after, new_level, delay =
    bucket(level, at - now, cost, limit, period, burst, horizon)
  local write = nil
  if new_level then
    write = function()
      redis.call('SET', key, string.format('%d:%d', at, new_level), 'PX', ttl_ms(full_after))
    end
  end
  return verdict, remaining, used, full_after, retry_after, write, delay
end
