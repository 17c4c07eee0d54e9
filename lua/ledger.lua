-- The ledger of global policies (src/store/region/): which region holds how much of each key's
-- windows of quota. Stands alone: no helper, no algorithm. Every write is a move with an id,
-- applied once.
--
-- Windows (src/policy/global.rs): a global rule is allotted in windows aligned to the Unix epoch:
-- a fixed window's own, a sliding window's sub-intervals, a bucket's period split so that a
-- window refills at most half its burst. Every take and credit names the rule's *meter*, how the
-- grants of consecutive windows are bounded (src/store/region/meter.rs):
--   window:  at most the limit granted of a window (its free units, `f`).
--   sliding: at most the limit granted of any k consecutive windows: a take of window s reads the
--            grants `t` of windows s-k+1 .. s+k-1.
--   bucket:  a token bucket of the burst, refilled limit/k a window, kept in its own hash and
--            evaluated at the window taken, or at the latest window it was evaluated at if that is
--            later; a take of a window more than one behind that gets nothing.
--
-- KEYS[1]:  the ledger's birth, a string "<epoch> <declared at, µs> <max skew, µs>", written
--           only by 'declare' (`ratelimit-gateway ledger declare`, `region::Ledger::declare`).
--           A ledger without it (a Redis that restarted empty, or was never declared) grants
--           nothing: it cannot know what was granted before it.
-- KEYS[2]:  (take, credit) the key's window, a hash { f = units free (a window's; a meter's as the
--           last take left them, for an operator to read), t = units granted in all (net of
--           credits; a sliding window's), g:<region> = units the region holds, n:<region> = the
--           region's demand, in units per window, as it last reported it }.
-- KEYS[3]:  (take) the previous window's hash: its n:<region> stand for the demand of a region
--           not heard from yet in this window, so that the first taker does not take everything.
-- KEYS[4]:  (take, credit) the window's moves, a hash { <move id> = units }, so that a retried
--           or reordered take or credit applies once.
-- KEYS[5..] (take, credit) sliding: the hashes of windows s-k+1 .. s+k-1, in order (2k - 1 keys);
--           bucket: the bucket, a hash { s = the window it was evaluated at, l = its tokens then,
--           in units of 1/k }. None for a window.
-- ARGV[1]:  'take', 'credit', 'declare' or 'birth'.
-- ARGV[2]:  the TTL in ms of what is written (the window's end, and as long as its grants bear on
--           others: a period for the windows, a bucket's refill and two windows).
-- take:     ARGV[3] region, ARGV[4] move id, ARGV[5] units wanted now (0: none), ARGV[6] the
--           region's demand (units per window), ARGV[7] the rule's limit, ARGV[8] window start (µs
--           since the epoch), ARGV[9] the fence (µs), ARGV[10..14] the meter.
--           Each region's share is the window's capacity (a window's limit; a meter's units free
--           and held) split in proportion to the demands (its whole demand when all fit). A
--           region gets what it wants, within what is free, up to its share less what it holds,
--           or more when the others' shares are covered. A take of 0 units only reports the
--           demand. Reply {units granted, epoch, 1 if the window is fenced else 0, the region's
--           share, the units it holds here (the grant included), the units the other regions
--           wait for: what their shares lack beyond the free units}: a region that holds more
--           than its share gives back what the others wait for (surrender, then credit). A
--           retried take answers its first grant and 0 for the last three, as a fenced one does.
--           A window that an earlier life of the ledger may have metered (it starts no later
--           than the fence and twice the skew after the declaration) is fenced: nothing is
--           granted.
-- credit:   ARGV[3] region, ARGV[4] move id, ARGV[5] units surrendered, ARGV[6..10] the meter.
--           Reply the units free.
-- the meter: its name ('window', 'sliding' or 'bucket'), windows per period k, burst (a
--           bucket's), the rule's limit, the window's index.
-- declare:  ARGV[3] max skew (µs), ARGV[4] 'once' or 'anew'. 'anew' writes a new birth (a new
--           epoch: the Redis time of the declaration, µs, which fences the windows an earlier life
--           may have granted). 'once' writes one only where there is none: a ledger declared
--           with the same max skew is left as it is, one declared with another is an error
--           (CONFLICT) and left as it is. Reply {epoch, 1 if written now else 0}.
-- birth:    no more arguments. Reply the birth string, or '' for a ledger never declared.
local op, ttl = ARGV[1], tonumber(ARGV[2])

local function now_micros()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local birth = redis.call('GET', KEYS[1])
if op == 'birth' then
  return birth or ''
end
if op == 'declare' then
  local skew = tonumber(ARGV[3])
  if birth and ARGV[4] == 'once' then
    local epoch, _, was = string.match(birth, '^(%d+) (%d+) (%d+)$')
    if tonumber(was) == skew then
      return {tonumber(epoch), 0}
    end
    return redis.error_reply(string.format('CONFLICT this ledger was declared with max_skew %d us, '
      .. 'not %d us: it is left as it is (declare it anew to change it, which fences the windows '
      .. 'an earlier declaration may have granted)', tonumber(was), skew))
  end
  local epoch = now_micros()
  redis.call('SET', KEYS[1], string.format('%d %d %d', epoch, epoch, skew))
  return {epoch, 1}
end

if not birth then
  return redis.error_reply('UNBORN ledger not declared: this ledger was never declared, or its '
    .. 'Redis restarted empty: declare it (ratelimit-gateway ledger declare FILE, or '
    .. 'region::Ledger::declare)')
end
local epoch, declared, skew = string.match(birth, '^(%d+) (%d+) (%d+)$')
epoch, declared, skew = tonumber(epoch), tonumber(declared), tonumber(skew)

local window, moves = KEYS[2], KEYS[4]
local region, id = ARGV[3], ARGV[4]

-- The fields `<prefix>:<region>` of a window's hash, by region.
local function by_region(flat, prefix)
  local found = {}
  for i = 1, #flat, 2 do
    local name = string.match(flat[i], '^' .. prefix .. ':(.*)$')
    if name then
      found[name] = tonumber(flat[i + 1])
    end
  end
  return found
end

-- The meter's arguments, from ARGV[at].
local function meter_of(at)
  return {
    name = ARGV[at], windows = tonumber(ARGV[at + 1]), burst = tonumber(ARGV[at + 2]),
    limit = tonumber(ARGV[at + 3]), index = tonumber(ARGV[at + 4]),
  }
end

-- What a sliding window may still grant of its window: the limit, less the grants of the fullest
-- k consecutive windows that hold it.
local function sliding_free(meter)
  local k = meter.windows
  local grants = {}
  for i = 1, 2 * k - 1 do
    grants[i] = tonumber(redis.call('HGET', KEYS[4 + i], 't')) or 0
  end
  local sum = 0
  for i = 1, k do
    sum = sum + grants[i]
  end
  local fullest = sum
  for first = 2, k do
    sum = sum + grants[first + k - 1] - grants[first - 1]
    fullest = math.max(fullest, sum)
  end
  return math.max(0, meter.limit - fullest)
end

-- A bucket's tokens (in units of 1/k) and the window they are evaluated at, for a take of the
-- meter's window; nil for a window more than one behind the bucket.
local function bucket_at(meter)
  local capacity = meter.burst * meter.windows
  local state = redis.call('HMGET', KEYS[5], 's', 'l')
  local at, level = tonumber(state[1]), tonumber(state[2])
  if not at or not level then
    return capacity, meter.index
  end
  if meter.index < at - 1 then
    return nil
  end
  if meter.index > at then
    level = math.min(capacity, level + (meter.index - at) * meter.limit)
    at = meter.index
  end
  return level, at
end

if op == 'take' then
  local want, demand, quota = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  local start, fence = tonumber(ARGV[8]), tonumber(ARGV[9])
  local meter = meter_of(10)
  if start <= declared + fence + 2 * skew then
    return {0, epoch, 1, 0, 0, 0}
  end
  local before = tonumber(redis.call('HGET', moves, id))
  if before then
    return {before, epoch, 0, 0, 0, 0}
  end
  local flat = redis.call('HGETALL', window)
  local held = by_region(flat, 'g')
  local free, level, at = quota, nil, nil
  if meter.name == 'window' then
    for i = 1, #flat, 2 do
      if flat[i] == 'f' then
        free = tonumber(flat[i + 1])
      end
    end
  elseif meter.name == 'sliding' then
    free = sliding_free(meter)
  else
    level, at = bucket_at(meter)
    -- Levels stay below 2^53 (a burst times k, about twice the limit): the quotient is exact.
    free = level and math.floor(level / meter.windows) or 0
  end
  -- What the window can hold in all, shared by demand: a window's limit, a meter's units free now
  -- and those held.
  local capacity = quota
  if meter.name ~= 'window' then
    capacity = free
    for _, units in pairs(held) do
      capacity = capacity + units
    end
  end
  local demands = by_region(redis.call('HGETALL', KEYS[3]), 'n')
  for name, units in pairs(by_region(flat, 'n')) do
    demands[name] = units
  end
  demands[region] = demand
  local total = 0
  for _, units in pairs(demands) do
    total = total + units
  end
  local function share(name)
    if total <= capacity then
      return demands[name]
    end
    return math.floor(capacity * demands[name] / total)
  end
  -- What the other regions' shares still lack: kept free for them.
  local owed = 0
  for name, _ in pairs(demands) do
    if name ~= region then
      owed = owed + math.max(0, share(name) - (held[name] or 0))
    end
  end
  local mine = share(region) - (held[region] or 0)
  local give = math.max(0, math.min(want, free, math.max(mine, free - owed)))
  redis.call('HSET', window, 'f', free - give, 'n:' .. region, demand)
  redis.call('HINCRBY', window, 'g:' .. region, give)
  if meter.name == 'sliding' then
    redis.call('HINCRBY', window, 't', give)
  elseif meter.name == 'bucket' and level then
    -- '%d': Lua's own number-to-string conversion keeps only 14 significant digits.
    redis.call('HSET', KEYS[5], 's', string.format('%d', at), 'l',
      string.format('%d', level - give * meter.windows))
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
  redis.call('HSET', moves, id, give)
  redis.call('PEXPIRE', window, ttl)
  redis.call('PEXPIRE', moves, ttl)
  local waiting = math.max(0, owed - (free - give))
  return {give, epoch, 0, share(region), (held[region] or 0) + give, waiting}
elseif op == 'credit' then
  local before = tonumber(redis.call('HGET', moves, id))
  if before then
    return tonumber(redis.call('HGET', window, 'f')) or 0
  end
  local meter = meter_of(6)
  local units = tonumber(ARGV[5])
  local held = tonumber(redis.call('HGET', window, 'g:' .. region)) or 0
  -- A region gives back no more than it holds here: a credit that names more (a bug, or a
  -- window a fenced ledger never granted) must not create quota.
  units = math.max(0, math.min(units, held))
  redis.call('HSET', moves, id, units)
  -- `0 - x`, not `-x`: Lua's -0 reaches Redis as "-0", which HINCRBY refuses.
  redis.call('HINCRBY', window, 'g:' .. region, 0 - units)
  if meter.name == 'sliding' then
    redis.call('HINCRBY', window, 't', 0 - units)
  elseif meter.name == 'bucket' then
    -- Unspent units go back into the bucket where it stands: as if never granted, the bucket
    -- would hold at least as many now (it only fills, up to its burst).
    local state = redis.call('HMGET', KEYS[5], 's', 'l')
    local level = tonumber(state[2])
    if level then
      local capacity = meter.burst * meter.windows
      redis.call('HSET', KEYS[5], 'l',
        string.format('%d', math.min(capacity, level + units * meter.windows)))
      redis.call('PEXPIRE', KEYS[5], ttl)
    end
  end
  local free = redis.call('HINCRBY', window, 'f', units)
  redis.call('PEXPIRE', window, ttl)
  redis.call('PEXPIRE', moves, ttl)
  return free
end
return redis.error_reply('ERR unknown ledger operation ' .. tostring(op))
