-- wrk script of the multi-tenant load run (bench/mixed.sh):
--
--   wrk -t2 -c32 -d8s -s bench/mixed.lua http://127.0.0.1:18192 -- KEYS_FILE
--
-- KEYS_FILE has one line per account: its API key, then its form IDs
-- (internal/cmd/tenants gen writes it). Each request takes a random
-- account's key; 1 in 20 lists its forms, the others ask for one of its
-- forms' submissions with a random limit (10, 25, 50 or 100) and a random
-- order. Every thread draws its own random sequence.

local accounts = {}
local limits = { "10", "25", "50", "100" }
local orders = { "asc", "desc" }
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  local path = args[1]
  if not path then
    error("mixed.lua: pass the keys file after --")
  end
  for line in io.lines(path) do
    local a = { forms = {} }
    for word in line:gmatch("%S+") do
      if not a.headers then
        a.headers = { Authorization = "Bearer " .. word }
      else
        a.forms[#a.forms + 1] = "/v1/forms/" .. word .. "/submissions?limit="
      end
    end
    if a.headers and #a.forms > 0 then
      accounts[#accounts + 1] = a
    end
  end
  if #accounts == 0 then
    error("mixed.lua: " .. path .. " lists no account with forms")
  end
  math.randomseed(os.time() * 1000 + (id or 0))
end

function request()
  local a = accounts[math.random(#accounts)]
  if math.random(20) == 1 then
    return wrk.format("GET", "/v1/forms", a.headers)
  end
  local path = a.forms[math.random(#a.forms)] .. limits[math.random(4)] .. "&order=" .. orders[math.random(2)]
  return wrk.format("GET", path, a.headers)
end
