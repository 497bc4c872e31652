-- retry.lua: schedule a retry and ack the running entry, atomically.
--
-- The due time is Redis's clock (TIME) plus the delay, never a host's clock.
--
-- KEYS[1] stream       the work stream (P:q:{<queue>})
-- KEYS[2] delayed      zset of encoded messages scored by due ms (P:q:{<queue>}:delayed)
-- KEYS[3] stats        hash of the queue's cumulative counters (P:q:{<queue>}:stats)
-- ARGV[1] group        consumer group name
-- ARGV[2] entry        id of the running entry (acked and deleted)
-- ARGV[3] delay_ms     the retry is due this long after Redis's now
-- ARGV[4] payload      the encoded retry message
-- ARGV[5] queue        queue name (stats fields are per queue)
-- Returns 1.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[3]), ARGV[4])
redis.call('HINCRBY', KEYS[3], 'failed:' .. ARGV[5], 1)
redis.call('HINCRBY', KEYS[3], 'retried:' .. ARGV[5], 1)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
