-- Rate-limit decisions of k requests under one policy, in one atomic call: each request is
-- decided exactly as if it had been sent alone after the ones before it (a request is admitted
-- only if every rule admits it, and only then are its writes made, before the next request is
-- decided), so a denied request writes nothing and an abusive client cannot push its own window
-- forward. A lone request is a call of k = 1; the store sends the requests that queued up while
-- a call of their policy was in flight as one call (src/store/redis/batch.rs), whatever their
-- keys: a key may appear several times, and its requests are then decided in order.
--
-- KEYS[n*(r-1) + i]: request r's state key of rule i (n rules). A request's keys carry its
--           client's key as their hash tag; on a cluster every key of one call is in one slot.
-- ARGV[1]:  the time in µs since the Unix epoch, or "" to read the Redis server clock (TIME), so
--           application hosts with skewed clocks still agree.
-- ARGV[2]:  k, the number of requests.
-- ARGV[3]:  lower bound for written TTLs in ms (0 in production; raised by callers that drive a
--           clock slower than real time, so Redis does not expire state that is still live).
-- ARGV[4 .. 3 + k]: each request's cost, an integer >= 0 (0 reports without consuming or
--           writing), in order.
-- ARGV[4 + k + 5*(i-1) .. 8 + k + 5*(i-1)]: rule i, five integers: algorithm id (1 fixed
--           window, 2 GCRA, 3 sliding log, 4 sliding window, 5 token bucket), limit, period in µs
--           (for GCRA and the token bucket, limit and period divided by their gcd: only the rate
--           matters there), burst, and a parameter of the algorithm's own (the sliding window's
--           sub-intervals; for GCRA and the token bucket, the horizon: max_delay in µs times
--           limit, 0 for a rule that never delays; 0 for the others).
-- Reply:    one string of integers separated by spaces (a string parses far faster in the
--           client than an array of integers): for each request in order, 5 per rule in rule
--           order: verdict (1 allowed, 0 denied, -1 can never be allowed), remaining, used,
--           full_after in µs, and a wait in µs: a denied request's retry_after, an admitted one's
--           delay (how long it waits before it is served: 0 unless a rule with a max_delay
--           admitted it past its capacity), 0 for one never allowed. A refused request counts
--           nothing: a rule that admitted it replies its remaining, used and full_after as they
--           stand, without the request's cost.
local now = call_time(ARGV[1])
local k = arg_number(ARGV[2])
MIN_TTL_MS = arg_number(ARGV[3])

local rules = #KEYS / k
local algorithms, params = {}, {}
for i = 1, rules do
  local base = 4 + k + 5 * (i - 1)
  algorithms[i] = ALGORITHMS[arg_number(ARGV[base])]
  if algorithms[i] == nil then
    return redis.error_reply('unknown rate-limit algorithm ' .. tostring(ARGV[base]))
  end
  params[i] = { arg_number(ARGV[base + 1]), arg_number(ARGV[base + 2]),
    arg_number(ARGV[base + 3]), arg_number(ARGV[base + 4]) }
end

local reply, writes, verdicts = {}, {}, {}
for request = 1, k do
  local cost = arg_number(ARGV[3 + request])
  local first = rules * (request - 1)
  local admitted = true
  for i = 1, rules do
    local p = params[i]
    local verdict, remaining, used, full_after, retry_after, write, delay =
      algorithms[i](KEYS[first + i], now, cost, p[1], p[2], p[3], p[4])
    local wait = retry_after
    if verdict ~= ALLOWED then
      admitted = false
    elseif delay then
      wait = delay
    end
    writes[i] = write
    verdicts[i] = verdict
    reply[first + i] = string.format('%d %d %d %d %d', verdict, remaining, used, full_after, wait)
  end
  if admitted then
    for i = 1, rules do
      if writes[i] then
        writes[i]()
      end
    end
  elseif rules > 1 then
    -- Refused: nothing was counted, so a rule that would have admitted it tells what it has
    -- left (its view without this cost), as every rule's verdict is reported.
    for i = 1, rules do
      if verdicts[i] == ALLOWED and cost > 0 then
        local p = params[i]
        local _, remaining, used, full_after =
          algorithms[i](KEYS[first + i], now, 0, p[1], p[2], p[3], p[4])
        local own = reply[first + i]
        local wait = string.match(own, '(%S+)$')
        reply[first + i] = string.format('%d %d %d %d %s', ALLOWED, remaining, used, full_after, wait)
      end
    end
  end
end
return table.concat(reply, ' ')
