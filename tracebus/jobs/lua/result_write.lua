-- result_write.lua: the fence of one result chunk write, in the job's slot.
--
-- The chunk itself is written by the caller (SET with PXAT) under its own key and hash tag
-- (job, section, unit, attempt: chunks spread over a cluster's shards), which no script of
-- the job's slot can touch. A chunk written by a stale attempt is harmless: only the
-- attempt that result_commit.lua records in the manifest is ever read. This check lets a
-- fenced-off attempt (a newer one runs, or the job was cancelled) stop at its next write
-- instead of running to its commit.
--
-- KEYS[1] units     hash: unit index -> msgpack unit state (holds the attempt)
-- KEYS[2] job       hash: TTL refreshed so the status outlives the chunk
-- KEYS[3] manifest  hash: TTL refreshed likewise (may not exist yet)
-- ARGV[1] unit
-- ARGV[2] attempt
-- ARGV[3] ttl_s
-- Returns the job hash's new expiry (unix ms), which the caller gives the chunk, when the
-- attempt may write; 0 when fenced off. The chunk then never outlives the job's status: every
-- later step (the commit, a cancel between this check and the chunk's SET) only pushes the
-- job's expiry further. A job hash gone meanwhile fences the attempt off too.

if not running_attempt(KEYS[1], ARGV[1], ARGV[2]) then
  return 0
end
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
local expires_at = redis.call('PEXPIRETIME', KEYS[2])
if expires_at < 0 then
  return 0
end
return expires_at
