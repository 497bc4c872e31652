-- dead_letter.lua: move one running entry to the dead-letter stream, atomically.
-- Used for undecodable entries, unknown actors and exhausted retries.
--
-- KEYS[1] stream       the work stream    (P:q:{<queue>})
-- KEYS[2] dead         dead-letter stream (P:q:{<queue>}:dead)
-- KEYS[3] stats        hash of the queue's cumulative counters (P:q:{<queue>}:stats)
-- ARGV[1] group        consumer group name
-- ARGV[2] entry        id of the running entry
-- ARGV[3] payload      its encoded message (field `m` of the record)
-- ARGV[4] reason       why, recorded on the record
-- ARGV[5] dead_maxlen  approximate cap of the dead stream
-- ARGV[6] dead_ttl_s   TTL of the dead stream
-- ARGV[7] queue        queue name (stats fields are per queue)
-- ARGV[8] failed       1 when the actor ran and raised (counted as failed too), else 0
-- Returns 1. The record carries the entry's deliveries: those before it was (re)queued
-- (field `d`) plus its own PEL count, as a requeue past the limit records them.
local deliveries = 0
local found = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
if #found > 0 then
  local fields = found[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'd' then deliveries = tonumber(fields[i + 1]) end
  end
end
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #pending > 0 then deliveries = deliveries + tonumber(pending[1][4]) end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'm', ARGV[3], 'reason', ARGV[4],
           'deliveries', deliveries, 'entry', ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('HINCRBY', KEYS[3], 'dead_lettered:' .. ARGV[7], 1)
if ARGV[8] == '1' then
  redis.call('HINCRBY', KEYS[3], 'failed:' .. ARGV[7], 1)
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
