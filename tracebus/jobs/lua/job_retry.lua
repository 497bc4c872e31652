-- job_retry.lua: re-run what failed. Failed and cancelled units go back to pending and
-- onto todo (in unit order), the job is queued again (the caller admitted it under the
-- user's quota first, user_admit.lua), and up to the per-job cap of them are moved to
-- queued for the caller to send.
-- Invariant kept: only a finished job is re-run, within the user's quota; its failed and
-- cancelled units become pending again and the caller sends the first of them.
--
-- KEYS[1] job            hash
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list
-- KEYS[4] progress       stream
-- KEYS[5] inputs         hash (TTL refreshed)
-- ARGV[1] now_ms
-- ARGV[2] ttl_s
-- ARGV[3] progress_maxlen
-- ARGV[4] per_job_cap      most units queued at once
-- Returns {"missing"} | {"conflict", status} | {"queued", status before, units...}.

local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return {'missing'}
end
if status ~= 'partial' and status ~= 'failed' and status ~= 'cancelled' then
  return {'conflict', status}
end
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])

local all = redis.call('HGETALL', KEYS[2])
local reset = {}
for i = 1, #all, 2 do
  local st = cmsgpack.unpack(all[i + 1])
  if st.state == 'failed' or st.state == 'cancelled' then
    st.state = 'pending'
    st.error = nil
    st.finished_ms = nil
    redis.call('HSET', KEYS[2], all[i], cmsgpack.pack(st))
    reset[#reset + 1] = tonumber(all[i])
  end
end
table.sort(reset)
redis.call('DEL', KEYS[3])
for i = 1, #reset, 500 do
  redis.call('RPUSH', KEYS[3], unpack(reset, i, math.min(i + 499, #reset)))
end

local n_sections = tonumber(redis.call('HGET', KEYS[1], 'n_sections'))
for i = 0, n_sections - 1 do
  redis.call('HDEL', KEYS[1], 'sfail:' .. i)
end
redis.call('HDEL', KEYS[1], 'finished_ms')
redis.call('HSET', KEYS[1], 'status', 'queued', 'units_failed', 0, 'units_cancelled', 0,
  'inflight', 0, 'error', '', 'retried_ms', now)

local cap, taken = tonumber(ARGV[4]), {'queued', status}
for _ = 1, math.min(cap, #reset) do
  local u = redis.call('LPOP', KEYS[3])
  local st = cmsgpack.unpack(redis.call('HGET', KEYS[2], u))
  st.state = 'queued'
  redis.call('HSET', KEYS[2], u, cmsgpack.pack(st))
  taken[#taken + 1] = tonumber(u)
end
redis.call('HSET', KEYS[1], 'inflight', #taken - 2)
local c = redis.call('HMGET', KEYS[1], 'units_done', 'units_total', 'rows')
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'event', 'retried', 'status', 'queued',
  'units_done', c[1], 'units_failed', 0, 'units_total', c[2], 'rows', c[3], 'ts_ms', now)
for _, i in ipairs({1, 2, 3, 4, 5}) do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return taken
