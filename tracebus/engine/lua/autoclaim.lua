-- autoclaim.lua: the janitor. Claims entries idle past min_idle (their worker's host is
-- gone: a live worker's entries are renewed well before that) and requeues them.
--
-- XAUTOCLAIM ... JUSTID does not bump the delivery count, so the count we carry is the
-- real number of deliveries. Entries deleted from the stream while pending come back in
-- the reply's third element; they are acked and recorded in the dead stream, never
-- dropped silently.
--
-- KEYS[1] stream       the work stream    (P:q:{<queue>})
-- KEYS[2] dead         dead-letter stream (P:q:{<queue>}:dead)
-- KEYS[3] stats        hash of the queue's cumulative counters (P:q:{<queue>}:stats)
-- ARGV[1] group        consumer group name
-- ARGV[2] consumer     the janitor's consumer name (claims go to it)
-- ARGV[3] min_idle_ms  entries idle at least this long are claimed
-- ARGV[4] cursor       XAUTOCLAIM cursor ('0-0' to start)
-- ARGV[5] count        at most this many entries per call
-- ARGV[6] default_max  max deliveries for entries without an `x` field
-- ARGV[7] dead_maxlen  approximate cap of the dead stream
-- ARGV[8] dead_ttl_s   TTL of the dead stream
-- ARGV[9] queue        queue name (stats fields are per queue)
-- Returns {next_cursor, requeued, dead, deleted}
local stream, dead = KEYS[1], KEYS[2]
local group, me = ARGV[1], ARGV[2]
local reply = redis.call('XAUTOCLAIM', stream, group, me, ARGV[3], ARGV[4], 'COUNT', ARGV[5], 'JUSTID')
local counts = {0, 0, 0}
for _, id in ipairs(reply[2]) do
  local info = redis.call('XPENDING', stream, group, id, id, 1)
  local deliveries = 1
  if #info > 0 then deliveries = info[1][4] end
  local r = requeue_entry(stream, dead, group, id, deliveries, 0, ARGV[6],
                          'idle past ' .. ARGV[3] .. ' ms (worker host lost?)', ARGV[7], ARGV[8])
  if r == 1 then counts[1] = counts[1] + 1 elseif r == 2 then counts[2] = counts[2] + 1 end
end
for _, id in ipairs(reply[3] or {}) do
  redis.call('XADD', dead, 'MAXLEN', '~', ARGV[7], '*', 'reason',
             'entry deleted while pending', 'entry', id)
  redis.call('EXPIRE', dead, ARGV[8])
  counts[3] = counts[3] + 1
end
if counts[1] > 0 then
  redis.call('HINCRBY', KEYS[3], 'redelivered:janitor:' .. ARGV[9], counts[1])
end
if counts[2] + counts[3] > 0 then
  redis.call('HINCRBY', KEYS[3], 'dead_lettered:' .. ARGV[9], counts[2] + counts[3])
end
return {reply[1], counts[1], counts[2], counts[3]}
