-- purge.lua: delete up to ARGV[2] waiting entries of a work stream (the ones no worker read).
--
-- Entries after the group's last-delivered-id were never read (retries and requeues are new
-- entries, so they are there too); entries before it that are still in the stream are
-- pending (running) and are left alone: their workers ack them as usual. The id is read
-- again on every call, so a worker reading between two batches never loses an entry it holds.
--
-- KEYS[1] stream      the work stream (P:q:{<queue>})
-- ARGV[1] group       the consumer group
-- ARGV[2] batch       most entries deleted by this call
-- Returns the number deleted (0: nothing waits any more).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local last = nil
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #group, 2 do
    fields[group[i]] = group[i + 1]
  end
  if fields['name'] == ARGV[1] then
    last = fields['last-delivered-id']
  end
end
local range
if last then
  range = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', ARGV[2])
else
  range = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[2])
end
if #range == 0 then
  return 0
end
local ids = {}
for i, entry in ipairs(range) do
  ids[i] = entry[1]
end
return redis.call('XDEL', KEYS[1], unpack(ids))
