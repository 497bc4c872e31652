-- forget_consumers.lua: remove from the group the consumers that are gone (a dead host's
-- workers, recycled processes), so XINFO and the group stay the size of the live pool.
--
-- A consumer is removed only when it holds nothing (pending 0) and has not read for
-- min_idle ms; the check and XGROUP DELCONSUMER run in one script, so an entry can never
-- be delivered to it in between (DELCONSUMER drops a consumer's pending entries). A live
-- worker that was idle that long is only recreated by its next XREADGROUP.
--
-- KEYS[1] stream       the work stream (P:q:{<queue>})
-- ARGV[1] group        consumer group name
-- ARGV[2] min_idle_ms  a consumer idle at least this long (and holding nothing) is removed
-- Returns the number of consumers removed.
local removed = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local name, pending, idle
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = tonumber(c[i + 1])
    elseif c[i] == 'idle' then idle = tonumber(c[i + 1]) end
  end
  if name and pending == 0 and idle >= tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed
