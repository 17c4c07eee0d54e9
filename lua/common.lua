-- Helpers shared by every algorithm. Not a script on its own: src/store/redis/script/ puts
-- common.lua and one file per algorithm before the entry points (decide.lua, grant.lua,
-- refund.lua, each holding the KEYS/ARGV/reply contract of its call), either as one function
-- library (Redis 7+: the helpers and algorithms defined once, when it is loaded) or as one
-- script per entry point (EVALSHA: defined again on every call).
--
-- Numbers: Lua numbers are doubles. Every value these scripts keep is an integer-valued double
-- below 2^53 (times in microseconds, counts, bucket levels in scaled units), so arithmetic on
-- them is exact; the Rust mirror in src/algorithm/ performs the same operations in the same
-- order and reaches bit-identical results.
-- Replies: Redis truncates a Lua number to an integer reply, so only integers are returned.
-- Stored values are written with num(), because Lua's own number-to-string conversion keeps
-- only 14 significant digits and would corrupt microsecond timestamps.

local ALGORITHMS = {}

-- For the bucket algorithms (GCRA, token bucket), by the same ids: their state's level and the
-- time it is evaluated at, for a request at `now` (see `bucket_at`), as the algorithm reads it:
-- LEVELS[id](key, now, limit, capacity) returns level, at. For the quota lease scripts.
local LEVELS = {}

-- Verdicts, as returned to the caller.
local ALLOWED, DENIED, NEVER = 1, 0, -1

-- Lower bound for every TTL written, in milliseconds; set by check.lua from ARGV[3].
local MIN_TTL_MS = 0

-- The number an argument of a call spells, as tonumber gives it, remembered. Lua's tonumber is
-- C's strtod, the dearest step of a decision after the commands it runs (about 1,800
-- instructions a number in Redis 7.0, more than a table lookup and an HMGET's parsing together:
-- docs/performance.md), and the arguments of a decision repeat from call to call: its rules'
-- integers, its costs, the size of its batch, the seconds of the server's clock. In a function
-- library, whose locals live as long as the library, each distinct one is converted once; as a
-- script (Redis 6.2, or functions turned off) the table lives for one call. Bounded: past
-- ARG_NUMBERS_MAX distinct strings it starts again, so a stream of fresh values (a caller's
-- explicit times) costs a lookup and an insertion each, never memory.
local ARG_NUMBERS_MAX = 1024
local arg_numbers, arg_numbers_held = {}, 0
local function arg_number(s)
  local n = arg_numbers[s]
  if n == nil then
    n = tonumber(s)
    if n == nil then
      return nil
    end
    if arg_numbers_held >= ARG_NUMBERS_MAX then
      arg_numbers, arg_numbers_held = {}, 0
    end
    arg_numbers[s] = n
    arg_numbers_held = arg_numbers_held + 1
  end
  return n
end

-- The time of the call in µs since the Unix epoch: `arg` as the caller gave it, or the Redis
-- server's clock (TIME) when it is empty. Its seconds repeat for a second: remembered.
local function call_time(arg)
  if arg == '' then
    local time = redis.call('TIME')
    return arg_number(time[1]) * 1000000 + tonumber(time[2])
  end
  return tonumber(arg)
end

local function num(x)
  -- '%d' goes through a C long long in Redis's Lua 5.1, exact for these integers below 2^53,
  -- and formats faster than '%.17g', which gives the same digits.
  return string.format('%d', x)
end

-- floor(a / b) for non-negative integer-valued a and positive integer-valued b: the division is
-- rounded by the FPU, so step the quotient back or forth by one when it landed on the wrong side.
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- ceil(a / b), same contract as floor_div.
local function ceil_div(a, b)
  local q = math.ceil(a / b)
  if q > 0 and (q - 1) * b >= a then
    q = q - 1
  elseif q * b < a then
    q = q + 1
  end
  return q
end

-- A TTL in milliseconds for state that is worth keeping for `us` more microseconds: rounded up,
-- never below 1 ms (a zero or negative TTL would delete or persist the key).
local function ttl_ms(us)
  return math.max(1, ceil_div(us, 1000), MIN_TTL_MS)
end

-- A wait of `us` µs from a time `lead` µs ahead of now, counted from now (no wait stays none).
local function from_now(us, lead)
  if us > 0 then
    return us + lead
  end
  return 0
end

-- The bucket shared by GCRA and the token bucket (they are the same meter, kept differently).
-- A level is measured in units of 1/period of a request: one request adds `period` units and the
-- bucket drains `limit` units per microsecond, so everything stays an exact integer. `limit` and
-- `period` arrive divided by their gcd, which keeps `burst * period` below 2^53.
--   level: units in the bucket at the time it is evaluated (see `bucket_at`)
--   lead: µs from now to that time (0 unless the clock went back); reported waits include it
--   horizon: how far past the capacity a level may go: a rule's `max_delay` (µs) times `limit`
--     for a decision (0 for a rule that never delays), where a request admitted past the capacity
--     waits until the level has drained back to it (its delay) before it is served; for a quota
--     lease (grant.lua), units that drain back within the lease's lifetime, reserved now and spent
--     by the lessee no earlier than they conform (src/store/redis/local/leases/). The caller keeps
--     `capacity + horizon` below 2^53. The Rust mirror is src/algorithm/bucket.rs.
-- Returns verdict, remaining, used, full_after_us, retry_after_us, new level (nil if unchanged),
-- and the delay in µs (0 unless admitted past the capacity). A refusal's retry_after is when the
-- request would be admitted, to wait then up to the horizon's delay.
local function bucket(level, lead, cost, limit, period, burst, horizon)
  local capacity = burst * period
  local need = cost * period
  -- The level can exceed the capacity when a rule's burst was lowered while state was live, or
  -- units were admitted to wait or reserved ahead by a lease.
  local room = math.max(0, capacity - level)
  if need > capacity + horizon then
    return NEVER, floor_div(room, period), ceil_div(level, period),
      from_now(ceil_div(level, limit), lead), 0, nil, 0
  end
  -- `capacity + horizon - need` first: `level + need` could pass 2^53 when the level is near a
  -- capacity close to it; this order keeps every intermediate value within
  -- [-(capacity + horizon), capacity + horizon].
  local excess = level - (capacity + horizon - need)
  if excess > 0 then
    return DENIED, floor_div(room, period), ceil_div(level, period),
      from_now(ceil_div(level, limit), lead), from_now(ceil_div(excess, limit), lead), nil, 0
  end
  local new_level = level + need
  local changed = nil
  if cost > 0 then
    changed = new_level
  end
  -- Past the capacity: the request waits until the level has drained back to it. A peek (cost 0)
  -- takes no place in the schedule, and waits for none.
  local delay = 0
  if new_level > capacity and cost > 0 then
    delay = from_now(ceil_div(new_level - capacity, limit), lead)
  end
  return ALLOWED, floor_div(math.max(0, capacity - new_level), period), ceil_div(new_level, period),
    from_now(ceil_div(new_level, limit), lead), 0, changed, delay
end

-- The level of a bucket that held `level` units at time `since`, drained to `now` (>= since).
local function drain(level, since, now, limit)
  -- The product can pass 2^53 after a long idle time, but rounding is monotonic: whenever the
  -- exact product is below the (exact) level, so is the rounded one, and it is exact.
  local drained = (now - since) * limit
  if drained >= level then
    return 0
  end
  return level - drained
end

-- A bucket that held `level` units at time `since`, as it stands for a request at `now`: its
-- level and the time it is evaluated at, which is written back as its new `since`.
-- Time never runs backwards for a bucket. A clock behind `since` (the server's clock stepped
-- back, or callers' times disagree) finds the bucket as it was at `since`, neither drained nor
-- refilled, and the bucket stays at `since`: moving `since` back to now would let the next later
-- request drain the interval from now to `since` a second time, a refund (alternating two times
-- a second apart once admitted every request).
-- But no bucket of this rule is worth honouring further ahead than a full one takes to drain
-- (`capacity` units): such a `since` is foreign (another rule's state, a clock stepped back by
-- more than that) and would hold the client back for as long as it lies ahead. The bucket then
-- counts as empty, from now, so no reported wait or TTL exceeds twice the drain time.
local function bucket_at(level, since, now, limit, capacity)
  local lead = since - now
  if lead <= 0 then
    return drain(level, since, now, limit), now
  end
  -- lead > capacity / limit, exactly: both operands are integers below 2^53, so a product at
  -- or below the capacity is exact, and one above it rounds to no less than the capacity + 1.
  if lead * limit > capacity then
    return 0, now
  end
  return level, since
end
