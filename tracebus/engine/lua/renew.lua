-- renew.lua: renew the lease of every entry a live consumer holds.
--
-- XCLAIM does not check the current owner, so the owner check (XPENDING filtered by
-- consumer) and the claim run in one script: an entry the janitor already moved to
-- another consumer is never taken back. XCLAIM ... 0 <ids> JUSTID resets the idle time
-- without bumping the delivery count.
--
-- KEYS[1] stream       the work stream (P:q:{<queue>})
-- ARGV[1] group        consumer group name
-- ARGV[2] consumer     whose entries to renew
-- ARGV[3] count        at most this many entries per call
-- Returns the number of entries renewed.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', tonumber(ARGV[3]), ARGV[2])
if #pending == 0 then return 0 end
-- XCLAIM silently removes from the PEL an entry that was deleted from the stream while
-- pending (Redis 7). Such entries are left alone here, so the janitor's XAUTOCLAIM (or the
-- reclaim of a dead consumer) records them in the dead-letter stream instead.
local ids = {}
for _, p in ipairs(pending) do
  if #redis.call('XRANGE', KEYS[1], p[1], p[1]) > 0 then ids[#ids + 1] = p[1] end
end
if #ids == 0 then return 0 end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids), 'JUSTID')
return #claimed
