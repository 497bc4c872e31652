-- job_resume.lua: put back in the queue the units of a stranded job (run by the sweeper).
--
-- Invariant kept: every unit of a queued or running job is queued (a message in its
-- stream), running (a message pending on a worker), scheduled (in the delayed zset) or
-- settled. The sweeper found `units` queued or running with no message anywhere while the
-- job was idle past the grace time (the submit that took them died before sending, or
-- their message was dead-lettered); they go back to queued for the sweeper to send. A
-- running one keeps its attempt: begin_unit hands the resent message a newer one, which
-- fences off any straggler. A unit resumed more than max_resumes times fails the job
-- instead, so a message that keeps being lost cannot loop until the timeout. The job's
-- in-flight counter is recounted from the units, so a drifted counter cannot close its
-- window for good.
--
-- KEYS[1] job       hash
-- KEYS[2] units     hash: unit index -> msgpack unit state (field `resumed` counts resumes)
-- KEYS[3] progress  stream
-- ARGV[1] now_ms
-- ARGV[2] ttl_s
-- ARGV[3] progress_maxlen
-- ARGV[4] max_resumes
-- ARGV[5..] units   the units found without a message
-- Returns {"skip", status} (not queued/running) | {"fail", reason} | {"resumed", inflight, units...}.

local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'queued' and status ~= 'running' then
  return {'skip', tostring(status)}
end
local now, max_resumes = tonumber(ARGV[1]), tonumber(ARGV[4])
local resumed = {'resumed', 0}
for i = 5, #ARGV do
  local raw = redis.call('HGET', KEYS[2], ARGV[i])
  if raw then
    local st = cmsgpack.unpack(raw)
    if st.state == 'queued' or st.state == 'running' then
      st.resumed = (st.resumed or 0) + 1
      if st.resumed > max_resumes then
        return {'fail', 'unit ' .. ARGV[i] .. ' was stranded ' .. st.resumed ..
          ' times (its message lost or dead-lettered each time)'}
      end
      st.state = 'queued'
      st.next = nil
      redis.call('HSET', KEYS[2], ARGV[i], cmsgpack.pack(st))
      resumed[#resumed + 1] = tonumber(ARGV[i])
    end
  end
end
local inflight = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local state = cmsgpack.unpack(all[i + 1]).state
  if state == 'queued' or state == 'running' then
    inflight = inflight + 1
  end
end
redis.call('HSET', KEYS[1], 'inflight', inflight)
resumed[2] = inflight
if #resumed > 2 then
  local c = redis.call('HMGET', KEYS[1], 'units_done', 'units_failed', 'units_total', 'rows')
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'event', 'resumed', 'status', status,
    'units_done', c[1], 'units_failed', c[2], 'units_total', c[3], 'rows', c[4], 'ts_ms', now)
end
for i = 1, 3 do
  redis.call('EXPIRE', KEYS[i], ARGV[2])
end
return resumed
