#!lua flags=allow-oom
-- job_abandon.lua: roll back a job whose first units could not be sent (submit failed half
-- way: Redis restarted under the producer's connection, or refused the XADD when full).
--
-- Invariant kept: a job is never left admitted with nobody to run it. Either it is removed
-- (job record, units, todo, inputs, progress) and the caller then gives back what its
-- admission took, or it is left alone because it is live: some unit was sent by someone
-- else (a single-flight twin's submit) or has started, and the sweeper or the workers
-- complete it. Runs in the job's slot only; the admission (quota slot, single-flight key:
-- user_release.lua in the user's slot) and the figures (index, status zsets, counter:
-- job_metrics.lua in the {jobs} slot) are released by the caller right after, and only when
-- this answered "abandoned", so a live job never loses its quota slot or its index entry.
-- A caller dying in between leaves a quota slot held until the job TTL and a dangling index
-- entry (skipped by the sweeper and listings, pruned with expired jobs); never a job.
-- Runs when Redis is full (allow-oom): it only deletes.
--
-- KEYS[1] job            hash
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list
-- KEYS[4] inputs         hash
-- KEYS[5] progress       stream
-- ARGV[1..] taken   the units this submit took (moved to queued) and failed to send
-- Returns {"gone"} (no such job) | {"live", why} | {"abandoned", user, fingerprint}.

local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return {'gone'}
end
if status ~= 'queued' or redis.call('HGET', KEYS[1], 'retried_ms') then
  return {'live', status}
end
local mine = {}
for i = 1, #ARGV do
  mine[ARGV[i]] = true
end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local st = cmsgpack.unpack(all[i + 1])
  if st.state ~= 'pending' and not (st.state == 'queued' and mine[all[i]]) then
    return {'live', 'unit ' .. all[i] .. ' is ' .. st.state}
  end
end
local owner = redis.call('HMGET', KEYS[1], 'user', 'fingerprint')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return {'abandoned', owner[1] or '', owner[2] or ''}
