#!/usr/bin/env bash
# The slow-reader attack of issue 24: one key opens connections that send
# a GET of a large page and then read nothing, and the server's peak
# resident memory (VmHWM) is what counts. Not part of `go test` or CI.
#
#   flock /tmp/loadrun.lock bash bench/slowreaders.sh      # about 8 minutes; needs PostgreSQL at $PG
#   STORES=sqlite CONNS=64 BEFORE=0 READERS=0 bash bench/slowreaders.sh   # a short run
#   PATHS="export exportcsv" READERS=0 bash bench/slowreaders.sh          # the export alone
#
# Data: internal/cmd/slowreaders seed puts into account demo the largest
# data the default write limits accept: form big with 40 submissions of
# just under 2 MiB each as the API sends them (1 MiB of data and
# attachments whose strings are sent escaped), and 3,000 forms of about
# 3.6 KB, with a full key and a key scoped to 1,000 of the forms. SQLite
# (a file) and PostgreSQL (schema formsapi_slow) get the same.
#
# Each row starts a fresh examples/server (-rate-limit 0: the limiter is
# not what is measured; -metrics-addr, for its goroutines), has
# `slowreaders stall` open C connections, each
# with a 4 KiB receive buffer, send one GET and read nothing for $HOLD
# (9 s), and reports the server's VmHWM then (peak RSS) and once every
# connection was read (all read: a stream goes on as its client reads),
# its goroutines (go_goroutines of its metrics) before and at the end of
# the hold,
# and what each connection got once it read: 200 (cut: the server closed
# it mid-body; late: still coming 30 s later, the client gave up), 503
# (no room for the page), 429 (past the key's 32 requests in flight) or
# no answer. Paths: the list (limit=1000), the feed (sync=start&limit=1000)
# with the full key, the forms list (limit=1000) with the scoped key
# (which makes the handler read the store's pages of 1,000 forms whole),
# and the export of form big as JSON Lines (export) and as CSV
# (exportcsv) with the full key: a stream of about 80 MB that the server
# writes in chunks as the client reads. $PATHS chooses among them (all
# five by default).
# C is each of $CONNS (64 and 200). With BEFORE=1 (the default) each
# path is also run at 64 connections with the bounds of issue 24 off
# (-bytes-in-flight-mib -1 -stall-timeout -1ns), as the server was
# before: the baseline of the same run.
#
# With READERS=1 (the default), readers that read: `slowreaders read`,
# 8 clients walking the list (and the forms list with the scoped key)
# for $D (10 s), with the bounds and without them, through
# internal/cmd/cpuwatch for the CPU time of the server and of the
# PostgreSQL backends serving this run (application_name) per request.
#
# Everything runs on 127.0.0.1; servers are stopped, the schema dropped
# and the temporary directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
HOLD=${HOLD:-9s}
D=${D:-10s}
CONNS=${CONNS:-64 200}
STORES=${STORES:-sqlite pg}
BEFORE=${BEFORE:-1}
READERS=${READERS:-1}
PATHS=${PATHS:-list feed forms export exportcsv}
source bench/lib.sh
go build -o "$DIR/" ./internal/cmd/slowreaders
SCHEMA=formsapi_slow
APP=formsapi-slow-$$
DSN="$PG&application_name=$APP"
OFF=(-bytes-in-flight-mib -1 -stall-timeout -1ns)

LIST='/v1/forms/big/submissions?limit=1000'
FEED='/v1/forms/big/submissions?sync=start&limit=1000'
FORMS='/v1/forms?limit=1000'
EXPORT='/v1/forms/big/export'
EXPORTCSV='/v1/forms/big/export?format=csv'

# store_flags STORE: the example server's flags for STORE.
store_flags() {
  if [ "$1" = pg ]; then echo -postgres "$DSN" -schema "$SCHEMA"; else echo -db "$DIR/slow.db"; fi
}

seed() { # STORE
  if [ "$1" = pg ]; then
    psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
    SCHEMAS+=("$SCHEMA")
    (cd "$DIR" && ./slowreaders seed -postgres "$DSN" -schema "$SCHEMA")
    FULL=$(cat "$DIR/$SCHEMA.key") SCOPED=$(cat "$DIR/$SCHEMA.scoped-key")
  else
    (cd "$DIR" && ./slowreaders seed -db slow.db)
    FULL=$(cat "$DIR/slow.db.key") SCOPED=$(cat "$DIR/slow.db.scoped-key")
  fi
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo
echo "| store | path | bounds | connections | idle RSS | peak RSS | peak RSS, all read | goroutines, idle → held | 200 (cut, late) | 503 | 429 | no answer |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for store in $STORES; do
  if [ "$store" = pg ] && [ -z "$PG" ]; then echo "no PostgreSQL: set PG" >&2; continue; fi
  seed "$store" >"$DIR/seed.out"
  for path in $PATHS; do
    case $path in
      list) target=$LIST key=$FULL ;;
      feed) target=$FEED key=$FULL ;;
      forms) target=$FORMS key=$SCOPED ;;
      export) target=$EXPORT key=$FULL ;;
      exportcsv) target=$EXPORTCSV key=$FULL ;;
      *) echo "unknown path $path: list, feed, forms, export or exportcsv" >&2; exit 1 ;;
    esac
    runs=()
    [ "$BEFORE" = 1 ] && runs+=("off 64")
    for c in $CONNS; do runs+=("on $c"); done
    for run in "${runs[@]}"; do
      set -- $run
      flags=($(store_flags "$store") -rate-limit 0 -metrics-addr 127.0.0.1:0)
      [ "$1" = off ] && flags+=("${OFF[@]}")
      start_server "slow-$store-$path" "${flags[@]}"
      idle=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
      metrics=
      for _ in $(seq 50); do
        metrics=$(grep -oh 'http://[0-9.:]*/metrics' "$DIR/slow-$store-$path.log" "$DIR/slow-$store-$path.err" 2>/dev/null | head -1 || true)
        [ -n "$metrics" ] && break
        sleep 0.1
      done
      line=$("$DIR/slowreaders" stall -url "$url" -path "$target" -key "$key" -c "$2" -hold "$HOLD" -pid "$pid" -metrics "$metrics")
      stop_server "$pid"
      bounds=$([ "$1" = on ] && echo "issue 24" || echo "off (before)")
      echo "| $store | $path | $bounds | $2 | $((idle / 1024)) MB | $(($(field "$line" peak_kb) / 1024)) MB | $(($(field "$line" end_peak_kb) / 1024)) MB | $(field "$line" goroutines_idle) → $(field "$line" goroutines) | $(field "$line" 200) ($(field "$line" cut), $(field "$line" late)) | $(field "$line" 503) | $(field "$line" 429) | $(field "$line" none) |"
    done
  done
  if [ "$READERS" = 1 ]; then
    for path in $PATHS; do
      case $path in
        feed | export | exportcsv) continue ;; # readers walk pages
        list) target=$LIST key=$FULL ;;
        forms) target=$FORMS key=$SCOPED ;;
      esac
      for bounds in on off; do
        flags=($(store_flags "$store") -rate-limit 0)
        [ "$bounds" = off ] && flags+=("${OFF[@]}")
        start_server "read-$store-$path" "${flags[@]}"
        out=$("$DIR/cpuwatch" -pid "$pid" -pg "$PG" -pg-app "$APP" -- "$DIR/slowreaders" read -url "$url" -path "$target" -key "$key" -c 8 -d "$D" 2>&1)
        peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
        stop_server "$pid"
        r=$(echo "$out" | grep '^read:')
        cpu=$(echo "$out" | grep '^cpuwatch:')
        n=$(field "$r" requests)
        READ_ROWS+=("| $store | $path | $bounds | $(field "$r" rps) | $n | $(field "$r" MiB) | $(per "$(field "$cpu" "pid:$pid")" "$n") ms | $(per "$(field "$cpu" pg)" "$n") ms | $((peak / 1024)) MB | $(field "$r" statuses) |")
        [ "$bounds" = on ] && RPS_ON=$(field "$r" rps) || echo "readers $store $path: throughput with the bounds / without: $(ratio "$RPS_ON" "$(field "$r" rps)")" >>"$DIR/ratios"
      done
    done
  fi
done
if [ "$READERS" = 1 ]; then
  echo
  echo "Readers that read: 8 clients for $D"
  echo
  echo "| store | path | bounds | requests/s | requests | MiB read | server CPU per request | PostgreSQL CPU per request | peak RSS | statuses |"
  echo "|---|---|---|---:|---:|---:|---:|---:|---:|---|"
  printf '%s\n' "${READ_ROWS[@]}"
  echo
  cat "$DIR/ratios"
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
