#!lua flags=allow-oom
-- job_metrics.lua: the system-wide job figures of one job transition, under the {jobs} tag.
--
-- The job scripts run in their job's slot and cannot touch these keys (a Redis Cluster
-- runs a script in one slot); they return what changed and tracebus/jobs/figures.py calls
-- this script right after. A process that dies between the two loses one figure, never
-- job state; the status zsets heal by themselves (members expire with their job's TTL).
-- Runs when Redis is full (allow-oom): the transition already happened in the job's slot
-- (a job failed because Redis is full must still leave the in-flight figures), and it writes
-- a few counters and moves one member between bounded zsets.
--
-- KEYS[1] stats
-- KEYS[2..7] by_status   the status zsets, in _jobstats_lib.lua's order
-- KEYS[8] index          the jobs index: expires 2 x ttl after the newest job was filed, and
--                        no earlier than 2 x ttl after any job's status change
-- ARGV[1] job_id
-- ARGV[2] old            old status, '' or '*' (not known: out of every status zset first,
--                        the sweeper's repair of a figure lost with a process)
-- ARGV[3] new            new status, '' (no status change) or 'gone' (the job was rolled
--                        back: out of every status zset and the index)
-- ARGV[4] now_ms
-- ARGV[5] ttl_s
-- ARGV[6] duration_ms    of a finished job, or ''
-- ARGV[7] bounds_ms      histogram bounds (comma-separated)
-- ARGV[8] created_ms     of a new job, or ''
-- ARGV[9..] counters     counter field, increment, ... (added to the stats hash)
-- Returns 1.
local job_id, now, ttl = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
for i = 9, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
if ARGV[3] == 'gone' then
  for i = 2, 8 do
    redis.call('ZREM', KEYS[i], job_id)
  end
elseif ARGV[3] ~= '' then
  local old = nil
  if ARGV[2] == '*' then
    for i = 2, 7 do
      redis.call('ZREM', KEYS[i], job_id)
    end
  elseif ARGV[2] ~= '' then
    old = ARGV[2]
  end
  job_status_index(1, job_id, old, ARGV[3], now, ttl)
  if ARGV[6] ~= '' then
    observe_duration(KEYS[1], ARGV[3], tonumber(ARGV[6]), ARGV[7])
  end
  -- The job script before this one renewed the job's TTL (a retry restarts it for another
  -- run): the index outlives every job it lists.
  redis.call('EXPIRE', KEYS[8], 2 * ttl, 'GT')
end
if ARGV[8] ~= '' then
  redis.call('ZADD', KEYS[8], ARGV[8], job_id)
  redis.call('EXPIRE', KEYS[8], 2 * ttl)
end
return 1
