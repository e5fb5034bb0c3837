#!/usr/bin/env bash
# Filters on submitted fields and totals at 1,000,000 submissions (issue
# 27): not part of `go test` or CI. Run it on a quiet machine (nothing
# else running; on a shared one, other heavy runs held off, say, under
# `flock /tmp/loadrun.lock`):
#
#   bash bench/find.sh                                  # N=1000000, SQLite and PostgreSQL at $PG
#   N=100000 STORES=sqlite bash bench/find.sh
#
# internal/cmd/findbench fills one form of N submissions (once: the SQLite
# file /tmp/formsapi-findq-$N.db and the PostgreSQL schema
# formsapi_findq_$N are kept for the next run; delete them to fill again),
# each with a unique email (a filter matching one), a plan "gold" for 1 in
# 100 (1%), a flag true for every other one (50%), a name "Zoë Ünal" for
# 1 in 10,000 (a rare search term) and a message (common terms), in bulk, with the
# JSON and index keys the store's AddSubmission writes, the search index
# on (about 100 trigram entries a submission: SQLite puts them in in the
# index's order after the rows, PostgreSQL inserts them without
# formsapi_find's primary key and builds it after; findbench's tests check
# that a bulk fill leaves what AddSubmission leaves). SEED_ONLY=1 fills
# and measures nothing: fill at low priority beside other work, measure
# on a quiet machine,
#
#   SEED_ONLY=1 STORES=sqlite nice -n 19 bash bench/find.sh
#   STORES=sqlite bash bench/find.sh
#
# The fill at N=1000000 (at low priority, beside other work): SQLite 14 min
# 22 s (8 min of it the trigram entries), PostgreSQL 7 min 1 s (5 min 10 s
# of it the index's entries and primary key). Then, through the handler in process, for each filter and
# search (q: rare, rare of common trigrams, common, none): the
# median time of the first page (limit=100, newest first) and of a page
# 90% into the range, its items and the index entries it examined, and
# the time and answer of total=exact and total=estimate; then the form's
# summary (issue 39), whole and filtered, read afresh (a new handler each
# time) and kept (the same handler, the form unchanged), with the kinds
# of its figures. Goals (issue 27):
# a page for a filter matching nothing or one submission within 50 ms on
# both stores; a search page with a rare term within 100 ms.
#
# The write cost of the index, per submission, with against without it,
# is bench/writecost.sh's measure: WRITECOST=1 runs it too, against BASE
# (default f092082, main before the filters: 4e48d45^). STORES= (empty)
# runs nothing else:
#
#   STORES= WRITECOST=1 flock /tmp/loadrun.lock bash bench/find.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
STORES=${STORES-sqlite pg}
FILL=()
[ -z "${SEED_ONLY:-}" ] || FILL=(-fill-only)
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
go build -o /tmp/formsapi-findbench ./internal/cmd/findbench
echo "tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with changes)'), N=$N, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
for s in $STORES; do
  case $s in
  sqlite)
    echo; echo "== SQLite (/tmp/formsapi-findq-$N.db)"
    /tmp/formsapi-findbench -db "/tmp/formsapi-findq-$N.db" -n "$N" ${FILL[@]+"${FILL[@]}"} 2> >(grep -v '^[0-9]*$' >&2)
    ;;
  pg)
    [ -n "$PG" ] || continue
    echo; echo "== PostgreSQL (schema formsapi_findq_$N)"
    /tmp/formsapi-findbench -postgres "$PG" -schema "formsapi_findq_$N" -n "$N" ${FILL[@]+"${FILL[@]}"} 2> >(grep -v '^[0-9]*$' >&2)
    ;;
  esac
done
if [ -n "${WRITECOST:-}" ]; then
  echo; echo "== write cost per submission, this tree against ${BASE:-f092082} (bench/writecost.sh)"
  bash bench/writecost.sh "${BASE:-f092082}"
fi
