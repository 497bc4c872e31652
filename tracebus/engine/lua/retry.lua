-- retry.lua: schedule a retry and ack the running entry, atomically.
--
-- KEYS[1] stream, KEYS[2] delayed (zset of payloads scored by due ms), KEYS[3] stats hash
-- ARGV[1] group, ARGV[2] entry id, ARGV[3] due_ms, ARGV[4] payload of the retry,
-- ARGV[5] queue name (the stats fields are per queue)
-- Returns 1.
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('HINCRBY', KEYS[3], 'failed:' .. ARGV[5], 1)
redis.call('HINCRBY', KEYS[3], 'retried:' .. ARGV[5], 1)
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
