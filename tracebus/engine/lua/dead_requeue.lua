-- dead_requeue.lua: send one dead-lettered message back to its work stream, at most once.
--
-- The caller read the dead record (XRANGE) and passes the payload to enqueue (its retry
-- count reset). Deleting the record and adding the entry happen in one script, and only
-- when the record still exists: two operators requeueing the same id cannot run it twice.
-- The new entry starts with a fresh delivery count (no `d` field).
--
-- KEYS[1] dead        dead-letter stream (P:q:{<queue>}:dead)
-- KEYS[2] stream      the work stream    (P:q:{<queue>})
-- ARGV[1] dead_id     id of the record in the dead stream
-- ARGV[2] payload     encoded message to enqueue (field `m`)
-- ARGV[3] max         per-message max deliveries (field `x`), or '' for the default
-- Returns the new entry id, or false when the record is gone (already requeued or purged).
if redis.call('XDEL', KEYS[1], ARGV[1]) == 0 then
  return false
end
if ARGV[3] == '' then
  return redis.call('XADD', KEYS[2], '*', 'm', ARGV[2])
end
return redis.call('XADD', KEYS[2], '*', 'm', ARGV[2], 'x', ARGV[3])
