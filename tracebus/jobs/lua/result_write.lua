-- result_write.lua: store one result chunk, only for the unit's current running attempt.
--
-- KEYS[1] units     hash: unit index -> msgpack unit state (holds the attempt)
-- KEYS[2] chunk     string: the encoded chunk (SET with EX)
-- KEYS[3] job       hash: TTL refreshed so the status outlives the chunk
-- KEYS[4] manifest  hash: TTL refreshed likewise (may not exist yet)
-- ARGV[1] unit  ARGV[2] attempt  ARGV[3] ttl s  ARGV[4] encoded chunk
-- Returns 1 when stored, 0 when fenced off.

if not running_attempt(KEYS[1], ARGV[1], ARGV[2]) then
  return 0
end
redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[4], ARGV[3])
return 1
