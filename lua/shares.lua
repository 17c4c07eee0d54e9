-- A quota service's shares of one bucket (gateway/src/envoy/quota/share.rs is the same
-- transition in Rust, and its specification): the bucket's limit split among the Envoys that
-- report it, in proportion to their demand, a share raised only out of what no Envoy
-- reserves. Stands alone: no helper, no algorithm.
--
-- The target is the limit split in proportion to the demands (evenly while every demand is 0),
-- rounded down; a share moves to it when it differs by more than a tenth, at most once per
-- min_change_ms, and is raised only as far as the others' reservations leave free.
--
-- KEYS[1]:  the bucket's hash { <holder> = "share held held_until demand sent_at changed_at
--           expires leaving" }, times in ms of the server's clock (TIME); its TTL the latest
--           entry's expiry, written with every write.
-- ARGV[1]:  the operation: 'settle' or 'leave'.
-- ARGV[2]:  the holder (an Envoy's stream: the serve instance and a number).
-- ARGV[3]:  ttl_ms: how long Envoy applies an assignment.
-- ARGV[4]:  grace_ms: added to it for the way to Envoy.
-- ARGV[5]:  min_change_ms: the shortest time between two changes of a holder's share.
-- settle:   ARGV[6] the holder's demand (requests per period, below 2^20), ARGV[7] the limit
--           (tokens per period, below 2^32). Reply the holder's share.
-- leave:    the holder's share goes to 0, its last one stays reserved until it has expired.
--           Reply 0.
local key, op, holder = KEYS[1], ARGV[1], ARGV[2]
local ttl, grace, min_change = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function decode(text)
  local v = {}
  for field in string.gmatch(text, '%S+') do
    v[#v + 1] = tonumber(field)
  end
  return { share = v[1], held = v[2], held_until = v[3], demand = v[4], sent_at = v[5],
           changed_at = v[6], expires = v[7], leaving = v[8] == 1 }
end

local function encode(e)
  return string.format('%d %d %d %d %d %d %d %d', e.share, e.held, e.held_until, e.demand,
    e.sent_at, e.changed_at, e.expires, e.leaving and 1 or 0)
end

local function reserved(e)
  if e.held_until > now then
    return math.max(e.share, e.held)
  end
  return e.share
end

local function lower(e, share)
  local until_ms = e.sent_at + ttl + grace
  e.held = reserved(e)
  e.held_until = math.max(e.held_until, until_ms)
  e.share = share
end

-- Every live entry but the holder's; the expired ones deleted.
local others, me = {}, nil
local flat = redis.call('HGETALL', key)
for i = 1, #flat, 2 do
  local e = decode(flat[i + 1])
  if e.expires <= now then
    redis.call('HDEL', key, flat[i])
  elseif flat[i] == holder then
    me = e
  else
    others[#others + 1] = e
  end
end

local function write(e)
  redis.call('HSET', key, holder, encode(e))
  local last = e.expires
  for _, o in ipairs(others) do
    last = math.max(last, o.expires)
  end
  redis.call('PEXPIRE', key, math.max(1, last - now))
end

if op == 'leave' then
  if me then
    lower(me, 0)
    me.demand = 0
    me.leaving = true
    me.expires = me.held_until
    if me.expires > now then
      write(me)
    else
      redis.call('HDEL', key, holder)
    end
  end
  return 0
end

local demand, limit = tonumber(ARGV[6]), tonumber(ARGV[7])
me = me or { share = 0, held = 0, held_until = 0, demand = 0, sent_at = 0, changed_at = 0,
             expires = 0, leaving = false }
me.demand = demand
me.leaving = false
-- Shares in proportion to the demands; evenly while no one asks anything.
local demands, staying, taken = demand, 1, 0
for _, o in ipairs(others) do
  if not o.leaving then
    demands = demands + o.demand
    staying = staying + 1
  end
  taken = taken + reserved(o)
end
local target
if demands == 0 then
  target = math.floor(limit / staying)
else
  target = math.floor(limit * demand / demands)
end
local candidate = math.min(target, math.max(0, limit - taken))
local step = math.abs(candidate - me.share)
local worth_it = me.share == 0 or candidate == 0 or step * 10 > me.share
local due = me.changed_at == 0 or now - me.changed_at >= min_change
if step > 0 and worth_it and due then
  if candidate < me.share then
    lower(me, candidate)
  else
    me.share = candidate
  end
  me.changed_at = now
end
me.sent_at = now
me.expires = math.max(now + ttl + grace, me.held_until)
write(me)
return me.share
