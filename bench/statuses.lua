-- wrk script that counts the statuses of the answers and keeps the
-- RateLimit header field of the first and the last answer of each status
-- (bench/conditional.sh, bench/scopedflood.sh; issue 15). Headers come
-- from wrk's -H, the path from its URL:
--
--   wrk -t2 -c32 -d10s -s bench/statuses.lua -H 'Authorization: Bearer KEY' -H 'If-None-Match: *' URL
--
-- After wrk's own summary it prints one line per status,
--
--   status 304: 600 (first RateLimit: "default";r=599;t=0, last: ...)
--
-- and "statuses total N". (Counting in Lua costs wrk some CPU of its own;
-- the server's CPU per request is measured outside wrk.)

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
  first = {}
  last = {}
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
  local rl
  for k, v in pairs(headers) do
    if string.lower(k) == "ratelimit" then
      rl = v
    end
  end
  if rl then
    if not first[status] then
      first[status] = rl
    end
    last[status] = rl
  end
end

function done(summary, latency, requests)
  local total, first_rl, last_rl = {}, {}, {}
  for _, t in ipairs(threads) do
    for s, n in pairs(t:get("counts")) do
      total[s] = (total[s] or 0) + n
    end
    for s, v in pairs(t:get("first")) do
      first_rl[s] = first_rl[s] or v
    end
    for s, v in pairs(t:get("last")) do
      last_rl[s] = v
    end
  end
  local keys, all = {}, 0
  for s, n in pairs(total) do
    table.insert(keys, s)
    all = all + n
  end
  table.sort(keys)
  for _, s in ipairs(keys) do
    io.write(string.format("status %d: %d (first RateLimit: %s, last: %s)\n", s, total[s],
      first_rl[s] and string.format("%q", first_rl[s]) or "none", last_rl[s] and string.format("%q", last_rl[s]) or "none"))
  end
  io.write(string.format("statuses total %d\n", all))
end
