#!/usr/bin/env bash
# The export benchmark of issue 25: one form of 1,000,000 submissions,
# exported whole by the example server as JSON Lines and as CSV, gzip off
# and on, over SQLite and PostgreSQL. Not part of `go test` or CI.
#
#   flock /tmp/loadrun.lock bash bench/export.sh        # about 10 minutes; PostgreSQL at $PG
#   STORES=sqlite FORMATS=jsonl N=100000 bash bench/export.sh   # a short run
#   SEED_DIR=/tmp/x SEED_ONLY=1 bash bench/export.sh             # seed once, keep it...
#   SEED_DIR=/tmp/x bash bench/export.sh                         # ...and measure it on a quiet machine (minutes)
#
# With SEED_DIR the data is kept there between runs (the SQLite file;
# for PostgreSQL its key, the schema being kept too): a run finds it
# there and seeds nothing, so that a measurement that needs a quiet
# machine does not wait for the seed (1,000,000 submissions take 5 to
# 10 minutes over SQLite on a loaded machine). SEED_ONLY=1 seeds and
# stops. Remove the directory and drop schema formsapi_export when done.
#
# Data: internal/cmd/exportbench seed puts into account bench a form
# "export" of $N submissions (1,000,000) with ten data fields each (a
# sign-up form: name, email, phone, company, role, team size, country,
# newsletter, source, message), an attachment and metadata, about 500
# bytes each as the API sends them (benchdata.WideSubmission); the first
# 10,000 through AddSubmission, the others SQL copies of those rows at the
# next feed positions (see exportbench's doc). SQLite (a file) and
# PostgreSQL (schema formsapi_export) get the same. The copies carry no
# search (q=) index keys: over SQLite a copy keeps only its filters' keys
# in find_keys, over PostgreSQL the copies run with triggers off; an
# export reads no index, and indexing each copy's hundred trigram keys
# made the SQLite seed take most of an hour.
#
# Each row starts a fresh examples/server (-rate-limit 0: an export of a
# million submissions asks the limiter for 10,000 units, and the limiter
# is not what is measured), has `exportbench get` read the whole export
# once, through internal/cmd/cpuwatch, and reports:
#
#   - peak RSS: the server's VmHWM (/proc/PID/status) after the export,
#     and its idle VmHWM before it;
#   - first byte: from the request to the response's first byte (the
#     status line, which the server flushes once the first page is read),
#     and to the first complete line of the file;
#   - total time, bytes on the wire and of the file, lines;
#   - CPU per submission: utime+stime of the server (/proc/PID/stat) and
#     of the PostgreSQL backends serving it (application_name) over the
#     export, divided by $N.
#
# Goals (issue 25): peak RSS at most 64 MB, first byte within 200 ms.
# Everything runs on 127.0.0.1; servers are stopped, the schema dropped
# and the temporary directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
STORES=${STORES:-sqlite pg}
FORMATS=${FORMATS:-jsonl csv}
SEED_DIR=${SEED_DIR:-}
SEED_ONLY=${SEED_ONLY:-0}
source bench/lib.sh
go build -o "$DIR/" ./internal/cmd/exportbench
DATA=$DIR
if [ -n "$SEED_DIR" ]; then mkdir -p "$SEED_DIR" && DATA=$(cd "$SEED_DIR" && pwd); fi
SCHEMA=formsapi_export
APP=formsapi-export-$$
DSN="$PG&application_name=$APP"

echo "main at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with changes)'); load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
echo
ROWS=()
for store in $STORES; do
  if [ "$store" = pg ] && [ -z "$PG" ]; then echo "no PostgreSQL: set PG" >&2; continue; fi
  if [ "$store" = pg ]; then
    if [ -n "$SEED_DIR" ] && [ -s "$DATA/$SCHEMA.key" ]; then
      seeded="seed: kept in schema $SCHEMA"
    else
      psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
      [ -z "$SEED_DIR" ] && SCHEMAS+=("$SCHEMA")
      seeded=$(cd "$DATA" && "$DIR/exportbench" seed -postgres "$PG" -schema "$SCHEMA" -n "$N")
    fi
    key=$(cat "$DATA/$SCHEMA.key")
    flags=(-postgres "$DSN" -schema "$SCHEMA")
  else
    if [ -n "$SEED_DIR" ] && [ -s "$DATA/export.db.key" ]; then
      seeded="seed: kept in $DATA/export.db"
    else
      rm -f "$DATA"/export.db*
      seeded=$(cd "$DATA" && "$DIR/exportbench" seed -db export.db -n "$N")
    fi
    key=$(cat "$DATA/export.db.key")
    flags=(-db "$DATA/export.db")
  fi
  echo "$store $seeded"
  [ "$SEED_ONLY" = 1 ] && continue
  for format in $FORMATS; do
    for gz in off on; do
      start_server "export-$store-$format-$gz" "${flags[@]}" -rate-limit 0
      idle=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
      get=(-url "$url" -key "$key" -path "/v1/forms/export/export?format=$format")
      [ "$gz" = on ] && get+=(-gzip)
      out=$("$DIR/cpuwatch" -pid "$pid" -pg "$PG" -pg-app "$APP" -- "$DIR/exportbench" get "${get[@]}" 2>&1)
      peak=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
      stop_server "$pid"
      g=$(echo "$out" | grep '^get:') || { echo "$out" >&2; exit 1; }
      cpu=$(echo "$out" | grep '^cpuwatch:')
      per_us() { awk -v s="$1" -v n="$N" 'BEGIN { if (s != "" && n > 0) printf "%.2f", 1e6 * s / n; else print "-" }'; }
      ROWS+=("| $store | $format | $gz | $((peak / 1024)) MB | $((idle / 1024)) MB | $(field "$g" first_byte_ms) ms | $(field "$g" first_line_ms) ms | $(field "$g" total_s) s | $(awk -v b="$(field "$g" wire_bytes)" 'BEGIN { printf "%.1f", b / 1e6 }') | $(awk -v b="$(field "$g" bytes)" 'BEGIN { printf "%.1f", b / 1e6 }') | $(field "$g" lines) | $(per_us "$(field "$cpu" "pid:$pid")") µs | $(per_us "$(field "$cpu" pg)") µs |")
    done
  done
done
echo
echo "| store | format | gzip | peak RSS | idle RSS | first byte | first line | total | MB on the wire | MB of file | lines | server CPU per submission | PostgreSQL CPU per submission |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${ROWS[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
