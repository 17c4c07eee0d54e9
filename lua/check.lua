-- One rate-limit decision: every rule of a policy, for one client key, in one atomic call.
-- A request is admitted only if every rule admits it; only then is anything written, so a denied
-- request writes nothing (and an abusive client cannot push its own window forward).
--
-- KEYS[i]:  the state key of rule i. All keys carry the client's key as their hash tag, so one
--           call touches one cluster slot.
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME), so
--           application hosts with skewed clocks still agree.
-- ARGV[2]:  cost of the request, an integer >= 0 (0 reports without consuming or writing).
-- ARGV[3]:  lower bound for written TTLs in ms (0 in production; raised by callers that drive a
--           clock slower than real time, so Redis does not expire state that is still live).
-- ARGV[4 + 5*(i-1) .. 8 + 5*(i-1)]: rule i, five integers:
--           algorithm id (1 fixed window, 2 GCRA, 3 sliding log, 4 sliding window, 5 token bucket),
--           limit, period in µs (for GCRA and the token bucket, limit and period divided by their
--           gcd: only the rate matters there), burst, and a parameter of the algorithm's own (the
--           sliding window's sub-intervals; 0 for the others).
-- Reply:    5 integers per rule, in KEYS order: verdict (1 allowed, 0 denied, -1 can never be
--           allowed), remaining, used, reset_after in µs, retry_after in µs (0 unless denied).
local now = call_time(ARGV[1])
local cost = tonumber(ARGV[2])
MIN_TTL_MS = tonumber(ARGV[3])

local reply, writes = {}, {}
local admitted = true
for i = 1, #KEYS do
  local base = 4 + 5 * (i - 1)
  local algorithm = ALGORITHMS[tonumber(ARGV[base])]
  if algorithm == nil then
    return redis.error_reply('unknown rate-limit algorithm ' .. tostring(ARGV[base]))
  end
  local verdict, remaining, used, reset_after, retry_after, write = algorithm(KEYS[i], now, cost,
    tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4]))
  if verdict ~= ALLOWED then
    admitted = false
  end
  writes[i] = write
  local at = 5 * (i - 1)
  reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5] =
    verdict, remaining, used, reset_after, retry_after
end

if admitted then
  for i = 1, #KEYS do
    if writes[i] then
      writes[i]()
    end
  end
end
return reply
