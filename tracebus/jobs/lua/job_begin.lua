-- job_begin.lua: start (or restart) one unit and hand out its next attempt token.
-- Invariant kept: a unit has one current attempt; a newer one fences off every older one,
-- and nothing runs for a job that is no longer queued or running.
--
-- KEYS[1] job       hash: status, started_ms
-- KEYS[2] units     hash: unit index -> msgpack unit state
-- KEYS[3] progress  stream: progress events
-- KEYS[4] todo      list (TTL refreshed)
-- KEYS[5] inputs    hash (TTL refreshed)
-- KEYS[6] manifest  hash of the unit's section: an entry is a commit of an earlier attempt
-- ARGV[1] unit
-- ARGV[2] now_ms
-- ARGV[3] ttl_s
-- ARGV[4] progress_maxlen
-- Returns {new attempt, the job's status before, the unit's manifest entry or false, the input of
-- the unit's item chunk or false} (the caller moves the job between the status zsets,
-- job_metrics.lua, finishes a unit an earlier attempt committed instead of running it, and runs
-- the unit on that input without reading it again), or false when the unit must be skipped (job
-- not queued/running, unit not queued/running: done, failed, cancelled, pending again).

local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'running' then
  return false
end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if not raw then
  return false
end
local st = cmsgpack.unpack(raw)
if st.state ~= 'queued' and st.state ~= 'running' then
  return false
end
local now = tonumber(ARGV[2])
st.attempt = (st.attempt or 0) + 1
st.state = 'running'
st.next = nil  -- successors are taken afresh when this attempt settles
st.started_ms = now
redis.call('HSET', KEYS[2], ARGV[1], cmsgpack.pack(st))
local before = status
if status == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'running')
  status = 'running'
end
if not redis.call('HGET', KEYS[1], 'started_ms') then
  redis.call('HSET', KEYS[1], 'started_ms', now)
end
local c = redis.call('HMGET', KEYS[1], 'units_done', 'units_failed', 'units_total', 'rows')
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'event', 'unit_started', 'unit', ARGV[1],
  'attempt', st.attempt, 'status', status, 'units_done', c[1], 'units_failed', c[2],
  'units_total', c[3], 'rows', c[4], 'ts_ms', now)
for i = 1, 5 do
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
local chunk = tonumber(ARGV[1]) % tonumber(redis.call('HGET', KEYS[1], 'n_chunks') or '1')
return {st.attempt, before, redis.call('HGET', KEYS[6], ARGV[1]), redis.call('HGET', KEYS[5], chunk)}
