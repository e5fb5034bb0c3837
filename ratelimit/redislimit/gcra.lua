-- GCRA for one request of one bucket, or a charge of units. KEYS[1]: the
-- bucket. ARGV[1]: the interval, ARGV[2]: the burst (interval times
-- quota), ARGV[3]: 0 for a request, or for a charge (ratelimit.Charger)
-- the units' time, taken whatever is left; all in microseconds. Returns
-- {allowed (1 or 0), the theoretical arrival time after the decision,
-- now}, in microseconds since the Unix epoch. A refusal writes nothing.
-- Redis runs the script alone, so concurrent decisions for one bucket
-- happen one after another.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local charge = tonumber(ARGV[3])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then
    return redis.error_reply('ERR the bucket holds no time')
  end
  if tat < now then
    tat = now
  end
end
local nexttat = tat + interval
if charge > 0 then
  nexttat = tat + charge
elseif nexttat - now > burst then
  return {0, tat, now}
end
-- The key lives until the quota is full again, rounded up to a
-- millisecond: past that, no key is the same as this one.
redis.call('SET', KEYS[1], string.format('%d', nexttat), 'PX', math.ceil((nexttat - now) / 1000))
return {1, nexttat, now}
