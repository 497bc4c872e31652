-- Shared prelude of job_settle and job_cancel (prepended by tracebus/jobs/scripts.py).
--
-- job_duration_ms(job, now_ms)
--   How long the job ran: from its creation, or from its last retry (field `retried_ms`),
--   to now. The caller passes it to job_metrics.lua's histogram.
local function job_duration_ms(job, now_ms)
  local t = redis.call('HMGET', job, 'retried_ms', 'created_ms')
  local started = tonumber(t[1]) or tonumber(t[2]) or now_ms
  return math.max(now_ms - started, 0)
end
