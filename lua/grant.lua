-- A quota lease: reserves up to `want` units of a client's quota under every rule of a policy in
-- one atomic call, for the caller to spend in process. Composed after common.lua and the
-- algorithms, like decide.lua, whose argument layout it shares; only leasable algorithms (fixed
-- window, GCRA, token bucket) are sent here (see src/store/redis/leases/).
--
-- KEYS[i]:  the state key of rule i (one client, so one cluster slot).
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME).
-- ARGV[2]:  `need`, the cost of the request that asks (>= 1): granted in full or denied.
-- ARGV[3]:  lower bound for written TTLs in ms, as in decide.lua.
-- ARGV[4]:  `want` (>= need): the most units to reserve.
-- ARGV[5 + 5*(i-1) .. 9 + 5*(i-1)]: rule i, as in decide.lua.
-- Reply:    the units granted (`want` or fewer, but at least `need`; 0 when denied), then 7
--           integers per rule: the 5 of decide.lua for a request of the granted cost (of cost
--           `need` when denied), and the rule's state right after the grant, which a refund
--           names (refund.lua): the window start and 0 for a fixed window, the bucket's time and
--           level for GCRA and the token bucket; two zeros when denied.
local now = call_time(ARGV[1])
local need = tonumber(ARGV[2])
MIN_TTL_MS = tonumber(ARGV[3])
local want = tonumber(ARGV[4])

local function rule(i)
  local base = 5 + 5 * (i - 1)
  local algorithm = ALGORITHMS[tonumber(ARGV[base])]
  if algorithm == nil or ARGV[base] == '3' or ARGV[base] == '4' then
    return nil
  end
  return algorithm, tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]),
    tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
end

-- How much every rule admits right now: what a request of cost 0 reports remaining.
local grant = want
for i = 1, #KEYS do
  local algorithm, limit, period, burst, extra = rule(i)
  if algorithm == nil then
    return redis.error_reply('not a leasable rate-limit algorithm: ' .. tostring(ARGV[5 + 5 * (i - 1)]))
  end
  local _, remaining = algorithm(KEYS[i], now, 0, limit, period, burst, extra)
  grant = math.min(grant, remaining)
end
-- Fewer than the request needs: decide the request itself, which is then denied (or never
-- allowed), with the answer a check of its cost gets.
grant = math.max(grant, need)

local reply, writes = { 0 }, {}
local admitted = true
for i = 1, #KEYS do
  local algorithm, limit, period, burst, extra = rule(i)
  local verdict, remaining, used, reset_after, retry_after, write =
    algorithm(KEYS[i], now, grant, limit, period, burst, extra)
  if verdict ~= ALLOWED then
    admitted = false
  end
  writes[i] = write
  local at = 1 + 7 * (i - 1)
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5], reply[at + 6], reply[at + 7] =
    verdict, remaining, used, reset_after, retry_after, 0, 0
end
if not admitted then
  return reply
end

reply[1] = grant
for i = 1, #KEYS do
  if writes[i] then
    writes[i]()
  end
  local id = ARGV[5 + 5 * (i - 1)]
  local at = 1 + 7 * (i - 1)
  if id == '1' then
    reply[at + 6] = tonumber(redis.call('HGET', KEYS[i], 's'))
  elseif id == '2' then
    local stored = redis.call('GET', KEYS[i])
    local sep = string.find(stored, ':', 1, true)
    reply[at + 6], reply[at + 7] = tonumber(string.sub(stored, 1, sep - 1)), tonumber(string.sub(stored, sep + 1))
  else
    local state = redis.call('HMGET', KEYS[i], 't', 'k')
    local _, _, period, burst = rule(i)
    reply[at + 6], reply[at + 7] = tonumber(state[1]), burst * period - tonumber(state[2])
  end
end
return reply
