-- Shared prelude (prepended by tracebus/engine/scripts.py to requeue.lua and autoclaim.lua).
--
-- requeue_entry(stream, dead, group, id, deliveries, uncount, default_max, reason, dead_maxlen, dead_ttl_s)
--   Moves one pending entry of `stream` back to its tail, or to the dead-letter stream `dead`
--   when it has been delivered `max` times or more. The delivery count is carried in field `d`
--   of the new entry (the PEL count of a new entry restarts at 0); `max` comes from field `x`
--   of the entry or `default_max`. `uncount` = 1 when this delivery never started running
--   (a drained, prefetched entry) and must not count. The old entry is XACKed and XDELed.
--   Returns 1 when requeued, 2 when dead-lettered, 0 when the entry was already deleted
--   (its PEL slot is acked and a dead-letter record without payload is written).
local function requeue_entry(stream, dead, group, id, deliveries, uncount, default_max,
                             reason, dead_maxlen, dead_ttl_s)
  local found = redis.call('XRANGE', stream, id, id)
  if #found == 0 then
    redis.call('XACK', stream, group, id)
    redis.call('XADD', dead, 'MAXLEN', '~', dead_maxlen, '*', 'reason',
               'entry deleted while pending: ' .. reason, 'entry', id)
    redis.call('EXPIRE', dead, dead_ttl_s)
    return 0
  end
  local fields = found[1][2]
  local payload, prior, max = nil, 0, tonumber(default_max)
  for i = 1, #fields, 2 do
    if fields[i] == 'm' then payload = fields[i + 1]
    elseif fields[i] == 'd' then prior = tonumber(fields[i + 1])
    elseif fields[i] == 'x' then max = tonumber(fields[i + 1]) end
  end
  local total = prior + tonumber(deliveries) - tonumber(uncount)
  if total < 0 then total = 0 end
  local result
  if payload == nil or (tonumber(uncount) == 0 and total >= max) then
    redis.call('XADD', dead, 'MAXLEN', '~', dead_maxlen, '*', 'm', payload or '',
               'reason', reason, 'deliveries', total, 'entry', id)
    redis.call('EXPIRE', dead, dead_ttl_s)
    result = 2
  else
    if max == tonumber(default_max) then
      redis.call('XADD', stream, '*', 'm', payload, 'd', total)
    else
      redis.call('XADD', stream, '*', 'm', payload, 'd', total, 'x', max)
    end
    result = 1
  end
  redis.call('XACK', stream, group, id)
  redis.call('XDEL', stream, id)
  return result
end
