-- job_take.lua: move up to n unit indexes from todo to queued, within the per-job cap.
-- Invariant kept: at most the per-job cap of units are queued or running (`inflight`), and a
-- unit leaves todo only to become queued; the caller must send what it returns (if it dies
-- first, the memo below or the sweeper re-sends them).
--
-- KEYS[1] job       hash: counters (status, inflight)
-- KEYS[2] units     hash: unit index -> msgpack unit state
-- KEYS[3] todo      list: unit indexes not yet sent
-- KEYS[4] progress  stream (unused here but refreshed)
-- KEYS[5] inputs    hash (TTL refreshed)
-- ARGV[1] n            units wanted
-- ARGV[2] per_job_cap  most units queued or running at once
-- ARGV[3] ttl_s
-- ARGV[4] by_unit      the unit whose completion frees the slot, or -1 (submit, retry)
-- Returns the list of unit indexes now queued (empty when the job is not queued/running).
-- A job with a `gates` field "g1,g2,..." runs in stages: a unit >= g is not taken until
-- the first g units have all settled (done or failed), e.g. a stage that prepares what the
-- next stage's units read, and a last one that reduces their partials.
-- With by_unit, the answer is remembered in that unit's state (field `next`) and a repeat
-- call returns those of them still queued: a worker that died after taking but before
-- sending its successors re-sends them on redelivery instead of stranding them in queued.
-- A remembered unit that has started since was evidently sent and is not sent again;
-- re-sending it would start a second attempt that fences off the running one, and each
-- such duplicate would replay its own unit's memo in turn, down the rest of the job.

local by = ARGV[4]
local by_state = nil
if by ~= '-1' then
  local raw = redis.call('HGET', KEYS[2], by)
  if raw then
    by_state = cmsgpack.unpack(raw)
    if by_state.next then
      local still = {}
      for _, u in ipairs(by_state.next) do
        local st = redis.call('HGET', KEYS[2], u)
        if st and cmsgpack.unpack(st).state == 'queued' then
          still[#still + 1] = u
        end
      end
      return still
    end
  end
end

local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'running' then
  return {}
end
local inflight = tonumber(redis.call('HGET', KEYS[1], 'inflight') or '0')
local want = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - inflight)
local settled = tonumber(redis.call('HGET', KEYS[1], 'units_done') or '0')
  + tonumber(redis.call('HGET', KEYS[1], 'units_failed') or '0')
local closed_from = nil  -- the first unit index that must wait
for g in string.gmatch(redis.call('HGET', KEYS[1], 'gates') or '', '%d+') do
  local gate = tonumber(g)
  if settled < gate and (closed_from == nil or gate < closed_from) then
    closed_from = gate
  end
end
local taken = {}
while #taken < want do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head or (closed_from ~= nil and tonumber(head) >= closed_from) then break end
  local u = redis.call('LPOP', KEYS[3])
  local raw = redis.call('HGET', KEYS[2], u)
  if raw then
    local st = cmsgpack.unpack(raw)
    if st.state == 'pending' then
      st.state = 'queued'
      redis.call('HSET', KEYS[2], u, cmsgpack.pack(st))
      taken[#taken + 1] = tonumber(u)
    end
  end
end
if #taken > 0 then
  redis.call('HINCRBY', KEYS[1], 'inflight', #taken)
end
if by_state then
  by_state.next = taken
  redis.call('HSET', KEYS[2], by, cmsgpack.pack(by_state))
end
for i = 1, 5 do
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
return taken
