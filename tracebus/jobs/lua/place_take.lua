-- place_take.lua: take, keep or wait for one of a pool's places (a lease with an expiry),
-- under the pool's tag. Places are few (a source's session cap), so every call scans them.
--
-- KEYS[1] held      zset holder -> lease expiry ms (the places in use)
-- KEYS[2] waiting   zset holder -> wait ticket expiry ms (refreshed by every poll)
-- KEYS[3] info      hash holder -> "<group>\t<first asked ms>" of every holder and waiter, and
--                   "~capacity" -> the capacity the last caller asked with (what readers show)
-- ARGV[1] holder    the caller's token (unique per attempt at a place)
-- ARGV[2] group     fairness group (a job id): the waiter whose group holds fewest places goes first
-- ARGV[3] lease_ms  a lease or ticket not renewed for this long is dropped (its holder died)
-- ARGV[4] capacity  places of the pool
-- ARGV[5] key_ttl_ms  every key of the pool expires this long after its last write
-- ARGV[6] renew     1: the caller holds a place and renews it (0: it asks for one)
-- Returns {granted (1 | 0 | -1 lease lost), places in use, waiting}.
-- Time is the server's (hosts' clocks may differ).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local capacity = tonumber(ARGV[4])
local holder, group = ARGV[1], ARGV[2]

local function purge(key)
  local dead = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. now)
  for _, h in ipairs(dead) do
    redis.call('ZREM', key, h)
    redis.call('HDEL', KEYS[3], h)
  end
end
purge(KEYS[1])
purge(KEYS[2])

local function finish(granted)
  redis.call('HSET', KEYS[3], '~capacity', capacity)
  for i = 1, 3 do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      redis.call('PEXPIRE', KEYS[i], ARGV[5])
    end
  end
  return {granted, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2])}
end

local held = redis.call('ZCARD', KEYS[1])
if redis.call('ZSCORE', KEYS[1], holder) then
  redis.call('ZADD', KEYS[1], now + lease, holder)
  return finish(1)
end
if ARGV[6] == '1' then
  -- The lease ran out (the holder was frozen past it): take the place back only if one is free.
  if held < capacity then
    redis.call('ZADD', KEYS[1], now + lease, holder)
    redis.call('HSET', KEYS[3], holder, group .. '\t' .. now)
    return finish(1)
  end
  redis.call('HDEL', KEYS[3], holder)
  return finish(-1)
end

local mine = redis.call('HGET', KEYS[3], holder)
local asked = now
if mine then
  asked = tonumber(string.match(mine, '\t(%d+)$'))
else
  redis.call('HSET', KEYS[3], holder, group .. '\t' .. now)
end
redis.call('ZADD', KEYS[2], now + lease, holder)
local free = capacity - held
if free <= 0 then
  return finish(0)
end

local per_group = {}
for _, h in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local g = string.match(redis.call('HGET', KEYS[3], h) or '', '^(.*)\t') or ''
  per_group[g] = (per_group[g] or 0) + 1
end
local my_held = per_group[group] or 0
local ahead = 0
for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if w ~= holder then
    local g, t = string.match(redis.call('HGET', KEYS[3], w) or '', '^(.*)\t(%d+)$')
    if g then
      local n, at = per_group[g] or 0, tonumber(t)
      if n < my_held or (n == my_held and (at < asked or (at == asked and w < holder))) then
        ahead = ahead + 1
      end
    end
  end
end
if ahead >= free then
  return finish(0)
end
redis.call('ZREM', KEYS[2], holder)
redis.call('ZADD', KEYS[1], now + lease, holder)
return finish(1)
