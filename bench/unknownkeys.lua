-- wrk script of the unknown-key flood (bench/keyflood.sh; issue 15): every
-- request carries a fresh random key in the format of formsapi.NewKey,
-- "fapi_" + 32 base62 characters + 6 base62 characters of the CRC32-IEEE
-- of those 32, so it passes the handler's checksum check and costs a key
-- lookup, as a flood from someone who read auth.go would.
--
--   wrk -t2 -c512 -d20s -s bench/unknownkeys.lua 'http://127.0.0.1:8080/v1/forms'
--
-- With "-- bad-checksum" after the URL, every key has a wrong checksum
-- instead: the control, refused before any lookup.
--
-- Every answer should be 401 (or 503 when a request waited past the
-- server's store timeout for a lookup slot); after wrk's summary the
-- script prints "status 401: N" for each status.

local bit = require("bit")
local base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
local chars = {}
for i = 1, 62 do
  chars[i - 1] = string.sub(base62, i, i)
end

local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit.band(c, 1) == 1 then
      c = bit.bxor(bit.rshift(c, 1), 0xEDB88320)
    else
      c = bit.rshift(c, 1)
    end
  end
  crc_table[i] = c
end

local function crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do
    c = bit.bxor(bit.rshift(c, 8), crc_table[bit.band(bit.bxor(c, string.byte(s, i)), 0xFF)])
  end
  c = bit.bnot(c)
  -- LuaJIT's bit operations give signed 32-bit results.
  if c < 0 then
    c = c + 4294967296
  end
  return c
end

local function newkey()
  local r = {}
  for i = 1, 32 do
    r[i] = chars[math.random(0, 61)]
  end
  local random = table.concat(r)
  local sum = crc32(random)
  local d = {}
  for i = 6, 1, -1 do
    d[i] = chars[sum % 62]
    sum = math.floor(sum / 62)
  end
  return "fapi_" .. random .. table.concat(d)
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

function init(args)
  counts = {}
  math.randomseed(os.time() * 1000 + (id or 0) * 7919 + math.floor(os.clock() * 1e6))
  bad = args[1] == "bad-checksum"
  if args[1] == "print" then
    io.write(newkey() .. "\n")
  end
end

function request()
  local key = newkey()
  if bad then
    -- the control: the same key with its last checksum character changed,
    -- which the handler refuses before any lookup
    key = string.sub(key, 1, -2) .. (string.sub(key, -1) == "0" and "1" or "0")
  end
  return wrk.format("GET", nil, { Authorization = "Bearer " .. key })
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total, keys = {}, {}
  for _, t in ipairs(threads) do
    for s, n in pairs(t:get("counts")) do
      if not total[s] then
        table.insert(keys, s)
      end
      total[s] = (total[s] or 0) + n
    end
  end
  table.sort(keys)
  for _, s in ipairs(keys) do
    io.write(string.format("status %d: %d\n", s, total[s]))
  end
end
