#!/usr/bin/env bash
# Unknown-key flood (issue 15, finding 3): "Under a flood of well-formed
# unknown keys (512 connections), a real user's median latency stays
# within 3x of its unloaded value."
#
#   bash bench/keyflood.sh                  # SQLite and PostgreSQL, D=20s RATE=5 (about 4 min)
#   PG= bash bench/keyflood.sh              # SQLite only
#   PERF=1 bash bench/keyflood.sh           # and where the server's CPU goes in the flood (perf record)
#
# For each store a fresh examples/server (its defaults: demo data, rate
# limit 600 a minute per account) serves the demo account. The real user
# is internal/cmd/probe: one keep-alive connection asking for
# /v1/forms/contact/submissions?limit=10 with the demo key RATE times a
# second, recording each latency. It runs for 3 s to warm up (the
# handler's key gate then knows the key), for D unloaded, and for D again
# while `wrk -t2 -c512 -s bench/unknownkeys.lua` sends GET /v1/forms with a
# fresh random key in the format of formsapi.NewKey on every request
# (valid checksum, so each one costs the handler a key lookup, gated by
# authorize.go's keyGate). Then the control: the same flood with keys
# whose checksum is wrong, which the handler refuses before any lookup,
# so that what the lookups cost can be told from what serving 512
# connections of 401s costs. Each flood runs under internal/cmd/cpuwatch:
# the server's CPU per flood request, and over PostgreSQL that of the
# backends serving it (application_name of this run, from
# pg_stat_activity). Everything shares the machine's cores: wrk, the
# server, PostgreSQL and the probe.
#
# Everything runs on 127.0.0.1; servers are stopped, the schema
# formsapi_keyflood dropped and the temporary directory removed on exit.
# Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-20s}
RATE=${RATE:-5}
CONN=${CONN:-512}
source bench/lib.sh
SCHEMA=formsapi_keyflood
APP=formsapi-keyflood-$$
PROBE_PATH=/v1/forms/contact/submissions?limit=10
secs=${D%s}

load=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
stores=(sqlite)
[ -n "$PG" ] && stores+=(pg)
for store in "${stores[@]}"; do
  if [ "$store" = pg ]; then
    psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
    SCHEMAS+=("$SCHEMA")
    start_server pg -postgres "$PG&application_name=$APP" -schema "$SCHEMA" -demo-key-file pg.demo-key
    keyfile=$DIR/pg.demo-key
    watch=(-pg "$PG" -pg-app "$APP")
  else
    start_server sqlite -db forms.db
    keyfile=$DIR/forms.db.demo-key
    watch=()
  fi
  echo "--- $store"
  "$DIR/probe" -url "$url$PROBE_PATH" -keyfile "$keyfile" -rate "$RATE" -d 3s >/dev/null
  idle=$("$DIR/probe" -url "$url$PROBE_PATH" -keyfile "$keyfile" -rate "$RATE" -d "$D")
  echo "unloaded: $idle"
  for kind in unknown bad-checksum; do
    "$DIR/cpuwatch" -pid "$pid" "${watch[@]}" -- \
      wrk -t2 -c"$CONN" -d$((secs + 5))s -s "$LUA/unknownkeys.lua" "$url/v1/forms" -- $kind >"$DIR/flood.out" 2>&1 &
    flood=$!
    sleep 2
    if [ "${PERF:-}" = 1 ] && [ $kind = unknown ]; then
      perf record -F 499 -g -p "$pid" -o "$DIR/perf-$store.data" -- sleep "$secs" >/dev/null 2>&1 &
      perfpid=$!
    fi
    busy=$("$DIR/probe" -url "$url$PROBE_PATH" -keyfile "$keyfile" -rate "$RATE" -d "$D")
    echo "$kind-key flood: $busy"
    wait $flood || true
    if [ "${PERF:-}" = 1 ] && [ $kind = unknown ]; then
      wait "$perfpid" || true
      echo "perf, share of the server's CPU samples under each (children included):"
      perf report -i "$DIR/perf-$store.data" --children --sort symbol --stdio -g none 2>/dev/null |
        grep -E '\] (net/http\.\(\*conn\)\.serve|net/http\.\(\*conn\)\.readRequest|net/http\.\(\*response\)\.finishRequest|github\.com/formsapi/formsapi\.\(\*api\)\.authorize|runtime\.gcBgMarkWorker|runtime\.schedule) ' |
        awk '{print "  " $1, $4}'
    fi
    grep -E "requests in|Requests/sec|Latency|^status|Socket|cpuwatch" "$DIR/flood.out"
    line=$(grep '^cpuwatch:' "$DIR/flood.out")
    n=$(requests "$(cat "$DIR/flood.out")")
    i50=$(field "$idle" p50); b50=$(field "$busy" p50)
    i99=$(field "$idle" p99); b99=$(field "$busy" p99)
    pgms=-
    [ "$store" = pg ] && pgms=$(per "$(field "$line" pg)" "$n")
    rows+=("$store $kind ${i50%ms} ${b50%ms} $(ratio "${b50%ms}" "${i50%ms}") ${i99%ms} ${b99%ms} $n $(per "$(field "$line" "pid:$pid")" "$n") $pgms $(per "$(field "$line" client)" "$n") $(field "$busy" statuses)")
  done
  stop_server "$pid"
done

echo
echo "probe: 1 connection, $RATE req/s for $D each; flood: wrk -t2 -c$CONN, a fresh well-formed unknown key per request; load average before: $load"
printf '%-7s %-13s %11s %11s %10s %11s %11s %9s %14s %11s %11s %s\n' store flood "p50 idle" "p50 flood" "x idle" "p99 idle" "p99 flood" "flood n" "server ms/req" "pg ms/req" "wrk ms/req" "probe statuses"
for r in "${rows[@]}"; do
  printf '%-7s %-13s %9sms %9sms %10s %9sms %9sms %9s %14s %11s %11s %s\n' $r
done
