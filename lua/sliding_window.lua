-- Sliding window counter (with one sub-interval, Cloudflare's weighted previous window).
-- The period is split into n sub-intervals of `size` µs, aligned to the epoch: sub-interval i
-- covers [i * size, (i + 1) * size). At time now, `offset` µs into sub-interval `current`, the
-- window (now - period, now] holds sub-intervals current-n+1 .. current entirely and the trailing
-- one, current-n, for its last size - offset µs:
--   used = sum(count[current-n+1 .. current]) + ceil(count[current-n] * (steps - elapsed) / steps)
-- with the offset measured in `steps` of `quantum` µs (elapsed = floor(offset / quantum)), quantum
-- being the smallest that keeps limit * steps within 2^52 (1 µs unless limit * size passes it).
-- Every product is then an exact integer, and rounding the weighted count up (the elapsed steps
-- down) never admits more than the exact weight would.
-- A clock behind the newest counted sub-interval (it went back) is taken to be at that
-- sub-interval's start: the estimate is then at its highest, and no count ever lies ahead.
-- Unless the newest lies more than n sub-intervals (a period) ahead: no count of this rule
-- matters that long, so the counts are foreign (another rule's, or from before a clock step back
-- by more than a period) and honouring them would deny for as long as they lie ahead. They then
-- count as nothing and the next admission replaces them, so no reported wait or TTL exceeds two
-- periods and a sub-interval.
--
-- KEYS: one, the rule's state key.
-- State: a hash { <sub-interval index> = units admitted in it }, one hash per key (so one cluster
--        slot). Read first; written only when a request is admitted: HDEL of the sub-intervals
--        that slid out (DEL of foreign counts), HINCRBY of the current one, TTL set to when the
--        newest has slid out.
-- Rule arguments (see decide.lua): limit, period (µs), burst (unused), sub-intervals (1 to 100,
--        dividing the period into whole µs, checked when the policy is built).
-- Returns verdict, remaining, used, full_after_us, retry_after_us and a write function to run
-- if every rule of the policy admits the request (nil when nothing is to be written).

local WEIGHT_RANGE = 4503599627370496 -- 2^52

-- The earliest time (µs since the epoch) at which a request of `cost` fits, if nothing else is
-- admitted meanwhile. The estimate only falls as time passes: within a sub-interval the trailing
-- weight shrinks step by step, and at a boundary the oldest full sub-interval becomes the trailing
-- one at weight 1, so the estimate is continuous there. Each sub-interval from `current` on is
-- tried in turn; by current + n + 1 every count has left.
local function window_fits_at(w, counts, current, elapsed, full, trailing, cost)
  local ahead = 0
  while ahead <= w.n + 1 do
    local fit = w.limit - cost - full
    if fit >= 0 then
      -- trailing * (steps - at) <= fit * steps, for the smallest whole step `at`.
      local at = 0
      if trailing > 0 then
        at = math.max(0, w.steps - floor_div(fit * w.steps, trailing))
      end
      if ahead == 0 then
        at = math.max(at, elapsed)
      end
      if at < w.steps then
        return (current + ahead) * w.size + at * w.quantum
      end
    end
    ahead = ahead + 1
    trailing = counts[current + ahead - w.n] or 0
    full = full - trailing
  end
  -- Unreachable: past the last sub-interval nothing is counted and cost <= limit.
  return (current + w.n + 1) * w.size
end

ALGORITHMS[4] = function(key, now, cost, limit, period, _, n)
  local size = period / n
  local quantum = ceil_div(size, floor_div(WEIGHT_RANGE, limit))
  local steps = ceil_div(size, quantum)

  local fields = redis.call('HGETALL', key)
  local counts, names, newest = {}, {}, nil
  for i = 1, #fields, 2 do
    local index, count = tonumber(fields[i]), tonumber(fields[i + 1])
    if index and count then
      counts[index] = count
      names[index] = fields[i]
      if newest == nil or index > newest then
        newest = index
      end
    end
  end

  local current = floor_div(now, size)
  local offset = now - current * size
  local foreign = newest ~= nil and newest > current + n
  if foreign then
    counts, newest = {}, nil
  elseif newest and newest > current then
    current, offset = newest, 0
  end
  local full = 0
  for index, count in pairs(counts) do
    if index > current - n then
      full = full + count
    end
  end
  local trailing = counts[current - n] or 0
  local elapsed = floor_div(offset, quantum)
  local used = full + ceil_div(trailing * (steps - elapsed), steps)
  -- The full limit is back once the newest counted sub-interval has slid out entirely.
  local full_after = 0
  if newest and newest >= current - n then
    full_after = (newest + n + 1) * size - now
  end

  local room = math.max(0, limit - used)
  if cost > limit then
    return NEVER, room, used, full_after, 0, nil
  end
  if used + cost > limit then
    local w = { limit = limit, n = n, size = size, quantum = quantum, steps = steps }
    local retry_after = window_fits_at(w, counts, current, elapsed, full, trailing, cost) - now
    return DENIED, room, used, full_after, retry_after, nil
  end
  used = used + cost
  local write = nil
  if cost > 0 then
    full_after = (current + n + 1) * size - now
    write = function()
      if foreign then
        -- However many fields it has, none is kept.
        redis.call('DEL', key)
      else
        local stale = {}
        for index, name in pairs(names) do
          if index < current - n then
            stale[#stale + 1] = name
          end
        end
        -- At most n + 1 fields are live, so this stays small.
        if #stale > 0 then
          redis.call('HDEL', key, unpack(stale))
        end
      end
      redis.call('HINCRBY', key, num(current), num(cost))
      redis.call('PEXPIRE', key, ttl_ms(full_after))
    end
  end
  return ALLOWED, limit - used, used, full_after, 0, write
end
