-- job_retry.lua: re-run what failed. Failed and cancelled units go back to pending and
-- onto todo (in unit order), the job is queued again (the caller admitted it under the
-- user's quota first, user_admit.lua), and up to the per-job cap of them are moved to
-- queued for the caller to send.
-- A job in stages (a `gates` field, job_take.lua) re-runs every stage after the first one
-- with a failed or cancelled unit, done units included: a later stage read what the failed
-- units were to prepare (a reduce, their partials), so its results are stale. Those units
-- lose their manifest entries and partials (their chunks, named by nothing, expire), their
-- rows leave the job's count, and the gates hold them back again until the stage before
-- them has settled anew.
-- Invariant kept: only a finished job is re-run, within the user's quota; its failed and
-- cancelled units become pending again and the caller sends the first of them.
--
-- KEYS[1] job            hash
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list
-- KEYS[4] progress       stream
-- KEYS[5] inputs         hash (TTL refreshed)
-- KEYS[6] partials       hash: unit index -> msgpack partial aggregate
-- KEYS[7..] manifests    hash per section, in the plan's section order (unit u is in
--                        section floor(u / chunks), chunks = units_total / n_sections)
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

local gates = {}
for g in string.gmatch(redis.call('HGET', KEYS[1], 'gates') or '', '%d+') do
  gates[#gates + 1] = tonumber(g)
end
table.sort(gates)
local all = redis.call('HGETALL', KEYS[2])
local first_bad = nil
for i = 1, #all, 2 do
  local state = cmsgpack.unpack(all[i + 1]).state
  if (state == 'failed' or state == 'cancelled') and (first_bad == nil or tonumber(all[i]) < first_bad) then
    first_bad = tonumber(all[i])
  end
end
local redo_from = nil  -- the first unit of the stage after the first bad unit's
for _, gate in ipairs(gates) do
  if first_bad ~= nil and gate > first_bad then
    redo_from = gate
    break
  end
end

local n_sections = tonumber(redis.call('HGET', KEYS[1], 'n_sections'))
local chunks = tonumber(redis.call('HGET', KEYS[1], 'units_total')) / n_sections
local reset, undone, unrows = {}, 0, 0
for i = 1, #all, 2 do
  local u, st = tonumber(all[i]), cmsgpack.unpack(all[i + 1])
  local redo = redo_from ~= nil and u >= redo_from and st.state == 'done'
  if st.state == 'failed' or st.state == 'cancelled' or redo then
    if redo then
      undone, unrows = undone + 1, unrows + (st.rows or 0)
      redis.call('HDEL', KEYS[7 + math.floor(u / chunks)], u)
      redis.call('HDEL', KEYS[6], u)
      st.rows = 0
    end
    st.state = 'pending'
    st.error = nil
    st.finished_ms = nil
    st.next = nil
    redis.call('HSET', KEYS[2], all[i], cmsgpack.pack(st))
    reset[#reset + 1] = u
  end
end
table.sort(reset)
redis.call('DEL', KEYS[3])
for i = 1, #reset, 500 do
  redis.call('RPUSH', KEYS[3], unpack(reset, i, math.min(i + 499, #reset)))
end

for i = 0, n_sections - 1 do
  redis.call('HDEL', KEYS[1], 'sfail:' .. i)
end
redis.call('HDEL', KEYS[1], 'finished_ms')
-- 0 - n, not -n: a negated 0 is "-0" to Redis, which HINCRBY refuses
redis.call('HINCRBY', KEYS[1], 'units_done', 0 - undone)
redis.call('HINCRBY', KEYS[1], 'rows', 0 - unrows)
redis.call('HSET', KEYS[1], 'status', 'queued', 'units_failed', 0, 'units_cancelled', 0,
  'inflight', 0, 'error', '', 'retried_ms', now)

-- The first units to send, as job_take.lua would take them: not past a closed gate.
local settled = tonumber(redis.call('HGET', KEYS[1], 'units_done') or '0')
local closed_from = nil
for _, gate in ipairs(gates) do
  if settled < gate then
    closed_from = gate
    break
  end
end
local cap, taken = tonumber(ARGV[4]), {'queued', status}
while #taken - 2 < cap do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head or (closed_from ~= nil and tonumber(head) >= closed_from) then break end
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
for i = 1, #KEYS do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return taken
