#!/usr/bin/env bash
# One key floods its own rate limit (issue 24, "a flood defeats its own
# rate limit"): with 4,000 connections of one key and a quota of 60 a
# minute, the node must serve no more 200s than the limit allows (the
# burst of 60 and one a second: about 70 in 10 s, ±5%) with each limiter,
# failing open, and another account's median latency on the same node
# must stay within 5 times its unloaded value. Then refused keys: the
# rate at which the node answers 401s to 4,000 connections of unknown
# keys, and what a key the node has not seen yet waits meanwhile.
#
#   bash bench/limiterflood.sh                       # memory, Redis, PostgreSQL; D=10s (about 2 min)
#   LIMITERS="memory redis" bash bench/limiterflood.sh
#   CONN=2000 D=20s bash bench/limiterflood.sh
#
# For each limiter a fresh examples/server serves the demo data with
# -rate-limit 60 -rate-window 1m, failing open (its default): "memory"
# over SQLite (ratelimit.Memory), "redis" over SQLite with -redis
# $REDIS (redislimit, a key prefix of this run's own), "postgres" over
# PostgreSQL at $PG (pgstore's RateLimiter, schema
# formsapi_limiterflood). A second account, "other", gets a key of its
# own (`server -new-key other`). Its light client is internal/cmd/probe:
# one keep-alive connection asking for GET /v1/forms RATE times a second (2: within its own
# quota of 60 a minute over the run),
# 3 s to warm up, D unloaded, then D again while
# `wrk -t2 -cCONN -dD -s bench/statuses.lua` floods
# GET /v1/forms/contact/submissions?limit=10 with the demo key. The flood
# starts with the demo account's bucket full, so the limit allows 60 +
# D/1s answers of 200. The flood runs under internal/cmd/cpuwatch: CPU per
# request of the server, of PostgreSQL's backends serving this run
# (application_name) and of Redis (used_cpu_sys + used_cpu_user of INFO,
# the whole server).
#
# Last, over the memory limiter's server: `wrk -cCONN -dD -s
# bench/unknownkeys.lua` (a fresh well-formed unknown key per request)
# while five keys the node has never seen (issued before) each make one
# request, one a second; the 401s a second of the flood, and each fresh
# key's latency.
#
# wrk, the servers, Redis, PostgreSQL and the probe share the machine's
# cores. The file-descriptor limit must allow CONN connections on both
# ends (ulimit -n is raised to 3*CONN+1000 if it is lower and the hard
# limit allows). Everything runs on 127.0.0.1; servers are stopped, the
# schema dropped, the Redis keys deleted and the temporary directory
# removed on exit. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-10s}
RATE=${RATE:-2}
CONN=${CONN:-4000}
LIMITERS=${LIMITERS:-memory redis postgres}
REDIS=${REDIS:-redis://127.0.0.1:6379/0}
REDIS_HOSTPORT=${REDIS_HOSTPORT:-127.0.0.1 6379}
source bench/lib.sh
secs=${D%s}
want_fd=$((3 * CONN + 1000))
if [ "$(ulimit -n)" -lt "$want_fd" ]; then
  ulimit -n "$want_fd" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
[ "$(ulimit -n)" -ge $((CONN + 100)) ] || { echo "ulimit -n is $(ulimit -n): too low for $CONN connections" >&2; exit 1; }
SCHEMA=formsapi_limiterflood
APP=formsapi-limiterflood-$$
PREFIX=formsapi:limiterflood:$$:
PAGE=/v1/forms/contact/submissions?limit=10
redis_cli() { redis-cli -h ${REDIS_HOSTPORT% *} -p ${REDIS_HOSTPORT#* } "$@"; }
redis_cpu() { redis_cli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.3f", s}'; }
cleanup_redis() { redis_cli --scan --pattern "$PREFIX*" 2>/dev/null | xargs -r redis_cli DEL >/dev/null 2>&1 || true; }
trap 'cleanup_redis; bench_cleanup' EXIT

load=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for lim in $LIMITERS; do
  watch=()
  case $lim in
  memory)
    flags=(-db forms.db) keyflags=(-db forms.db) keyfile=$DIR/forms.db.demo-key ;;
  redis)
    rm -f "$DIR"/forms.db*
    flags=(-db forms.db -redis "$REDIS" -redis-prefix "$PREFIX") keyflags=(-db forms.db) keyfile=$DIR/forms.db.demo-key ;;
  postgres)
    psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
    SCHEMAS+=("$SCHEMA")
    flags=(-postgres "$PG&application_name=$APP" -schema "$SCHEMA" -demo-key-file pg.demo-key)
    keyflags=(-postgres "$PG" -schema "$SCHEMA") keyfile=$DIR/pg.demo-key
    watch=(-pg "$PG" -pg-app "$APP") ;;
  *) echo "unknown limiter $lim (want memory, redis or postgres)" >&2; exit 1 ;;
  esac
  start_server "$lim" "${flags[@]}" -rate-limit 60 -rate-window 1m
  other=$(cd "$DIR" && ./server "${keyflags[@]}" -new-key other | tail -1)
  echo "--- $lim"
  "$DIR/probe" -url "$url/v1/forms" -key "$other" -rate "$RATE" -d 3s >/dev/null
  idle=$("$DIR/probe" -url "$url/v1/forms" -key "$other" -rate "$RATE" -d "$D")
  echo "other account, unloaded: $idle"
  r0=$(redis_cpu)
  "$DIR/cpuwatch" -pid "$pid" "${watch[@]}" -- \
    wrk -t2 -c"$CONN" -d"$D" -s "$LUA/statuses.lua" -H "Authorization: Bearer $(cat "$keyfile")" "$url$PAGE" >"$DIR/flood.out" 2>&1 &
  flood=$!
  busy=$("$DIR/probe" -url "$url/v1/forms" -key "$other" -rate "$RATE" -d "$D")
  wait $flood || true
  r1=$(redis_cpu)
  echo "other account, in the flood: $busy"
  grep -E "requests in|Requests/sec|Latency|^status|Socket|cpuwatch" "$DIR/flood.out"
  line=$(grep '^cpuwatch:' "$DIR/flood.out")
  n=$(requests "$(cat "$DIR/flood.out")")
  ok=$(sed -n 's/^status 200: \([0-9]*\).*/\1/p' "$DIR/flood.out")
  i50=$(field "$idle" p50) b50=$(field "$busy" p50)
  pgms=- rdms=-
  [ "$lim" = postgres ] && pgms=$(per "$(field "$line" pg)" "$n")
  [ "$lim" = redis ] && rdms=$(per "$(awk -v a="$r0" -v b="$r1" 'BEGIN {print b - a}')" "$n")
  rows+=("$lim ${ok:-0} $((60 + secs)) $n ${i50%ms} ${b50%ms} $(ratio "${b50%ms}" "${i50%ms}") $(per "$(field "$line" "pid:$pid")" "$n") $pgms $rdms $(field "$busy" statuses)")
  errs=$(grep -c '"level":"ERROR"' "$DIR/$lim.log" || true)
  echo "errors logged: $errs"; grep '"level":"ERROR"' "$DIR/$lim.log" | sed 's/.*"msg":"\([^"]*\)".*/  \1/' | sort | uniq -c || true
  if [ "$lim" = memory ]; then
    fresh=()
    for i in 1 2 3 4 5; do fresh+=("$(cd "$DIR" && ./server "${keyflags[@]}" -new-key "fresh$i" | tail -1)"); done
    "$DIR/cpuwatch" -pid "$pid" -- \
      wrk -t2 -c"$CONN" -d"$D" -s "$LUA/unknownkeys.lua" "$url/v1/forms" >"$DIR/keys.out" 2>&1 &
    flood=$!
    sleep 2
    firsts=()
    for k in "${fresh[@]}"; do
      p=$("$DIR/probe" -url "$url/v1/forms" -key "$k" -rate 1 -d 1s)
      firsts+=("$(field "$p" max)/$(field "$p" statuses)")
    done
    wait $flood || true
    echo "unknown-key flood (wrk -t2 -c$CONN -d$D -s bench/unknownkeys.lua):"
    grep -E "requests in|Requests/sec|Latency|^status|Socket|cpuwatch" "$DIR/keys.out"
    u=$(sed -n 's/^status 401: \([0-9]*\).*/\1/p' "$DIR/keys.out")
    echo "401s a second: $(awk -v n="${u:-0}" -v s="$secs" 'BEGIN {printf "%.0f", n / s}'); first request of five keys the node had not seen (latency/status): ${firsts[*]}"
  fi
  stop_server "$pid"
done

echo
echo "flood: wrk -t2 -c$CONN -d$D, one key, quota 60/min (allowed: 60 + ${secs}); other account: probe, 1 connection, $RATE req/s; load average before: $load"
printf '%-9s %6s %8s %9s %11s %11s %8s %14s %10s %13s %s\n' limiter 200s allowed "flood n" "p50 idle" "p50 flood" "x idle" "server ms/req" "pg ms/req" "redis ms/req" "other's statuses"
for r in "${rows[@]}"; do
  printf '%-9s %6s %8s %9s %9sms %9sms %8s %14s %10s %13s %s\n' $r
done
