-- job_create.lua: create an admitted job (user_admit.lua ran first, in the user's slot).
-- Invariant kept: a job is created whole or not at all (record, units all pending, todo,
-- inputs, progress), each key with the job's TTL; its first units are sent by the caller
-- (Dispatcher.start), which rolls it back (job_abandon.lua, then the admission release in
-- the user's slot) if it cannot, and the sweeper resumes it if even that fails.
--
-- KEYS[1] job            hash: spec and counters of the new job
-- KEYS[2] units          hash: unit index -> msgpack unit state
-- KEYS[3] todo           list: unit indexes not yet sent to the queue
-- KEYS[4] inputs         hash: item-chunk index -> msgpack input of the chunk
-- KEYS[5] progress       stream: progress events
-- ARGV[1] job_id
-- ARGV[2] now_ms
-- ARGV[3] ttl_s
-- ARGV[4] progress_maxlen
-- ARGV[5] units_total
-- ARGV[6] pending           packed state of a pending unit
-- ARGV[7] n_fields          n = number of job hash field/value pairs
-- ARGV[8..] fields_inputs   the 2n field/value pairs,
--         then one packed input per item chunk (in chunk order).
-- Returns {"created", job id}.

local job_id, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local n_fields = tonumber(ARGV[7])
local base = 7
for i = 1, n_fields do
  redis.call('HSET', KEYS[1], ARGV[base + 2 * i - 1], ARGV[base + 2 * i])
end

local total, pending = tonumber(ARGV[5]), ARGV[6]
local batch = {}
for u = 0, total - 1 do
  redis.call('HSET', KEYS[2], u, pending)
  batch[#batch + 1] = u
  if #batch == 500 or u == total - 1 then
    redis.call('RPUSH', KEYS[3], unpack(batch))
    batch = {}
  end
end

local first_input = base + 2 * n_fields + 1
for i = first_input, #ARGV do
  redis.call('HSET', KEYS[4], i - first_input, ARGV[i])
end

redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[4], '*', 'event', 'created', 'status', 'queued',
  'units_done', 0, 'units_failed', 0, 'units_total', total, 'rows', 0, 'ts_ms', now)
for i = 1, 5 do
  redis.call('EXPIRE', KEYS[i], ttl)
end
return {'created', job_id}
