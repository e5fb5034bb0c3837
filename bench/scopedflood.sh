#!/usr/bin/env bash
# Scoped-key flood across two nodes (issue 15, finding 4): a scoped key
# (an integration) that floods must not starve its account's other keys,
# even when it floods another node.
#
#   bash bench/scopedflood.sh        # D=20s (about 40 s); needs PostgreSQL at $PG
#
# Two examples/server processes ("node A" and "node B") serve one
# PostgreSQL schema (formsapi_scoped) with -rate-limit 60 -rate-window 1m:
# the account's budget is 60 a minute, and a scoped key's own ceiling half
# of it (-rate-limit-key 0), all kept in PostgreSQL by pgstore's rate
# limiter, which the example server uses over PostgreSQL. Account demo
# has its full key (the demo key) and a scoped key for form contact,
# issued with `server -new-key demo -key-forms contact`. The scoped key
# floods node A (wrk -t2 -c8 through bench/statuses.lua, which counts
# statuses and keeps the RateLimit field of the first and last answer of
# each); from 2 s in, the full key asks node B for a page once a second
# for D (internal/cmd/probe). Every one of its answers must be 200.
# CPU per request of node A and of the PostgreSQL backends serving both
# nodes (application_name of this run) comes from internal/cmd/cpuwatch.
#
# Everything runs on 127.0.0.1; servers are stopped, the schema dropped and
# the temporary directory removed on exit. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
source bench/lib.sh
[ -n "$PG" ] || { echo "scopedflood.sh needs PostgreSQL: set PG to its DSN" >&2; exit 1; }
SCHEMA=formsapi_scoped
APP=formsapi-scoped-$$
secs=${D%s}
PAGE=/v1/forms/contact/submissions?limit=10
psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
SCHEMAS+=("$SCHEMA")
DSN="$PG&application_name=$APP"
FLAGS=(-postgres "$DSN" -schema "$SCHEMA" -demo-key-file demo.key -rate-limit 60 -rate-window 1m)

start_server nodeA "${FLAGS[@]}"
A=$url A_PID=$pid
start_server nodeB "${FLAGS[@]}"
B=$url B_PID=$pid
SCOPED=$(cd "$DIR" && ./server -postgres "$DSN" -schema "$SCHEMA" -new-key demo -key-forms contact | tail -1)
FULL=$(cat "$DIR/demo.key")
echo "node A $A (pid $A_PID), node B $B (pid $B_PID); scoped key for form contact issued"
echo "scoped key, one request: $(curl -s -o /dev/null -D - -H "Authorization: Bearer $SCOPED" "$A$PAGE" | tr -d '\r' | grep -iE '^(HTTP|ratelimit)' | tr '\n' ' ')"

load=$(cut -d' ' -f1-3 /proc/loadavg)
"$DIR/cpuwatch" -pid "$A_PID,$B_PID" -pg "$PG" -pg-app "$APP" -- \
  wrk -t2 -c8 -d$((secs + 4))s -s "$LUA/statuses.lua" -H "Authorization: Bearer $SCOPED" "$A$PAGE" >"$DIR/flood.out" 2>&1 &
flood=$!
sleep 2
probe=$("$DIR/probe" -url "$B$PAGE" -key "$FULL" -rate 1 -d "$D")
wait $flood || true

echo
echo "load average before: $load"
echo "scoped key flooding node A (wrk -t2 -c8 -d$((secs + 4))s):"
grep -E "requests in|Requests/sec|Latency|^status|Socket|cpuwatch" "$DIR/flood.out"
echo "full key on node B, 1 request a second for $D:"
echo "$probe"
line=$(grep '^cpuwatch:' "$DIR/flood.out")
n=$(requests "$(cat "$DIR/flood.out")")
echo "CPU per flood request: node A $(per "$(field "$line" "pid:$A_PID")" "$n") ms, node B $(per "$(field "$line" "pid:$B_PID")" "$n") ms, PostgreSQL backends $(per "$(field "$line" pg)" "$n") ms ($(field "$line" pgpids) backends), wrk $(per "$(field "$line" client)" "$n") ms"
echo "warnings and errors logged: node A: $(grep -cE '"level":"(WARN|ERROR)"' "$DIR/nodeA.log" || true), node B: $(grep -cE '"level":"(WARN|ERROR)"' "$DIR/nodeB.log" || true)"
# Failure lines are throttled to one a second per kind, each carrying
# how many it stands for beyond itself ("suppressed").
grep -hE '"level":"(WARN|ERROR)"' "$DIR/nodeA.log" "$DIR/nodeB.log" |
  sed 's/.*"msg":"\([^"]*\)".*"suppressed":\([0-9]*\).*/\2 \1/; s/.*"msg":"\([^"]*\)".*/0 \1/' |
  awk '{n = $1; $1 = ""; c[$0] += n + 1} END {for (m in c) printf "  %d times:%s\n", c[m], m}' || true
echo "the scoped key's own ceiling: 30 a minute in bursts of 30, so about $((29 + (secs + 4) / 2)) answers of 200 over the flood's $((secs + 4)) s (29 left after the request above, one more every 2 s), more by as many as the limiter failed and the request was served"
statuses=$(field "$probe" statuses)
if [[ $statuses =~ ^200:[0-9]+$ ]]; then
  echo "ok: every request of the full key got 200 ($statuses)"
else
  echo "FAIL: the full key got $statuses (want only 200)"
  exit 1
fi
