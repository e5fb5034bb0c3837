-- wrk script of the fleet run (bench/fleet.sh): bench/mixed.lua's
-- requests, spread over several API nodes.
--
--   FLEET_NODES="127.0.0.1:8081 127.0.0.1:8082" \
--     wrk -t2 -c32 -d8s -s bench/fleet.lua http://127.0.0.1:8081 -- KEYS_FILE
--
-- FLEET_NODES lists the nodes as host:port, separated by spaces; wrk's
-- thread i sends all its connections to node i modulo their number (a
-- thread's connections share its address), so give wrk a multiple of the
-- nodes' count in threads for an even spread. Without FLEET_NODES every
-- thread uses the URL's address, as mixed.lua does. Everything else (the
-- keys file, the random key, form, limit and order, 1 in 20 listing the
-- forms) is mixed.lua's, loaded from beside this file.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "mixed.lua")

local nodes = {}
for hostport in (os.getenv("FLEET_NODES") or ""):gmatch("%S+") do
  local host, port = hostport:match("^(.*):(%d+)$")
  if not host then
    error("fleet.lua: FLEET_NODES: want host:port, got " .. hostport)
  end
  local addrs = wrk.lookup(host, port)
  if not addrs or #addrs == 0 then
    error("fleet.lua: cannot resolve " .. hostport)
  end
  nodes[#nodes + 1] = addrs[1]
end

local mixedSetup = setup
local assigned = 0

function setup(thread)
  mixedSetup(thread)
  if #nodes > 0 then
    thread.addr = nodes[assigned % #nodes + 1]
    assigned = assigned + 1
  end
end
