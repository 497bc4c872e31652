-- promote.lua: move due delayed messages onto their stream.
--
-- KEYS[1] delayed zset, KEYS[2] stream
-- ARGV[1] now_ms, ARGV[2] limit
-- Returns the number promoted.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, payload in ipairs(due) do
  redis.call('XADD', KEYS[2], '*', 'm', payload)
  redis.call('ZREM', KEYS[1], payload)
end
return #due
