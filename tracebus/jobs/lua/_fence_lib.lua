-- Shared prelude (prepended by tracebus/jobs/scripts.py to result_write, result_commit and
-- job_settle): the fence that keeps a stale attempt from touching a unit.
--
-- running_attempt(units_key, unit, attempt)
--   The unit's decoded state when it is running with exactly this attempt, else nil
--   (unknown unit, a newer attempt, or the unit settled or cancelled meanwhile).
local function running_attempt(units_key, unit, attempt)
  local raw = redis.call('HGET', units_key, unit)
  if not raw then
    return nil
  end
  local st = cmsgpack.unpack(raw)
  if st.state ~= 'running' or st.attempt ~= tonumber(attempt) then
    return nil
  end
  return st
end
