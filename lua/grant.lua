-- A quota lease: reserves up to `want` units of a client's quota under every rule of a policy in
-- one atomic call, for the caller to spend in process. Composed after common.lua and the
-- algorithms; only leasable algorithms (fixed window, GCRA, token bucket) are sent here (see
-- src/store/redis/leases/).
--
-- A bucket rule (GCRA, token bucket) reserves a rate, not only what the bucket holds now: units
-- up to `horizon` past its capacity, which drain back within the lease's lifetime. Unit j of the
-- grant (1-based) conforms `lead + ceil(max(0, over + j * period) / limit)` µs after the call
-- (`over` and `lead` in the reply), and the caller spends it no earlier, so the rule is never
-- exceeded; a saturated key then stays local for a whole lifetime per grant. A fixed window's
-- units are all spendable at once, within their window.
--
-- KEYS[i]:  the state key of rule i (one client, so one cluster slot).
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME).
-- ARGV[2]:  `need`, the cost of the request that asks (>= 1): granted in full (possibly to be
--           spent later) or denied.
-- ARGV[3]:  lower bound for written TTLs in ms, as in decide.lua.
-- ARGV[4]:  `want` (>= need): the most units to reserve.
-- ARGV[5 + 5*(i-1) .. 9 + 5*(i-1)]: rule i: algorithm id, limit, period, burst (as in
--           decide.lua), and its horizon in level units (a bucket's; 0 for a fixed window).
-- Reply:    the units granted (`want` or fewer, but at least `need`; 0 when denied), then 9
--           integers per rule: the 5 of decide.lua for a request of the granted cost (of cost
--           `need` when denied); the rule's state right after the grant, which a refund names
--           (refund.lua): the window start and 0 for a fixed window, the bucket's time and level
--           for GCRA and the token bucket; and for a bucket, `over` (its level before the grant
--           less its capacity, in level units, negative when it had room) and `lead` (µs from
--           now to the time it was evaluated at, see `bucket_at`). Zeros where none apply.
local now = call_time(ARGV[1])
local need = tonumber(ARGV[2])
MIN_TTL_MS = tonumber(ARGV[3])
local want = tonumber(ARGV[4])

local function rule(i)
  local base = 5 + 5 * (i - 1)
  local id = tonumber(ARGV[base])
  if id ~= 1 and id ~= 2 and id ~= 5 then
    return nil
  end
  return id, tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]),
    tonumber(ARGV[base + 4])
end

-- How much every rule can reserve right now: a fixed window what it has left, a bucket what fits
-- below its capacity plus its horizon.
local grant = want
for i = 1, #KEYS do
  local id, limit, period, burst, horizon = rule(i)
  if id == nil then
    return redis.error_reply('not a leasable rate-limit algorithm: ' .. tostring(ARGV[5 + 5 * (i - 1)]))
  end
  local room
  if id == 1 then
    local _
    _, room = ALGORITHMS[1](KEYS[i], now, 0, limit, period, burst, 0)
  else
    local level = LEVELS[id](KEYS[i], now, limit, burst * period)
    room = floor_div(math.max(0, burst * period + horizon - level), period)
  end
  grant = math.min(grant, room)
end

local reply, writes = { 0 }, {}
if grant < need then
  -- Fewer than the request needs: decide the request itself, which is then denied (or never
  -- allowed), with the answer a check of its cost gets (no horizon: what Redis would say).
  for i = 1, #KEYS do
    local id, limit, period, burst = rule(i)
    local at = 1 + 9 * (i - 1)
    reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5] =
      ALGORITHMS[id](KEYS[i], now, need, limit, period, burst, 0)
    for j = 6, 9 do
      reply[at + j] = 0
    end
  end
  return reply
end

reply[1] = grant
for i = 1, #KEYS do
  local id, limit, period, burst, horizon = rule(i)
  local at = 1 + 9 * (i - 1)
  local over, lead = 0, 0
  if id ~= 1 then
    local level, evaluated = LEVELS[id](KEYS[i], now, limit, burst * period)
    over, lead = level - burst * period, evaluated - now
  end
  local verdict, remaining, used, full_after, retry_after, write =
    ALGORITHMS[id](KEYS[i], now, grant, limit, period, burst, horizon)
  -- Admitted by construction: every rule has room for `grant`.
  if write then
    write()
  end
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5] =
    verdict, remaining, used, full_after, retry_after
  reply[at + 8], reply[at + 9] = over, lead
  if id == 1 then
    reply[at + 6], reply[at + 7] = tonumber(redis.call('HGET', KEYS[i], 's')), 0
  else
    local level, evaluated = LEVELS[id](KEYS[i], now, limit, burst * period)
    reply[at + 6], reply[at + 7] = evaluated, level
  end
end
return reply
