-- A region's side of a global policy (src/region/): the allotments of one key's window that the
-- region holds, and what the region's instances spent of them. Stands alone: no helper, no
-- algorithm.
--
-- KEYS[1]:  the window's state, a hash { h = units held (allotments applied, less those
--           surrendered), s = units spent, a = units asked (admitted or refused, as the
--           instances report them), m:<id> = the units of each move applied or surrendered, so
--           that a retried move applies once }.
-- ARGV[1]:  the operation: 'spend', 'apply', 'surrender' or 'sync'.
-- ARGV[2]:  the TTL of the hash in ms, written with every write (the caller computes it: the
--           window's end and one period more, so a late move still finds its marks).
-- spend:     ARGV[3] cost. Reply {1 admitted or 0 refused, held, spent}. A refusal writes
--            nothing; a cost of 0 reports.
-- apply:     ARGV[3] move id, ARGV[4] units the ledger granted. Reply {1 applied now or 0
--            applied before, held}.
-- surrender: ARGV[3] move id, ARGV[4] the most units to give up. Gives up what is unspent, up to
--            that. Reply the units given up (what the first call gave, on a retry).
-- sync:      ARGV[3] units asked here since this instance's last sync. Reply {held, spent,
--            asked}.
-- lead:      (KEYS[1] is the region's mover key, a string) ARGV[3] instance id. The instance
--            that moves the region's allotments: the holder, or the caller if there is none.
--            Reply 1 if the caller holds it (for the TTL more), else 0.
local key, op, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])

local function counts()
  local state = redis.call('HMGET', key, 'h', 's', 'a')
  return tonumber(state[1]) or 0, tonumber(state[2]) or 0, tonumber(state[3]) or 0
end

if op == 'spend' then
  local cost = tonumber(ARGV[3])
  local held, spent = counts()
  if spent + cost > held then
    return {0, held, spent}
  end
  if cost > 0 then
    spent = redis.call('HINCRBY', key, 's', cost)
    redis.call('PEXPIRE', key, ttl)
  end
  return {1, held, spent}
elseif op == 'apply' then
  local mark = 'm:' .. ARGV[3]
  if redis.call('HEXISTS', key, mark) == 1 then
    local held = counts()
    return {0, held}
  end
  redis.call('HSET', key, mark, ARGV[4])
  local held = redis.call('HINCRBY', key, 'h', tonumber(ARGV[4]))
  redis.call('PEXPIRE', key, ttl)
  return {1, held}
elseif op == 'surrender' then
  local mark = 'm:' .. ARGV[3]
  local given = tonumber(redis.call('HGET', key, mark))
  if given then
    return given
  end
  local held, spent = counts()
  given = math.max(0, math.min(tonumber(ARGV[4]), held - spent))
  redis.call('HSET', key, mark, given)
  -- `0 - x`, not `-x`: Lua's -0 reaches Redis as "-0", which HINCRBY refuses.
  redis.call('HINCRBY', key, 'h', 0 - given)
  redis.call('PEXPIRE', key, ttl)
  return given
elseif op == 'lead' then
  local holder = redis.call('GET', key)
  if holder and holder ~= ARGV[3] then
    return 0
  end
  redis.call('SET', key, ARGV[3], 'PX', ttl)
  return 1
elseif op == 'sync' then
  local asked = tonumber(ARGV[3])
  if asked > 0 then
    redis.call('HINCRBY', key, 'a', asked)
    redis.call('PEXPIRE', key, ttl)
  end
  return {counts()}
end
return redis.error_reply('ERR unknown region operation ' .. tostring(op))
