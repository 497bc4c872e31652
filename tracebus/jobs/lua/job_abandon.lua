#!lua flags=allow-oom
-- job_abandon.lua: roll back a job whose first units could not be sent (submit failed half
-- way: Redis restarted under the producer's connection, or refused the XADD when full).
--
-- Invariant kept: a job is never left admitted with nobody to run it. Either it is removed
-- with everything its admission took (job record, units, todo, inputs, progress, the user's
-- quota slot, the single-flight key when it still points at it, its index and status
-- entries), or it is left alone because it is live: some unit was sent by someone else (a
-- single-flight twin's submit) or has started, and the sweeper or the workers complete it.
-- Runs when Redis is full (allow-oom): it only deletes.
--
-- KEYS[1] job            hash
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list
-- KEYS[4] inputs         hash
-- KEYS[5] progress       stream
-- KEYS[6] user inflight  zset
-- KEYS[7] singleflight   string
-- KEYS[8] jobs index     zset
-- KEYS[9] stats, KEYS[10..15] status zsets (see _jobstats_lib.lua)
-- ARGV[1] job id  ARGV[2..] the units this submit took (moved to queued) and failed to send
-- Returns {"gone"} (no such job) | {"live", why} | {"abandoned"}.

local job_id = ARGV[1]
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return {'gone'}
end
if status ~= 'queued' or redis.call('HGET', KEYS[1], 'retried_ms') then
  return {'live', status}
end
local mine = {}
for i = 2, #ARGV do
  mine[ARGV[i]] = true
end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local st = cmsgpack.unpack(all[i + 1])
  if st.state ~= 'pending' and not (st.state == 'queued' and mine[all[i]]) then
    return {'live', 'unit ' .. all[i] .. ' is ' .. st.state}
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[6], job_id)
if redis.call('GET', KEYS[7]) == job_id then
  redis.call('DEL', KEYS[7])
end
redis.call('ZREM', KEYS[8], job_id)
for i = 10, 15 do
  redis.call('ZREM', KEYS[i], job_id)
end
redis.call('HINCRBY', KEYS[9], 'jobs_abandoned', 1)
return {'abandoned'}
