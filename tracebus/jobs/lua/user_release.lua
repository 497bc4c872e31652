-- user_release.lua: a job leaves its user's in-flight set (it finished, was cancelled, or
-- its creation failed), under the user's tag.
--
-- KEYS[1] singleflight   string: deleted only when it still names this job
-- KEYS[2] user_jobs      zset
-- ARGV[1] job_id
-- ARGV[2] inflight       1: remove from the zset
-- ARGV[3] singleflight   1: release the single-flight key
-- Returns 1.
if ARGV[2] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if ARGV[3] == '1' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return 1
