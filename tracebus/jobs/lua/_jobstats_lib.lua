-- Shared prelude of job_metrics.lua (prepended by tracebus/jobs/scripts.py): the system-wide
-- job figures kept under the {jobs} tag, read by tracebus/jobs/metrics.py at scrape time.
--
-- KEYS[first]           stats   hash of cumulative counters (no TTL: system-wide)
-- KEYS[first + 1 .. 6]  zsets   queued, running, completed, partial, failed, cancelled:
--                               job id -> expiry ms of the job hash

local JOB_STATUS_OFFSET = {queued = 1, running = 2, completed = 3, partial = 4, failed = 5,
                           cancelled = 6}

-- job_status_index(first, job_id, old, new, now_ms, ttl_s)
--   Files the job under `new` (moving it out of `old` when that differs), scored by when its
--   hash expires (now + ttl, the TTL every job script gives it). The zset drops members past
--   their expiry, so ZCOUNT from now counts the retained jobs in that status, and expires
--   itself no earlier than its newest member (its TTL is only ever extended).
local function job_status_index(first, job_id, old, new, now_ms, ttl_s)
  if old and old ~= new and JOB_STATUS_OFFSET[old] then
    redis.call('ZREM', KEYS[first + JOB_STATUS_OFFSET[old]], job_id)
  end
  local key = KEYS[first + JOB_STATUS_OFFSET[new]]
  if not key then
    return
  end
  redis.call('ZADD', key, now_ms + ttl_s * 1000, job_id)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. now_ms)
  if redis.call('TTL', key) < 0 then
    redis.call('EXPIRE', key, ttl_s)
  else
    redis.call('EXPIRE', key, ttl_s, 'GT')
  end
end

-- observe_duration(stats, status, ms, bounds)
--   Observes a finished job's duration `ms` in the histogram of its final `status`. `bounds`
--   is the comma-separated bucket upper bounds in ms; buckets are stored cumulative, as
--   Prometheus exposes them.
local function observe_duration(stats, status, ms, bounds)
  redis.call('HINCRBY', stats, 'job_duration_count:' .. status, 1)
  redis.call('HINCRBY', stats, 'job_duration_sum_ms:' .. status, ms)
  for le in string.gmatch(bounds, '[^,]+') do
    if ms <= tonumber(le) then
      redis.call('HINCRBY', stats, 'job_duration_le:' .. status .. ':' .. le, 1)
    end
  end
end
