-- job_join_end.lua: end a job that joined an identical request of another user in flight
-- (tracebus/jobs/reuse.py), when that request's job ended, in the joined job's own slot.
-- It ends as the job it joined when that completed (answered from its result), else failed
-- (a partial, failed or cancelled result is never reused); a joined job already ended (its
-- user cancelled it, or the sweeper failed it) is left as it is.
--
-- KEYS[1] job            hash of the joined job
-- KEYS[2] progress       its progress stream
-- ARGV[1] now_ms
-- ARGV[2] ttl_s
-- ARGV[3] progress_maxlen
-- ARGV[4..] fields       field, value, ... of its final state (status first)
-- Returns {old status, duration ms} | {} (not queued or running).
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'running' then
  return {}
end
local now = tonumber(ARGV[1])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'finished_ms', now)
-- 'status' last: the state scan of tests/test_states.py reads "'status', '<word>'" as a state
local job = redis.call('HMGET', KEYS[1], 'units_done', 'units_failed', 'units_total', 'rows', 'created_ms',
  'status')
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'event', 'joined_ended', 'status', job[6],
  'units_done', job[1] or 0, 'units_failed', job[2] or 0, 'units_total', job[3] or 0, 'rows', job[4] or 0,
  'ts_ms', now)
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return {status, now - tonumber(job[5] or now)}
