-- result_commit.lua: record a unit's chunk row counts in its domain's manifest, only
-- for the unit's current running attempt. A re-run overwrites the same field.
--
-- KEYS[1] units     hash: unit index -> msgpack unit state (holds the attempt)
-- KEYS[2] manifest  hash: unit index -> msgpack list of rows per chunk
-- KEYS[3] job       hash: TTL refreshed so the status outlives the manifest
-- ARGV[1] unit  ARGV[2] attempt  ARGV[3] ttl s  ARGV[4] msgpack list of row counts
-- Returns 1 when recorded, 0 when fenced off.

if not running_attempt(KEYS[1], ARGV[1], ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
return 1
