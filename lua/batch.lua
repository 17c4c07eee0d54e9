-- Several rate-limit decisions of one client under one policy, in one atomic call, each decided
-- exactly as if it had been sent alone after the ones before it: a request is admitted only if
-- every rule admits it, and only then are its writes made, before the next request is decided.
-- Hot-key coalescing (src/store/redis/coalesce.rs) sends the requests that queued up while a
-- call for their key was in flight as one such call.
--
-- KEYS[i]:  the state key of rule i, as in check.lua.
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME).
-- ARGV[2]:  k, the number of requests.
-- ARGV[3]:  lower bound for written TTLs in ms, as in check.lua.
-- ARGV[4 .. 3 + k]: each request's cost, in order.
-- ARGV[4 + k + 5*(i-1) .. 8 + k + 5*(i-1)]: rule i, as in check.lua.
-- Reply:    for each request in order, the 5 integers per rule of check.lua.
local now = call_time(ARGV[1])
local k = tonumber(ARGV[2])
MIN_TTL_MS = tonumber(ARGV[3])

local rules = #KEYS
local algorithms, params = {}, {}
for i = 1, rules do
  local base = 4 + k + 5 * (i - 1)
  algorithms[i] = ALGORITHMS[tonumber(ARGV[base])]
  if algorithms[i] == nil then
    return redis.error_reply('unknown rate-limit algorithm ' .. tostring(ARGV[base]))
  end
  params[i] = { tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]),
    tonumber(ARGV[base + 4]) }
end

local reply = {}
for request = 1, k do
  local cost = tonumber(ARGV[3 + request])
  local writes, admitted = {}, true
  for i = 1, rules do
    local p = params[i]
    local verdict, remaining, used, reset_after, retry_after, write =
      algorithms[i](KEYS[i], now, cost, p[1], p[2], p[3], p[4])
    if verdict ~= ALLOWED then
      admitted = false
    end
    writes[i] = write
    local at = #reply
    reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4], reply[at + 5] =
      verdict, remaining, used, reset_after, retry_after
  end
  if admitted then
    for i = 1, rules do
      if writes[i] then
        writes[i]()
      end
    end
  end
end
return reply
