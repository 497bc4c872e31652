-- delay.lua: schedule a message after a delay, due at Redis's clock (TIME) plus the delay,
-- so that hosts with skewed clocks agree on when it is due (see promote.lua).
--
-- KEYS[1] delayed      zset of encoded messages scored by due ms (P:q:{<queue>}:delayed)
-- ARGV[1] delay_ms     due this long after Redis's now
-- ARGV[2] payload      the encoded message
-- Returns the due time in ms.
local t = redis.call('TIME')
local due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], due, ARGV[2])
return due
