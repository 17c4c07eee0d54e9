-- A reset: deletes a client's state under every rule of a policy, then tells every instance to
-- forget what it remembers of that state (its denial cache, its quota leases). Both in one atomic
-- call, in this order: an instance that hears the message can only reach the state afterwards.
-- A script of its own: it needs none of common.lua's helpers nor any algorithm.
--
-- KEYS[i]:  the state key of rule i (one client, so one cluster slot).
-- ARGV[1]:  the channel every instance of this key prefix listens on (`<prefix>:reset`).
-- ARGV[2]:  the message (see src/store/redis/reset/message.rs): the client's storage key and the
--           rules' state names. A PUBLISH reaches every node of a cluster, and every replica.
-- Reply:    how many of the keys existed.
local deleted = redis.call('DEL', unpack(KEYS))
redis.call('PUBLISH', ARGV[1], ARGV[2])
return deleted
