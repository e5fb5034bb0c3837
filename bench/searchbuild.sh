#!/usr/bin/env bash
# Building pgstore's search index over stored rows (issue 37): the
# duration, rate and PostgreSQL CPU of the step "build the search index"
# of `examples/server -migrate -search-index=true` over a schema of
# 20 accounts x 10 forms x PER_FORM submissions written with the index
# off (`internal/cmd/tenants gen`, bench/fleet.sh's dataset), on this
# tree and on BASE (a commit, default main), each tree's schema made by
# its own tenants. Not part of `go test` or CI.
#
#   bash bench/searchbuild.sh                  # 20,000 submissions (PER_FORM=100); PostgreSQL at $PG
#   PER_FORM=500 bash bench/searchbuild.sh 8a1a608
#
# Per tree it drops and generates schema formsapi_searchbuild_{base,new},
# runs the migration with application_name set, samples utime+stime of
# that application's backends (/proc/PID/stat, PostgreSQL on this
# machine) every 0.5 s until the server exits, and prints the step's last
# progress line, the wall time of the migration and the backends' CPU
# seconds (the last sample: up to 0.5 s short). SKIP_BASE=1 runs this tree
# alone. The schemas are dropped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-main}
PER_FORM=${PER_FORM:-100}
PG=${PG:-${FORMSAPI_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
NAME=searchbuild
EXTRA="; $((20 * 10 * PER_FORM)) submissions"
# shellcheck source=bench/basetree.sh
source bench/basetree.sh
trees=(new)
[ -z "${SKIP_BASE:-}" ] && trees=(base new)
for t in "${trees[@]}"; do
  src=$NEW
  [ "$t" = base ] && src=$OLD
  mkdir -p "$DIR/$t"
  (cd "$src" && go build -o "$DIR/$t/" ./examples/server ./internal/cmd/tenants)
done
sep='?'
case $PG in *\?*) sep='&' ;; esac
tck=$(getconf CLK_TCK)
for t in "${trees[@]}"; do
  schema=formsapi_searchbuild_$t app=searchbuild_${t}_$$
  psql "$PG" -qc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE"
  "$DIR/$t/tenants" gen -postgres "$PG" -schema "$schema" -keys "$DIR/$t/keys" -accounts 20 -forms 10 -per-form "$PER_FORM" >/dev/null 2>"$DIR/$t/gen.err" || { cat "$DIR/$t/gen.err" >&2; exit 1; }
  t0=$(date +%s.%N)
  "$DIR/$t/server" -postgres "$PG${sep}application_name=$app" -schema "$schema" -search-index=true -migrate >"$DIR/$t/log" 2>&1 &
  srv=$!
  declare -A cpu=()
  while kill -0 "$srv" 2>/dev/null; do
    for p in $(psql "$PG" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$app'"); do
      c=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) && cpu[$p]=$c
    done
    sleep 0.5
  done
  wait "$srv" || { cat "$DIR/$t/log" >&2; exit 1; }
  t1=$(date +%s.%N)
  ticks=0
  for p in "${!cpu[@]}"; do ticks=$((ticks + cpu[$p])); done
  unset cpu
  echo "$t: $(grep '"step":"build the search index"' "$DIR/$t/log" | tail -1)"
  awk -v t="$t" -v w="$(echo "$t1 - $t0" | bc)" -v c="$ticks" -v tck="$tck" -v n="$((20 * 10 * PER_FORM))" \
    'BEGIN { printf "%s: migration %.1f s wall, PostgreSQL backend CPU %.1f s (%.2f ms a submission)\n", t, w, c / tck, c * 1000 / tck / n }'
  psql "$PG" -qc "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
