-- Token bucket (as in Stripe's rate limiters): up to `burst` tokens, refilled at `limit` per `period`; a request
-- takes `cost` tokens or is denied. The same meter as GCRA (`bucket` in common.lua), kept as the
-- tokens left instead of the level used: in units of 1/period of a token,
-- tokens = burst * period - level, and refilling `limit` units per µs is draining the level at
-- that rate. So both decide alike; only the stored form differs. Fractional tokens stay exact.
--
-- KEYS: one, the rule's state key.
-- State: a hash { t = time in µs since the epoch (never moved back, see `bucket_at` in
--        common.lua), k = tokens left then, in units of 1/period of a token }. Read first;
--        written only when a request is admitted, in one atomic script (no INCR-then-EXPIRE
--        race), with the TTL at the moment the bucket is full again: in ms, rounded up, at least
--        1 ms (never the floor(2 * capacity / rate) of Stripe's sketch, which is 0 for a small bucket at a
--        high rate).
-- Rule arguments (see decide.lua): limit and period (µs) divided by their gcd, burst, and the
-- horizon: the rule's max_delay (µs) times limit for a decision, a quota lease's for a grant
-- (see `bucket` in common.lua). A lease reserved ahead
-- leaves fewer than no tokens: `k` is then negative.
-- Returns verdict, remaining, used, full_after_us, retry_after_us, a write function to run if
-- every rule of the policy admits the request (nil when nothing is to be written), and the delay
-- in µs of a request admitted past the capacity.
LEVELS[5] = function(key, now, limit, capacity)
  local state = redis.call('HMGET', key, 't', 'k')
  local since, tokens = tonumber(state[1]), tonumber(state[2])
  if since and tokens then
    -- More tokens than the capacity (the burst was lowered while the state was live) is a full
    -- bucket.
    return bucket_at(math.max(0, capacity - tokens), since, now, limit, capacity)
  end
  return 0, now
end

ALGORITHMS[5] = function(key, now, cost, limit, period, burst, horizon)
  local capacity = burst * period
  local level, at = LEVELS[5](key, now, limit, capacity)
  local verdict, remaining, used, full_after, retry_after, new_level, delay =
    bucket(level, at - now, cost, limit, period, burst, horizon)
  local write = nil
  if new_level then
    write = function()
      redis.call('HSET', key, 't', num(at), 'k', num(capacity - new_level))
      redis.call('PEXPIRE', key, ttl_ms(full_after))
    end
  end
  return verdict, remaining, used, full_after, retry_after, write, delay
end
