-- job_create.lua: admit a trace job atomically (single-flight, quota, then create).
-- Invariant kept: a job is admitted whole or not at all (record, units all pending, todo,
-- inputs, quota slot, single-flight key, progress), each key with the job's TTL; its first
-- units are sent by the caller (Dispatcher.start), which rolls it back (job_abandon.lua) if
-- it cannot, and the sweeper resumes it if even that fails.
--
-- KEYS[1] singleflight   string: job id of the in-flight job with this fingerprint
-- KEYS[2] user inflight  zset: the user's queued/running job ids, scored by created ms
-- KEYS[3] jobs index     zset: every job id, scored by created ms (expires 2 x ttl after the
--                        newest job: a job finishes within one ttl and its keys live one more)
-- KEYS[4] job            hash: spec and counters of the new job
-- KEYS[5] units          hash: unit index -> msgpack unit state
-- KEYS[6] todo           list: unit indexes not yet sent to the queue
-- KEYS[7] inputs           hash: item-chunk index -> msgpack input of the chunk
-- KEYS[8] progress       stream: progress events
-- KEYS[9] stats, KEYS[10..15] status zsets (see _jobstats_lib.lua)
-- ARGV[1] job id            ARGV[2] now ms          ARGV[3] ttl s
-- ARGV[4] user max inflight ARGV[5] progress maxlen ARGV[6] units total
-- ARGV[7] packed pending unit state
-- ARGV[8] n = number of job hash field/value pairs, then 2n values,
--         then one packed input per item chunk (in chunk order).
-- Returns {"existing", job id} | {"quota", inflight count} | {"created", job id}.

local job_id, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local existing = redis.call('GET', KEYS[1])
if existing then
  return {'existing', existing}
end

-- Members older than the TTL belong to jobs that expired without settling.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl * 1000)
local inflight = redis.call('ZCARD', KEYS[2])
if inflight >= tonumber(ARGV[4]) then
  return {'quota', inflight}
end

local n_fields = tonumber(ARGV[8])
local base = 8
for i = 1, n_fields do
  redis.call('HSET', KEYS[4], ARGV[base + 2 * i - 1], ARGV[base + 2 * i])
end

local total, pending = tonumber(ARGV[6]), ARGV[7]
local batch = {}
for u = 0, total - 1 do
  redis.call('HSET', KEYS[5], u, pending)
  batch[#batch + 1] = u
  if #batch == 500 or u == total - 1 then
    redis.call('RPUSH', KEYS[6], unpack(batch))
    batch = {}
  end
end

local first_input = base + 2 * n_fields + 1
for i = first_input, #ARGV do
  redis.call('HSET', KEYS[7], i - first_input, ARGV[i])
end

redis.call('SET', KEYS[1], job_id, 'EX', ttl)
redis.call('ZADD', KEYS[2], now, job_id)
redis.call('EXPIRE', KEYS[2], ttl)
redis.call('ZADD', KEYS[3], now, job_id)
redis.call('EXPIRE', KEYS[3], 2 * ttl)
redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[5], '*', 'event', 'created', 'status', 'queued',
  'units_done', 0, 'units_failed', 0, 'units_total', total, 'rows', 0, 'ts_ms', now)
redis.call('HINCRBY', KEYS[9], 'jobs_submitted', 1)
job_status_index(9, job_id, nil, 'queued', now, ttl)
for i = 4, 8 do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return {'created', job_id}
