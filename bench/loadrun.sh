#!/usr/bin/env bash
# Loopback load run: the static-bytes baseline, the handler over memstore,
# and the example server over SQLite (first page, 99%-deep pages in both
# orders, since/until windows, the forms list) with its read cache on and
# with it off (-cache-mib 0), and once more with a writer committing every
# 2 ms; then the example server over PostgreSQL (pgstore, with its read cache) on the
# same data and the same targets; one after the other with the same wrk
# settings, then single-client latency, the example servers' memory, and
# how the CPU was shared between PostgreSQL, the API server and the rest
# (wrk, and whatever else runs on the machine) during the first-page runs.
# Prints every figure with its ratio to the baseline.
#
#   apt-get install wrk        # once; wrk is Debian's package
#   bash bench/loadrun.sh      # DUR=10s CONN=32 THREADS=2 by default
#
# PostgreSQL: FORMSAPI_BENCH_POSTGRES (else FORMSAPI_TEST_POSTGRES, else
# postgres://postgres@127.0.0.1:5432/test?sslmode=disable) names the
# server; the data goes to schema formsapi_bench, loaded once with
# synchronous_commit=off for that session only (drop the schema to reload).
#
# Everything runs on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/wait.sh
source bench/wait.sh
DUR=${DUR:-10s}
CONN=${CONN:-32}
THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/formsapi-load}
KEY=bench-key
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }

mkdir -p "$WORK/bin"
go build -o "$WORK/bin/" ./examples/server ./internal/cmd/benchserver ./internal/cmd/gendata ./internal/cmd/soak
DB="$WORK/bench.db"
if [ ! -f "$DB" ]; then
  "$WORK/bin/gendata" -db "$DB" -big 100000 -forms 10 -per-form 1000 -key "$KEY"
fi
PG=${FORMSAPI_BENCH_POSTGRES:-${FORMSAPI_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
PGSCHEMA=formsapi_bench
case "$PG" in *\?*) PGQ="$PG&" ;; *) PGQ="$PG?" ;; esac
PGLOAD="${PGQ}synchronous_commit=off"
PGAPP=formsapi_loadrun # the application_name of the PostgreSQL server's sessions
if [ "$(psql "$PG" -Atc "SELECT count(*) FROM pg_namespace WHERE nspname = '$PGSCHEMA'")" = 0 ]; then
  "$WORK/bin/gendata" -postgres "$PGLOAD" -schema "$PGSCHEMA" -big 100000 -forms 10 -per-form 1000 -key "$KEY"
  psql "$PG" -qc "ANALYZE $PGSCHEMA.formsapi_forms, $PGSCHEMA.formsapi_submissions"
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
"$WORK/bin/benchserver" -mode static -addr 127.0.0.1:18090 >/dev/null & pids+=($!)
"$WORK/bin/benchserver" -mode mem -addr 127.0.0.1:18091 >/dev/null & pids+=($!)
"$WORK/bin/server" -db "$DB" -addr 127.0.0.1:18092 -access-log=false -rate-limit 0 >"$WORK/server-18092.log" & SERVER=$!; pids+=($SERVER)
# up PORT PID: waits until the server on PORT is ready, as long as its log
# shows progress (bench/wait.sh); the benchservers have no log.
up() { wait_ready "http://127.0.0.1:$1" "$2" "$WORK/server-$1.log" || { echo "the server on port $1 did not start" >&2; exit 1; }; }
up 18092 "$SERVER" # seeded the demo account before the second server opens the file
"$WORK/bin/server" -db "$DB" -addr 127.0.0.1:18094 -access-log=false -rate-limit 0 -cache-mib 0 >"$WORK/server-18094.log" & NOCACHE=$!; pids+=($NOCACHE)
FORMSAPI_POSTGRES="${PGQ}application_name=$PGAPP" "$WORK/bin/server" -schema "$PGSCHEMA" -demo-key-file "$WORK/pg.demo-key" \
  -addr 127.0.0.1:18096 -access-log=false -rate-limit 0 >"$WORK/server-18096.log" & PGSERVER=$!; pids+=($PGSERVER)
up 18090 "${pids[0]}"
up 18091 "${pids[1]}"
up 18094 "$NOCACHE"
up 18096 "$PGSERVER"

SUB=/v1/forms/bench-form-000/submissions
# deep ORDER BASE: the cursor that starts 99% into the big form, found by
# walking it the way a client would.
deep() {
  local order=$1 base=$2 cursor="" n=0
  while [ $n -lt 99 ]; do
    cursor=$(curl -sf -H "Authorization: Bearer $KEY" "$base$SUB?limit=1000&order=$order${cursor:+&cursor=$cursor}" |
      sed -n 's/.*"nextCursor":"\([^"]*\)".*/\1/p')
    n=$((n + 1))
  done
  echo "$cursor"
}
S=http://127.0.0.1:18092 # the example server, read cache on (the default)
U=http://127.0.0.1:18094 # the same, with -cache-mib 0: every request queries SQLite
DEEP_DESC=$(deep desc $S)
DEEP_ASC=$(deep asc $S)
UDEEP_DESC=$(deep desc $U)
UDEEP_ASC=$(deep asc $U)
P=http://127.0.0.1:18096 # the example server over PostgreSQL: every request looks its key up there
PDEEP_DESC=$(deep desc $P)
PDEEP_ASC=$(deep asc $P)

# CPU accounting, in clock ticks: the whole machine (busy and all), every
# postgres process, and one process.
ticks_machine() { awk '/^cpu / {b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat; }
ticks_pid() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# The backends serving the example server: other clients of the same
# PostgreSQL (tests running meanwhile, say) are not counted.
ticks_postgres() {
  local t=0
  for p in $(psql "$PG" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$PGAPP'"); do
    t=$((t + $(ticks_pid "$p")))
  done
  echo $t
}
# cpu NAME PID CMD...: runs CMD and appends to $WORK/cpu.txt the shares of
# the machine's cores that the example server's PostgreSQL backends,
# process PID and everything else used meanwhile, and how much stayed
# idle. The pool keeps its connections through a run, so the same
# backends are measured before and after.
cpu() {
  local name=$1 pid=$2; shift 2
  read -r b0 a0 < <(ticks_machine); local g0 s0; g0=$(ticks_postgres); s0=$(ticks_pid "$pid")
  "$@"
  read -r b1 a1 < <(ticks_machine); local g1 s1; g1=$(ticks_postgres); s1=$(ticks_pid "$pid")
  echo "$name $(( a1 - a0 )) $(( b1 - b0 )) $(( g1 - g0 )) $(( s1 - s0 ))" >>"$WORK/cpu.txt"
}
: >"$WORK/cpu.txt"
WINDOW="since=2024-01-01T12:00:00Z&until=2024-01-01T14:00:00Z"

# rps NAME URL: a wrk run; prints "NAME rps p50 p99".
rps() {
  local out
  out=$(wrk -t"$THREADS" -c"$CONN" -d"$DUR" --latency -H "Authorization: Bearer $KEY" "$2")
  if echo "$out" | grep -q "Non-2xx"; then echo "$1: non-2xx answers" >&2; echo "$out" >&2; exit 1; fi
  printf '%s %s %s %s\n' "$1" "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1=="50%" {print $2}')" "$(echo "$out" | awk '$1=="99%" {print $2}')"
}
results=$(
  rps baseline-static          "http://127.0.0.1:18090$SUB?limit=100"
  rps memstore-first-page      "http://127.0.0.1:18091$SUB?limit=100"
  cpu sqlite-first-page "$SERVER" rps sqlite-first-page "$S$SUB?limit=100"
  rps sqlite-deep-99pct-desc   "$S$SUB?limit=100&cursor=$DEEP_DESC"
  rps sqlite-deep-99pct-asc    "$S$SUB?limit=100&order=asc&cursor=$DEEP_ASC"
  rps sqlite-window-desc       "$S$SUB?limit=100&$WINDOW"
  rps sqlite-window-asc        "$S$SUB?limit=100&order=asc&$WINDOW"
  rps sqlite-forms-list        "$S/v1/forms"
  rps nocache-first-page       "$U$SUB?limit=100"
  rps nocache-deep-99pct-desc  "$U$SUB?limit=100&cursor=$UDEEP_DESC"
  rps nocache-deep-99pct-asc   "$U$SUB?limit=100&order=asc&cursor=$UDEEP_ASC"
  rps nocache-window-desc      "$U$SUB?limit=100&$WINDOW"
  rps nocache-window-asc       "$U$SUB?limit=100&order=asc&$WINDOW"
  cpu pg-first-page "$PGSERVER" rps pg-first-page "$P$SUB?limit=100"
  rps pg-deep-99pct-desc       "$P$SUB?limit=100&cursor=$PDEEP_DESC"
  rps pg-deep-99pct-asc        "$P$SUB?limit=100&order=asc&cursor=$PDEEP_ASC"
  rps pg-window-desc           "$P$SUB?limit=100&$WINDOW"
  rps pg-window-asc            "$P$SUB?limit=100&order=asc&$WINDOW"
  rps pg-forms-list            "$P/v1/forms"
  # A writer in another process commits every 2 ms, each commit emptying
  # the cache of the server with the cache on.
  "$WORK/bin/soak" -clients 0 -duration "$DUR" -db "$DB" -write-every 2ms >&2 &
  rps sqlite-first-with-writer "$S$SUB?limit=100"
  wait
)
base=$(echo "$results" | awk '$1=="baseline-static" {print $2}')
echo
echo "wrk -t$THREADS -c$CONN -d$DUR, 100-item pages ($(curl -s -H "Authorization: Bearer $KEY" "$S$SUB?limit=100" | wc -c) bytes)"
printf '%-26s %10s %9s %9s %11s %16s\n' target req/s p50 p99 "x baseline" "x own 1st page"
echo "$results" | while read -r name r p50 p99; do
  # Each store's rows against its own first page: sqlite-*, nocache-*, pg-*.
  first=$(echo "$results" | awk -v p="${name%%-*}-first-page" '$1==p {print $2}')
  printf '%-26s %10.0f %9s %9s %10.1f%% %15s\n' "$name" "$r" "$p50" "$p99" \
    "$(echo "$r $base" | awk '{print 100*$1/$2}')" "$(if [ -n "$first" ]; then echo "$r $first" | awk '{printf "%.1f%%", 100*$1/$2}'; else echo -; fi)"
done

echo
echo "single client (wrk -t1 -c1 -d5s):"
for target in "baseline-static http://127.0.0.1:18090$SUB?limit=100" "sqlite-first-page $S$SUB?limit=100" \
  "sqlite-deep-99pct-desc $S$SUB?limit=100&cursor=$DEEP_DESC" "nocache-first-page $U$SUB?limit=100" \
  "nocache-deep-99pct-desc $U$SUB?limit=100&cursor=$UDEEP_DESC" "pg-first-page $P$SUB?limit=100" \
  "pg-deep-99pct-desc $P$SUB?limit=100&cursor=$PDEEP_DESC" "pg-forms-list $P/v1/forms"; do
  set -- $target
  printf '  %-26s p50 %s\n' "$1" "$(wrk -t1 -c1 -d5s --latency -H "Authorization: Bearer $KEY" "$2" | awk '$1=="50%" {print $2}')"
done

rss() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER/status"; }
before=$(rss)
wrk -t"$THREADS" -c"$CONN" -d"$DUR" -H "Authorization: Bearer $KEY" "$S$SUB?limit=100" >/dev/null
after=$(rss)
echo
echo "example server memory: peak RSS $(awk '/^VmHWM/ {print $2}' /proc/$SERVER/status) KiB;" \
  "RSS before one more run $before KiB, after $after KiB"
echo "PostgreSQL example server memory: peak RSS $(awk '/^VmHWM/ {print $2}' /proc/$PGSERVER/status) KiB"

echo
echo "CPU during the c$CONN first-page runs, as shares of all $(nproc) cores (100% = every core busy):"
printf '  %-20s %11s %11s %11s %11s\n' run "PG backends" "API server" "the rest" idle
while read -r name all busy pg srv; do
  printf '  %-20s %10.1f%% %10.1f%% %10.1f%% %10.1f%%\n' "$name" \
    "$(echo "$pg $all" | awk '{print 100*$1/$2}')" "$(echo "$srv $all" | awk '{print 100*$1/$2}')" \
    "$(echo "$busy $pg $srv $all" | awk '{print 100*($1-$2-$3)/$4}')" "$(echo "$busy $all" | awk '{print 100*($2-$1)/$2}')"
done <"$WORK/cpu.txt"
echo "load average before the run: $LOAD0; after: $(cut -d' ' -f1-3 /proc/loadavg)"
