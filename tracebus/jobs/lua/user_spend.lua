-- user_spend.lua: charge bytes stored in Redis to a user's budget (TRACE_USER_MAX_BYTES), or
-- refuse them, under the user's tag.
--
-- Each owner (a job, or an answer kept for the user) has its bytes and the time they expire;
-- owners past it are forgotten first, so what is counted is what the user's keys may still
-- hold. The bytes themselves are written by the caller, after this, under other tags.
--
-- KEYS[1] spent        hash: owner -> bytes, and "#total" their sum (so a charge costs the owners
--                      that expired, not every owner)
-- KEYS[2] spent_until  zset: owner -> expiry (unix ms)
-- ARGV[1] owner
-- ARGV[2] bytes        to charge (0: only read what is spent)
-- ARGV[3] expires_ms   when the owner's bytes expire (an owner keeps its latest expiry)
-- ARGV[4] now_ms
-- ARGV[5] max_bytes    0: no budget (charged, never refused)
-- ARGV[6] mode         "add": the bytes are new | "keep": they are all the owner holds (charged
--                      once: only what passes the owner's current bytes is new)
-- Returns {1 charged | 0 refused, bytes spent after, the earliest expiry of what is counted
-- (unix ms, 0: nothing)}.
local now, TOTAL = tonumber(ARGV[4]), '#total'
while true do
  local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 500)
  if #gone == 0 then
    break
  end
  local freed = 0
  for _, v in ipairs(redis.call('HMGET', KEYS[1], unpack(gone))) do
    freed = freed + (tonumber(v) or 0)
  end
  redis.call('ZREM', KEYS[2], unpack(gone))
  redis.call('HDEL', KEYS[1], unpack(gone))
  if freed > 0 then
    redis.call('HINCRBY', KEYS[1], TOTAL, -freed)
  end
end
local spent = tonumber(redis.call('HGET', KEYS[1], TOTAL)) or 0
local bytes, limit = tonumber(ARGV[2]), tonumber(ARGV[5])
if ARGV[6] == 'keep' then
  bytes = bytes - (tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0)
  if bytes <= 0 then
    redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[1])
    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
    redis.call('PEXPIREAT', KEYS[1], last[2])
    redis.call('PEXPIREAT', KEYS[2], last[2])
    bytes = 0
  end
end
local function earliest()
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return tonumber(first[2]) or 0
end
if bytes <= 0 then
  return {1, spent, earliest()}
end
if limit > 0 and spent + bytes > limit then
  return {0, spent, earliest()}
end
redis.call('HINCRBY', KEYS[1], ARGV[1], bytes)
redis.call('HINCRBY', KEYS[1], TOTAL, bytes)
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[1])
local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return {1, spent + bytes, earliest()}
