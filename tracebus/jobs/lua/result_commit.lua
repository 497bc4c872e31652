-- result_commit.lua: record a unit's chunk row counts in its section's manifest, and its
-- partial aggregate when it has one, only for the unit's current running attempt. A re-run
-- overwrites the same fields: a partial is replaced, never added twice. The manifest entry
-- names the attempt, whose chunks (keyed by attempt, outside the job's slot) it makes
-- visible: this fenced commit is the only step that publishes a result.
--
-- KEYS[1] units     hash: unit index -> msgpack unit state (holds the attempt)
-- KEYS[2] manifest  hash: unit index -> msgpack list of rows per chunk
-- KEYS[3] job       hash: TTL refreshed so the status outlives the manifest
-- KEYS[4] partials  hash: unit index -> msgpack partial aggregate
-- ARGV[1] unit
-- ARGV[2] attempt
-- ARGV[3] ttl_s
-- ARGV[4] entry     msgpack [attempt, list of row counts]
-- ARGV[5] partial   msgpack partial aggregate, or "" when the unit has none
-- Returns 1 when recorded, 0 when fenced off.

if not running_attempt(KEYS[1], ARGV[1], ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
  redis.call('EXPIRE', KEYS[4], ARGV[3])
end
redis.call('EXPIRE', KEYS[3], ARGV[3])
return 1
