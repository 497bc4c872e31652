#!lua flags=allow-oom
-- job_cancel.lua: cancel a queued or running job. Units not yet settled become
-- "cancelled", so begin_unit skips them and running attempts are fenced off at their
-- next chunk write; units already done keep their results. Also how a job is failed as a
-- whole (final_status "failed": past its time limit, stranded, Redis full).
--
-- Invariant kept: a job ends in bounded time whatever Redis's state: it runs when Redis is
-- full (allow-oom), since failing a job is what must still work then; it writes a few
-- fields and cancels the units that would otherwise write rows.
--
-- KEYS[1] job            hash
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list: emptied
-- KEYS[4] progress       stream
-- KEYS[5] inputs         hash (TTL refreshed)
-- ARGV[1] now_ms
-- ARGV[2] ttl_s
-- ARGV[3] progress_maxlen
-- ARGV[4] final_status     "cancelled", or "failed" (the job ran past its time limit)
-- ARGV[5] error            recorded on the job, or '' (none)
-- Returns {"missing"} | {"conflict", status} | {"cancelled", n units cancelled, status before,
-- duration ms} (the caller records the figures and releases the user's quota and
-- single-flight).

local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return {'missing'}
end
if status ~= 'queued' and status ~= 'running' then
  return {'conflict', status}
end
local now = tonumber(ARGV[1])
local final = ARGV[4]
local all = redis.call('HGETALL', KEYS[2])
local n = 0
for i = 1, #all, 2 do
  local st = cmsgpack.unpack(all[i + 1])
  if st.state == 'pending' or st.state == 'queued' or st.state == 'running' then
    st.state = 'cancelled'
    st.finished_ms = now
    redis.call('HSET', KEYS[2], all[i], cmsgpack.pack(st))
    n = n + 1
  end
end
redis.call('DEL', KEYS[3])
redis.call('HINCRBY', KEYS[1], 'units_cancelled', n)
redis.call('HSET', KEYS[1], 'status', final, 'finished_ms', now, 'inflight', 0)
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[1], 'error', ARGV[5])
end
local duration = job_duration_ms(KEYS[1], now)
local c = redis.call('HMGET', KEYS[1], 'units_done', 'units_failed', 'units_total', 'rows')
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'event', final, 'status', final,
  'units_done', c[1], 'units_failed', c[2], 'units_total', c[3], 'rows', c[4], 'ts_ms', now)
for _, i in ipairs({1, 2, 4, 5}) do
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return {'cancelled', n, status, duration}
