-- user_admit.lua: admit a job for a user (single-flight, then quota), under the user's tag.
--
-- Runs before job_create.lua (the job's own slot) and reserves the job's place: the job id
-- in the user's in-flight zset and, for a new request, the single-flight key. A reservation
-- whose job was never created is harmless: the zset drops members older than the TTL and
-- JobStore.create replaces a single-flight key that names a job that has ended (its release
-- comes a step after its settle) or a missing one (once admitted longer ago than a create
-- takes: CREATE_GRACE_S in tracebus/jobs/creation.py).
--
-- KEYS[1] singleflight   string: job id of the user's in-flight job with this fingerprint
-- KEYS[2] user_jobs      zset: the user's queued/running job ids, scored by created ms
-- ARGV[1] job_id
-- ARGV[2] now_ms
-- ARGV[3] ttl_s
-- ARGV[4] max_inflight   the user's cap of queued/running jobs
-- ARGV[5] mode           "new": a new job (single-flight checked and set) | "retry": a job
--                        queued again (single-flight set only when free)
-- Returns {"existing", job id, its admission ms or -1} | {"quota", inflight count} |
-- {"admitted", added, sf_set} (added 1 when the job id was not in the zset yet, sf_set 1 when
-- the key was set here: what the caller undoes when the job script then refuses). The
-- existing job's admission time tells a twin still being created from a crash's leftover.
local job_id, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[5] == 'new' then
  local existing = redis.call('GET', KEYS[1])
  if existing then
    return {'existing', existing, tonumber(redis.call('ZSCORE', KEYS[2], existing)) or -1}
  end
end
-- Members older than the TTL belong to jobs that expired without settling.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl * 1000)
local inflight = redis.call('ZCARD', KEYS[2])
if inflight >= tonumber(ARGV[4]) and not redis.call('ZSCORE', KEYS[2], job_id) then
  return {'quota', inflight}
end
local added = redis.call('ZADD', KEYS[2], now, job_id)
redis.call('EXPIRE', KEYS[2], ttl)
local sf_set = 0
if redis.call('SET', KEYS[1], job_id, 'NX', 'EX', ttl) then
  sf_set = 1
end
return {'admitted', added, sf_set}
