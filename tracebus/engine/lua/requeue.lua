-- requeue.lua: hand back the pending entries of one consumer.
--
-- Used when the supervisor reaps a dead child (every entry of its PEL, reason = how it
-- died) and when a draining worker gives back entries it read but never started
-- (uncount = 1, only the listed ids).
--
-- KEYS[1] stream      the work stream   (P:q:{<queue>})
-- KEYS[2] dead        dead-letter stream (P:q:{<queue>}:dead)
-- KEYS[3] stats       hash of the queue's cumulative counters (P:q:{<queue>}:stats)
-- ARGV[1] group       consumer group name
-- ARGV[2] consumer    whose pending entries to hand back
-- ARGV[3] count       at most this many entries per call
-- ARGV[4] default_max max deliveries for entries without an `x` field
-- ARGV[5] reason      recorded on dead-lettered entries
-- ARGV[6] uncount     1: this delivery did not run and does not count
-- ARGV[7] dead_maxlen approximate cap of the dead stream
-- ARGV[8] dead_ttl_s  TTL of the dead stream
-- ARGV[9] queue       queue name (stats fields are per queue)
-- ARGV[10] source     who requeues, for the redelivery counter ('supervisor'); '' when the
--                     entries are given back unstarted (not a redelivery)
-- ARGV[11..] ids      optional: only these entry ids
-- Returns {requeued, dead, deleted, remaining_in_pel}
local stream, dead = KEYS[1], KEYS[2]
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local only = nil
if #ARGV >= 11 then
  only = {}
  for i = 11, #ARGV do only[ARGV[i]] = true end
end
local counts = {0, 0, 0}
local pending = redis.call('XPENDING', stream, group, '-', '+', count, consumer)
for _, p in ipairs(pending) do
  local id, deliveries = p[1], p[4]
  if only == nil or only[id] then
    local r = requeue_entry(stream, dead, group, id, deliveries, ARGV[6], ARGV[4], ARGV[5],
                            ARGV[7], ARGV[8])
    if r == 1 then counts[1] = counts[1] + 1
    elseif r == 2 then counts[2] = counts[2] + 1
    else counts[3] = counts[3] + 1 end
  end
end
if counts[1] > 0 and ARGV[10] ~= '' then
  redis.call('HINCRBY', KEYS[3], 'redelivered:' .. ARGV[10] .. ':' .. ARGV[9], counts[1])
end
if counts[2] + counts[3] > 0 then
  redis.call('HINCRBY', KEYS[3], 'dead_lettered:' .. ARGV[9], counts[2] + counts[3])
end
local left = redis.call('XPENDING', stream, group, '-', '+', 1, consumer)
return {counts[1], counts[2], counts[3], #left}
