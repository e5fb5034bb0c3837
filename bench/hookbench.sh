#!/usr/bin/env bash
# Webhook delivery throughput and cost (issue 26): internal/cmd/hookbench
# on each store, with and without a black-hole endpoint.
#
#   flock /tmp/loadrun.lock bash bench/hookbench.sh          # about 4 minutes
#   STORES="sqlite postgres" N=5000 bash bench/hookbench.sh
#   STORES=memstore RUNS="paced dead" bash bench/hookbench.sh   # 40 s
#
# hookbench runs, in one process, a store, a writer adding N submissions
# over 20 forms, one webhook.Dispatcher (Run, poll 50 ms) and a receiver
# on loopback that answers 200 at once; with -blackhole one more endpoint
# follows the same forms and accepts connections but never answers (each
# attempt held for the 15 s attempt timeout). For each store in STORES
# (memstore, sqlite: a file in a temporary directory, postgres: a schema
# of its own on $PG, dropped after) it runs:
#
#   - "flood": the writer as fast as it can (-rate 0): events per second
#     delivered (the first arrival of each event, over the time from the
#     first commit to the last arrival) beside the writer's commits per
#     second, the baseline: delivery keeps up when the two are equal;
#   - "paced": the writer at RATE a second (200), without and then with
#     the black hole ("blackhole"): the time from each submission's commit
#     (AddSubmission's return) to its first attempt's arrival, p50, p99
#     and the maximum, the black hole's as a ratio to the run without it;
#   - "dead": paced, beside DEAD (20) endpoints of another account that
#     never answer, each following that account's 20 forms with an event
#     waiting on each (80 attempts wanted at once, held 15 s each): the
#     bench account's lag as in "paced" (RELIABILITY case 106: the dead
#     account holds its share of the 64 slots, 16, not all of them).
#
# RUNS picks the runs (flood paced blackhole dead, all unless set).
#
# Every run is under internal/cmd/cpuwatch: the CPU time (user + system)
# of hookbench's process (store, writer, dispatcher and receivers
# together) and, on PostgreSQL, of the backends serving it
# (application_name hookbench), per delivered event.
set -euo pipefail
cd "$(dirname "$0")/.."
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
STORES=${STORES:-memstore sqlite postgres}
N=${N:-3000}
RATE=${RATE:-200}
DEAD=${DEAD:-20}
RUNS=${RUNS:-flood paced blackhole dead}
DIR=$(mktemp -d /tmp/formsapi-hookbench.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
go build -o "$DIR/" ./internal/cmd/hookbench ./internal/cmd/cpuwatch
echo "hookbench: commit $(git rev-parse --short HEAD), N=$N RATE=$RATE DEAD=$DEAD, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# run STORE ARGS...: one hookbench run under cpuwatch; prints its line
# and cpuwatch's.
run() {
  local store=$1
  shift
  if [ "$store" = postgres ]; then
    "$DIR/cpuwatch" -pg "$PG" -pg-app hookbench -- \
      "$DIR/hookbench" -store postgres -dsn "$PG&application_name=hookbench" -n "$N" "$@"
  else
    "$DIR/cpuwatch" -- "$DIR/hookbench" -store "$store" -n "$N" "$@"
  fi
}

for store in $STORES; do
  for r in $RUNS; do
    case $r in
    flood)
      echo "== $store: flood"
      run "$store" -rate 0 ;;
    paced)
      echo "== $store: paced at $RATE/s"
      run "$store" -rate "$RATE" ;;
    blackhole)
      echo "== $store: paced at $RATE/s, with a black hole"
      run "$store" -rate "$RATE" -blackhole ;;
    dead)
      echo "== $store: paced at $RATE/s, beside $DEAD dead endpoints of another account"
      run "$store" -rate "$RATE" -dead "$DEAD" ;;
    *)
      echo "RUNS: unknown run $r (flood paced blackhole dead)" >&2
      exit 2 ;;
    esac
  done
done
