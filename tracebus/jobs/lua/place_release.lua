-- place_release.lua: give a place back, or stop waiting for one, under the pool's tag.
--
-- KEYS[1] held      zset holder -> lease expiry ms
-- KEYS[2] waiting   zset holder -> wait ticket expiry ms
-- KEYS[3] info      hash holder -> "<group>\t<first asked ms>"
-- ARGV[1] holder
-- Returns 1 when the caller held a place.
local had = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return had
