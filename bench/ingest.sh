#!/usr/bin/env bash
# Bulk ingest through formsapi.BatchWriter (issue 37): N submissions
# (default 1,000,000, benchdata's, over 10 forms) into a fresh SQLite file
# and a fresh PostgreSQL schema at $PG, BATCH a transaction (2,000),
# with progress every 100,000, then a check of what the indexes answer
# (internal/cmd/ingestbench). SINGLE submissions are written one
# AddSubmission at a time first, into a form of their own, as the same
# run's baseline. Each run goes under internal/cmd/cpuwatch, which adds
# the CPU of the PostgreSQL backends the run used (pg=, seconds). Not part
# of `go test` or CI.
#
#   bash bench/ingest.sh                                  # both stores, search index off
#   INDEX=1 N=100000 STORES=sqlite bash bench/ingest.sh   # with the search index on
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
BATCH=${BATCH:-2000}
SINGLE=${SINGLE:-2000}
STORES=${STORES:-sqlite postgres}
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
DIR=$(mktemp -d /tmp/formsapi-ingest.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
go build -o "$DIR/" ./internal/cmd/ingestbench ./internal/cmd/cpuwatch
flags=(-n "$N" -batch "$BATCH" -single "$SINGLE")
[ -n "${INDEX:-}" ] && flags+=(-search-index)
echo "this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with changes)'); $(nproc) CPUs"
for s in $STORES; do
  case $s in
  sqlite) "$DIR/cpuwatch" -- "$DIR/ingestbench" -store sqlite -db "$DIR/ingest.db" "${flags[@]}" ;;
  postgres) "$DIR/cpuwatch" -pg "$PG" -pg-app formsapi-ingest -- "$DIR/ingestbench" -store postgres -postgres "$PG" "${flags[@]}" ;;
  *) echo "unknown store $s" >&2; exit 2 ;;
  esac
  [ "$s" = sqlite ] && ls -l "$DIR/ingest.db" | awk '{printf "database file: %.0f MB\n", $5/1e6}' && rm -f "$DIR"/ingest.db*
done
