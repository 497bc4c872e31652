-- promote.lua: move due delayed messages onto their stream.
--
-- A message's own delivery limit (options.max_deliveries, Message field 6 of the msgpack
-- array) is written to the entry's `x` field, as Broker.enqueue does for an immediate send:
-- requeue_entry reads the limit from there, and without it a delayed or retried message
-- would fall back to the default limit.
--
-- "Now" is Redis's clock (TIME), never a host's: hosts with skewed clocks agree on when a
-- retry is due.
--
-- KEYS[1] delayed      zset of encoded messages scored by due ms (P:q:{<queue>}:delayed)
-- KEYS[2] stream       the work stream (P:q:{<queue>})
-- ARGV[1] limit        at most this many promoted per call
-- Returns the number promoted.
local function max_deliveries(payload)
  local ok, message = pcall(cmsgpack.unpack, payload)
  if ok and type(message) == 'table' and type(message[6]) == 'table' then
    return tonumber(message[6]['max_deliveries'])
  end
  return nil
end

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[1]))
for _, payload in ipairs(due) do
  local max = max_deliveries(payload)
  if max then
    redis.call('XADD', KEYS[2], '*', 'm', payload, 'x', max)
  else
    redis.call('XADD', KEYS[2], '*', 'm', payload)
  end
  redis.call('ZREM', KEYS[1], payload)
end
return #due
