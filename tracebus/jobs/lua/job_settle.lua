-- job_settle.lua: record the outcome of one unit attempt, fenced by its attempt token,
-- Invariant kept: only the current attempt settles a unit, once; the job reaches its final
-- status exactly when every unit is settled, and then frees its quota slot and single-flight key.
-- and set the job's final status when it was the last unit to settle.
--
-- KEYS[1] job            hash: counters, status, per-section failures "sfail:<i>" and the
--                        milliseconds its done units ran, per section "sms:<i>" (the pace of
--                        recent jobs, tracebus/jobs/pace.py)
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] progress       stream: progress events
-- KEYS[4] todo           list (TTL refreshed)
-- KEYS[5] inputs         hash (TTL refreshed)
-- KEYS[6] manifest       hash of the unit's section: a "done" unit must have its entry
-- ARGV[1] unit
-- ARGV[2] attempt
-- ARGV[3] outcome          "done" | "failed"
-- ARGV[4] rows
-- ARGV[5] error            message of a failed unit
-- ARGV[6] now_ms
-- ARGV[7] ttl_s
-- ARGV[8] progress_maxlen
-- Returns {0} when fenced off (stale attempt, or the unit is no longer running), {-1} when
-- a "done" unit has no manifest entry: its commit was lost (acknowledged by a primary that a
-- failover then discarded) and the unit must run again, not complete the job without rows;
-- else {1, finished 0|1, job status, status before, rows, duration ms when finished or ''}:
-- the caller counts units and rows, moves the job between the status zsets and observes a
-- finished job's duration (job_metrics.lua), and releases the user's quota and
-- single-flight (user_release.lua).

local unit, outcome, now = ARGV[1], ARGV[3], tonumber(ARGV[6])
local st = running_attempt(KEYS[2], unit, ARGV[2])
if not st then
  return {0}
end
if outcome == 'done' and redis.call('HEXISTS', KEYS[6], unit) == 0 then
  return {-1}
end
st.state = outcome
st.finished_ms = now
local section = math.floor(tonumber(unit) / tonumber(redis.call('HGET', KEYS[1], 'n_chunks') or '1'))
if outcome == 'done' then
  st.rows = tonumber(ARGV[4])
  redis.call('HINCRBY', KEYS[1], 'units_done', 1)
  redis.call('HINCRBY', KEYS[1], 'rows', st.rows)
  redis.call('HINCRBY', KEYS[1], 'sms:' .. section, math.max(0, now - (st.started_ms or now)))
else
  st.error = ARGV[5]
  redis.call('HINCRBY', KEYS[1], 'units_failed', 1)
  redis.call('HINCRBY', KEYS[1], 'sfail:' .. section, 1)
  if redis.call('HGET', KEYS[1], 'error') == '' then
    redis.call('HSET', KEYS[1], 'error', ARGV[5])
  end
end
redis.call('HSET', KEYS[2], unit, cmsgpack.pack(st))
redis.call('HINCRBY', KEYS[1], 'inflight', -1)

local c = redis.call('HMGET', KEYS[1], 'units_done', 'units_failed', 'units_cancelled',
  'units_total', 'rows', 'n_sections', 'status')
local done, failed, total = tonumber(c[1]), tonumber(c[2]), tonumber(c[4])
local status, finished, duration = c[7], 0, ''
if done + failed + tonumber(c[3]) >= total then
  finished = 1
  local failed_sections = 0
  for i = 0, tonumber(c[6]) - 1 do
    if tonumber(redis.call('HGET', KEYS[1], 'sfail:' .. i) or '0') > 0 then
      failed_sections = failed_sections + 1
    end
  end
  if failed_sections == 0 then
    status = 'completed'
  elseif failed_sections == tonumber(c[6]) then
    status = 'failed'
  else
    status = 'partial'
  end
  redis.call('HSET', KEYS[1], 'status', status, 'finished_ms', now)
  duration = job_duration_ms(KEYS[1], now)
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'event', 'unit_' .. outcome, 'unit', unit,
  'status', status, 'units_done', done, 'units_failed', failed, 'units_total', total,
  'rows', c[5], 'ts_ms', now)
for i = 1, 5 do
  redis.call('EXPIRE', KEYS[i], ARGV[7])
end
return {1, finished, status, c[7], st.rows or 0, duration}
