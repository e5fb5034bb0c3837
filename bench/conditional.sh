#!/usr/bin/env bash
# Conditional-request flood (issue 15, finding 2): "A flood of conditional
# requests (If-None-Match: * or the current tag) from one key costs the
# server at most a tenth of the CPU per request of full page reads, or is
# limited like any request."
#
#   bash bench/conditional.sh            # DUR=10s CONN=16 (about 1.5 min)
#   PERF=1 bash bench/conditional.sh     # and where the server's CPU goes in each run (perf record)
#
# Data: internal/cmd/gendata's realistic submissions, one form of 2,000
# (bench-form-000, key bench-key) in a SQLite file; every request asks for
# its first page with limit=1000 (about 470 KB). Each part starts a fresh
# examples/server over a copy of that file and runs wrk -t2 -c$CONN for
# $DUR through bench/statuses.lua, which counts the statuses, under
# internal/cmd/cpuwatch, which takes the server's CPU time (utime + stime
# from /proc/PID/stat) over the run:
#
#   (a) -rate-limit 600 (600 a minute, bursts of 600): one key sends
#       If-None-Match: * as fast as it can. Expect about 600 + 10/s × DUR
#       answers of 304 and every other one 429.
#   (b) -rate-limit 0: full page reads, then the same requests with
#       If-None-Match naming the page's current tag, then with
#       If-None-Match: *; with the default 12 MiB read cache and again
#       with -cache-mib 0 (every request reads SQLite). CPU per request
#       of each, and the conditional ones as a fraction of the full reads.
#
# Everything runs on 127.0.0.1; servers are stopped and the temporary
# directory removed on exit. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
CONN=${CONN:-16}
PG= # SQLite only
source bench/lib.sh

"$DIR/gendata" -db "$DIR/pristine.db" -big 2000 -forms 0 -key bench-key >/dev/null
PATH_Q=/v1/forms/bench-form-000/submissions?limit=1000
AUTH="Authorization: Bearer bench-key"

# What PERF=1 reports: the key lookup, the rate limiter, reading the page
# (from the read cache or SQLite), reading SQLite, the page's tag, sending
# the body, the rest of net/http's work, and the garbage collector.
PERF_FUNCS="github.com/formsapi/formsapi.(*api).authorize github.com/formsapi/formsapi.(*api).rateLimit
github.com/formsapi/formsapi/sqlitestore.(*Store).appendSubmissions github.com/formsapi/formsapi/sqlitestore.(*Store).readEncoded
github.com/formsapi/formsapi.(*api).pageTag github.com/formsapi/formsapi.writePage github.com/formsapi/formsapi.writeError
net/http.(*conn).readRequest net/http.(*response).finishRequest runtime.gcBgMarkWorker runtime.memmove"

# run NAME PID wrk-args...: wrk under cpuwatch; prints its output and
# records "NAME requests server-seconds client-seconds" in $DIR/rows.
run() {
  local name=$1 p=$2 out
  shift 2
  if [ "${PERF:-}" = 1 ]; then
    perf record -F 499 -g -p "$p" -o "$DIR/perf.data" -- sleep "${DUR%s}" >/dev/null 2>&1 &
    perfpid=$!
  fi
  out=$("$DIR/cpuwatch" -pid "$p" -- wrk -t2 -c"$CONN" -d"$DUR" -s "$LUA/statuses.lua" "$@")
  echo "--- $name"
  echo "$out" | grep -E "requests in|Requests/sec|Latency|^status|cpuwatch"
  if [ "${PERF:-}" = 1 ]; then
    wait "$perfpid" || true
    echo "perf, share of the server's CPU samples under each (children included):"
    perf report -i "$DIR/perf.data" --children --sort symbol --stdio -g none 2>/dev/null | awk -v want="$PERF_FUNCS" '
      BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
      $3 == "[.]" && ($4 in keep) { print "  " $1, $4 }' 
  fi
  local line n
  line=$(echo "$out" | grep '^cpuwatch:')
  n=$(requests "$out")
  echo "$name $n $(field "$line" "pid:$p") $(field "$line" client)" >>"$DIR/rows"
}
fresh() { rm -f "$DIR/forms.db"*; cp "$DIR/pristine.db" "$DIR/forms.db"; }

load=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$DIR/rows"
# (a) the flood against the default rate limit
fresh
start_server limited -db forms.db -rate-limit 600 -rate-window 1m
run "a: If-None-Match: *, -rate-limit 600" "$pid" -H "$AUTH" -H "If-None-Match: *" "$url$PATH_Q"
stop_server "$pid"

# (b) no rate limit: what each kind of request costs
for cache in 12 0; do
  fresh
  start_server "open$cache" -db forms.db -rate-limit 0 -cache-mib "$cache"
  tag=$(curl -s -o /dev/null -D - -H "$AUTH" "$url$PATH_Q" | tr -d '\r' | sed -n 's/^[Ee][Tt]ag: //p')
  bytes=$(curl -s -H "$AUTH" "$url$PATH_Q" | wc -c)
  echo "cache $cache MiB: page of $bytes bytes, tag $tag"
  run "b: full page, cache $cache MiB" "$pid" -H "$AUTH" "$url$PATH_Q"
  run "b: If-None-Match: current tag, cache $cache MiB" "$pid" -H "$AUTH" -H "If-None-Match: $tag" "$url$PATH_Q"
  run "b: If-None-Match: *, cache $cache MiB" "$pid" -H "$AUTH" -H "If-None-Match: *" "$url$PATH_Q"
  stop_server "$pid"
done

echo
echo "wrk -t2 -c$CONN -d$DUR; load average before: $load; server CPU = utime+stime of examples/server over each run"
printf '%-48s %9s %12s %14s %14s %14s\n' run requests "server CPU s" "server ms/req" "x full page" "wrk ms/req"
full=
while read -r line; do
  name=${line% * * *}
  set -- ${line##"$name"}
  ms=$(per "$2" "$1")
  case $name in *"full page"*) full=$ms ;; esac
  x=-
  case $name in b:*) x=$(ratio "$ms" "$full") ;; esac
  printf '%-48s %9s %12s %14s %14s %14s\n' "$name" "$1" "$2" "$ms" "$x" "$(per "$3" "$1")"
done <"$DIR/rows"
