#!/usr/bin/env bash
# Multi-tenant load run (issue 11): 20 accounts × 10 forms × 500
# submissions, each account with its own key. Three rows in one run, with
# the same wrk settings:
#
#   baseline        benchserver -mode static: a precomputed 100-item page
#   mixed           examples/server over the database (default 12 MiB read
#                   cache), requests from bench/mixed.lua: a random key, one
#                   of its forms, limit 10/25/50/100, random order, and 1 in
#                   20 lists the key's forms
#   mixed+writer    the same while `tenants write`, a second process, adds
#                   a submission to a random form every 2 ms through
#                   sqlitestore, as the collection side would
#
# With PG=DSN (a PostgreSQL URL), two more rows run the same requests and
# writer against examples/server -postgres DSN (pgstore, with its read
# cache), on the same dataset in schema formsapi_mixed. That dataset is
# generated once (2,000 submissions a transaction) with its keys
# in $WORK/mixed-pg.keys, and each run's writer adds to it; remove the
# keys file to start afresh.
#
# Each row prints req/s, p50, p99, the ratio to the baseline and the
# example server's peak RSS so far (VmHWM). A 2 s warm-up of the mixed
# requests comes before the mixed row.
#
#   bash bench/mixed.sh      # DUR=8s CONN=32 THREADS=2 by default
#   PG='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' bash bench/mixed.sh
#
# Each row also prints the CPU time (utime + stime, internal/cmd/cpuwatch)
# per request of the server it measures, and for the pgstore rows of the
# PostgreSQL backends serving it (application_name mixed-<pid>; the
# writer's backends are not counted): a figure a shared, noisy machine
# leaves comparable where req/s is not.
#
# SRC=DIR builds the servers, benchserver and tenants from another tree
# (a git worktree of an older commit, say) while the script, the Lua and
# cpuwatch stay this tree's, so two trees can be run in turn, interleaved:
#
#   git worktree add --detach ../old f092082
#   SRC=../old WORK=/tmp/formsapi-mixed-old PGSCHEMA=formsapi_mixed_old bash bench/mixed.sh
#
# Give each tree its own WORK and PGSCHEMA: its datasets follow its schema,
# and an older server refuses a schema a newer one migrated.
#
# SEARCH_INDEX=0 starts the servers of a tree that has the flag with
# -search-index=false, so their datasets are without the search index
# (examples/server opens with it by default, and the setting persists in
# the database: give SEARCH_INDEX=0 and 1 their own WORK and PGSCHEMA too).
# A tree before the flag serves as it always did (f092082, before the
# filters, has no index at all); SEARCH_INDEX=0 with a tree whose server
# always opens with the index is an error.
#
# The dataset is generated once into $WORK/mixed-pristine-SCHEMA.db and
# copied for each run, so the writer's additions never accumulate. A new
# dataset (SQLite and PostgreSQL) is opened once by the server before any
# measurement, so the demo seed, migrations and, with the search index,
# the indexing of every submission are not in a measured row. GEN_ONLY=1
# does that and exits, so the generation (minutes) can run outside a
# quiet slot:
#
#   GEN_ONLY=1 WORK=... PGSCHEMA=... PG=... nice -n 19 bash bench/mixed.sh
#
# Everything runs on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/wait.sh
source bench/wait.sh
DUR=${DUR:-8s}
CONN=${CONN:-32}
THREADS=${THREADS:-2}
WRITE_EVERY=${WRITE_EVERY:-2ms}
WORK=${WORK:-/tmp/formsapi-mixed}
SERVER_FLAGS=${SERVER_FLAGS:-}
PG=${PG:-}
SRC=${SRC:-$PWD}
PGSCHEMA=${PGSCHEMA:-formsapi_mixed}
APP=mixed-$$
SEARCH_INDEX=${SEARCH_INDEX:-1}
INDEX_FLAG= # -search-index=false for both servers (SERVER_FLAGS is the SQLite one's)
GEN_ONLY=${GEN_ONLY:-0}
if grep -q '"search-index"' "$SRC/examples/server/main.go"; then
  if [ "$SEARCH_INDEX" = 0 ]; then INDEX_FLAG=-search-index=false; fi
elif [ "$SEARCH_INDEX" = 0 ] && grep -q WithSearchIndex "$SRC/examples/server/main.go"; then
  echo "SEARCH_INDEX=0: the server of $SRC has no -search-index flag and always opens with the index" >&2
  exit 1
fi
if ! command -v wrk >/dev/null; then
  apt-get install -y wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
fi

mkdir -p "$WORK/bin"
(cd "$SRC" && go build -o "$WORK/bin/" ./examples/server ./internal/cmd/benchserver ./internal/cmd/tenants)
go build -o "$WORK/bin/" ./internal/cmd/cpuwatch
# Named after the schema, so a new migration makes a new dataset.
PRISTINE="$WORK/mixed-pristine-$(cat "$SRC"/sqlitestore/migrations/*.sql | sha1sum | cut -c1-8).db"
KEYS="$WORK/mixed.keys"
PGKEYS="$WORK/mixed-pg.keys"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
# openonce PORT FLAGS...: start the server once over a new dataset, wait
# until it is ready (building the search index of 100,000 submissions
# takes minutes, which it logs, and the wait follows: bench/wait.sh),
# stop it.
openonce() {
  local port=$1 p
  shift
  # shellcheck disable=SC2086
  "$WORK/bin/server" "$@" -addr "127.0.0.1:$port" -access-log=false $INDEX_FLAG >"$WORK/open-$port.log" 2>"$WORK/open-$port.err" & p=$!
  wait_ready "http://127.0.0.1:$port" "$p" "$WORK/open-$port.log" "$WORK/open-$port.err" ||
    { echo "the server stopped opening the new dataset:" >&2; cat "$WORK/open-$port.err" >&2; exit 1; }
  kill "$p"; wait "$p" || true
}
if [ ! -f "$PRISTINE" ] || [ ! -f "$KEYS" ]; then
  rm -f "$PRISTINE" "$PRISTINE-wal" "$PRISTINE-shm" "$PRISTINE.demo-key" "$KEYS"
  "$WORK/bin/tenants" gen -db "$PRISTINE" -keys "$KEYS" -accounts 20 -forms 10 -per-form 500
  openonce 18194 -db "$PRISTINE"
fi
if [ -n "$PG" ] && [ ! -f "$PGKEYS" ]; then
  "$WORK/bin/tenants" gen -postgres "$PG" -schema "$PGSCHEMA" -keys "$PGKEYS" -accounts 20 -forms 10 -per-form 500
  openonce 18195 -postgres "$PG" -schema "$PGSCHEMA" -demo-key-file "$WORK/mixed-pg.demo-key"
fi
if [ "$GEN_ONLY" = 1 ]; then echo "datasets ready in $WORK${PG:+ and schema $PGSCHEMA}"; exit 0; fi
DB="$WORK/mixed.db"
rm -f "$DB" "$DB-wal" "$DB-shm" "$DB.demo-key"
cp "$PRISTINE" "$DB"
if [ -f "$PRISTINE-wal" ]; then cp "$PRISTINE-wal" "$DB-wal"; fi # not checkpointed: part of the data
"$WORK/bin/benchserver" -mode static -addr 127.0.0.1:18190 >/dev/null & BASELINE=$!; pids+=($BASELINE)
# shellcheck disable=SC2086
"$WORK/bin/server" -db "$DB" -addr 127.0.0.1:18192 -access-log=false -rate-limit 0 $INDEX_FLAG $SERVER_FLAGS >"$WORK/server-18192.log" & SERVER=$!; pids+=($SERVER)
# up PORT PID: waits until the server on PORT is ready, as long as its log
# shows progress (bench/wait.sh); the static baseline has no log.
up() { wait_ready "http://127.0.0.1:$1" "$2" "$WORK/server-$1.log" || { echo "the server on port $1 did not start" >&2; exit 1; }; }
if [ -n "$PG" ]; then
  # shellcheck disable=SC2086
  "$WORK/bin/server" -postgres "$(case $PG in *\?*) echo "$PG&application_name=$APP" ;; *) echo "$PG?application_name=$APP" ;; esac)" -schema "$PGSCHEMA" -addr 127.0.0.1:18193 -access-log=false -rate-limit 0 \
    -demo-key-file "$WORK/mixed-pg.demo-key" $INDEX_FLAG >"$WORK/server-18193.log" & PGSERVER=$!; pids+=($PGSERVER)
  up 18193 "$PGSERVER"
fi
up 18190 "$BASELINE"
up 18192 "$SERVER"
hwm() { awk '/^VmHWM/ {print $2}' "/proc/${1:-$SERVER}/status"; }

# rps NAME PID wrk-args...: one wrk run under cpuwatch; prints "NAME rps
# p50 p99 hwm-KiB cpu-us/req pg-us/req" with the peak RSS of process PID,
# its CPU per request and (pg-* rows) that of PostgreSQL's backends of
# $APP.
rps() {
  local name=$1 pid=$2 out watch=()
  shift 2
  case $name in pg-*) watch=(-pg "$PG" -pg-app "$APP") ;; esac
  out=$("$WORK/bin/cpuwatch" -pid "$pid" "${watch[@]}" -- wrk -t"$THREADS" -c"$CONN" -d"$DUR" --latency "$@")
  if echo "$out" | grep -qE "Non-2xx|Socket errors"; then echo "$name: errors" >&2; echo "$out" >&2; exit 1; fi
  local n cpu line
  line=$(echo "$out" | grep '^cpuwatch:')
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  cpu=$(echo "$line" | tr ' ' '\n' | awk -F= -v p="pid:$pid" '$1 == p {print $2}')
  pgcpu=$(echo "$line" | tr ' ' '\n' | awk -F= '$1 == "pg" {print $2}')
  printf '%s %s %s %s %s %s %s\n' "$name" "$(echo "$out" | awk '/Requests\/sec/ {print $2}')" \
    "$(echo "$out" | awk '$1=="50%" {print $2}')" "$(echo "$out" | awk '$1=="99%" {print $2}')" "$(hwm "$pid")" \
    "$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.1f", 1e6 * c / n }')" \
    "$([ -n "$pgcpu" ] && awk -v c="$pgcpu" -v n="$n" 'BEGIN { printf "%.1f", 1e6 * c / n }' || echo -)"
}
MIXED=(-s bench/mixed.lua http://127.0.0.1:18192 -- "$KEYS")
load=$(cut -d' ' -f1-3 /proc/loadavg)
results=$(
  rps baseline "$BASELINE" -H "Authorization: Bearer bench-key" "http://127.0.0.1:18190/v1/forms/bench-form-000/submissions?limit=100"
  wrk -t"$THREADS" -c"$CONN" -d2s "${MIXED[@]}" >/dev/null # warm-up
  rps mixed "$SERVER" "${MIXED[@]}"
  "$WORK/bin/tenants" write -db "$DB" -keys "$KEYS" -every "$WRITE_EVERY" -duration "$DUR" >&2 &
  rps mixed+writer "$SERVER" "${MIXED[@]}"
  wait
  if [ -n "$PG" ]; then
    PGMIXED=(-s bench/mixed.lua http://127.0.0.1:18193 -- "$PGKEYS")
    wrk -t"$THREADS" -c"$CONN" -d2s "${PGMIXED[@]}" >/dev/null # warm-up
    rps pg-mixed "$PGSERVER" "${PGMIXED[@]}"
    "$WORK/bin/tenants" write -postgres "$PG" -schema "$PGSCHEMA" -keys "$PGKEYS" -every "$WRITE_EVERY" -duration "$DUR" >&2 &
    rps pg-mixed+writer "$PGSERVER" "${PGMIXED[@]}"
    wait
  fi
)
base=$(echo "$results" | awk '$1=="baseline" {print $2}')
mixed=$(echo "$results" | awk '$1=="mixed" {print $2}')
pgmixed=$(echo "$results" | awk '$1=="pg-mixed" {print $2}')
echo
echo "servers of $(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD -- . || echo ' (with changes)') at $(date -u +%FT%TZ)"
echo "wrk -t$THREADS -c$CONN -d$DUR; load average before the run: $load; server flags: ${SERVER_FLAGS:-(none)}; SEARCH_INDEX=$SEARCH_INDEX${INDEX_FLAG:+ ($INDEX_FLAG)}"
[ -n "$PG" ] || echo "(pgstore rows skipped: set PG to a PostgreSQL DSN)"
printf '%-14s %10s %9s %9s %11s %10s %14s %10s %10s %10s\n' target req/s p50 p99 "x baseline" "x mixed" "peak RSS MiB" "cpu us/req" "x baseline" "pg us/req"
basecpu=$(echo "$results" | awk '$1=="baseline" {print $6}')
echo "$results" | while read -r name r p50 p99 kib cpu pgcpu; do
  rss=$(echo "$kib" | awk '{printf "%.1f", $1/1024}')
  ref=$mixed
  case $name in pg-*) ref=$pgmixed ;; esac
  printf '%-14s %10.0f %9s %9s %10.1f%% %9.1f%% %14s %10s %10.2f %10s\n' "$name" "$r" "$p50" "$p99" \
    "$(echo "$r $base" | awk '{print 100*$1/$2}')" "$(echo "$r $ref" | awk '{print 100*$1/$2}')" "$rss" \
    "$cpu" "$(echo "$cpu $basecpu" | awk '{print $1/$2}')" "$pgcpu"
done
