#!/usr/bin/env bash
# The CPU a write costs sqlitestore's process: bench/writecost.sh's
# BenchmarkAddSubmission, run for a fixed number of writes (N, 3000)
# under /usr/bin/time, its user and system CPU divided by N, on BASE (a
# commit, default ff675d3: main before the index of submitted values)
# and on this tree with the search index off and on, interleaved COUNT
# times (3). writecost.sh's ns/op is wall time, which on a loaded machine
# is mostly waiting for a CPU; this is the work. Each figure includes the
# benchmark's set-up (opening and migrating a file, one form), a few
# hundredths of a second, the same in every run. Not part of `go test`
# or CI.
#
# FTS5=1 adds a fourth run a round: this tree with the search index off
# and SQLite's own FTS5 trigram index of each write's text values kept
# by a trigger (BenchmarkAddSubmission's -bench.fts5), the yardstick of
# issue 37. SORT=1 adds another: this tree with the search index off and
# the sort index on for SORT_FIELDS (default company;
# -bench.sort-index), issue 39's index; EXPR=1 one with the search index
# off and SQLite's own index on the expression of one field instead
# (EXPR_FIELD, default company; -bench.expr-index), the sort index's
# yardstick.
#
#   bash bench/writecpu.sh ff675d3
#   N=5000 COUNT=5 bash bench/writecpu.sh ff675d3
#   FTS5=1 N=5000 COUNT=5 bash bench/writecpu.sh ff675d3
#   SORT=1 N=5000 COUNT=5 bash bench/writecpu.sh ff675d3
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/time ]; then # GNU time, for a process's user and system CPU
  apt-get install -y time >/dev/null || { echo "GNU time is missing: apt-get install time" >&2; exit 1; }
fi
BASE=${1:-ff675d3}
N=${N:-3000}
COUNT=${COUNT:-3}
NAME=writecpu
EXTRA="; $N writes a run"
# shellcheck source=bench/basetree.sh
source bench/basetree.sh
(cd "$NEW" && go test -c -o "$DIR/new.test" ./sqlitestore/)
(cd "$OLD" && go test -c -o "$DIR/old.test" ./sqlitestore/)
FTS5=${FTS5:-}
SORT=${SORT:-}
EXPR=${EXPR:-}
run() { # TREE (old, new, idx: new with the search index on, fts: new with FTS5's, srt: new with the sort index on)
  local dir=$NEW bin=$1 flags=()
  [ "$1" = old ] && dir=$OLD
  [ "$1" = idx ] && bin=new flags=(-bench.search-index)
  [ "$1" = fts ] && bin=new flags=(-bench.fts5)
  [ "$1" = srt ] && bin=new flags=(-bench.sort-index "${SORT_FIELDS:-company}")
  [ "$1" = xpr ] && bin=new flags=(-bench.expr-index "${EXPR_FIELD:-company}")
  (cd "$dir/sqlitestore" && /usr/bin/time -f "%U %S" -o "$DIR/time" "$DIR/$bin.test" -test.run '^$' \
    -test.bench '^BenchmarkAddSubmission$' -test.benchtime "${N}x" "${flags[@]}" >/dev/null)
  awk -v t="$1" -v n="$N" '{ printf "%s %.1f\n", t, ($1 + $2) * 1e6 / n }' "$DIR/time" | tee -a "$DIR/lines"
}
for i in $(seq "$COUNT"); do
  if [ $((i % 2)) = 1 ]; then run old; run new; run idx; [ -z "$FTS5" ] || run fts; [ -z "$SORT" ] || run srt; [ -z "$EXPR" ] || run xpr
  else [ -z "$EXPR" ] || run xpr; [ -z "$SORT" ] || run srt; [ -z "$FTS5" ] || run fts; run idx; run new; run old; fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| tree | runs | CPU µs per write (median) | rounds |"
echo "|---|---:|---:|---|"
TREES="old new idx${FTS5:+ fts}${SORT:+ srt}${EXPR:+ xpr}"
for t in $TREES; do
  case $t in old) name="$BASE (base)" ;; new) name="this tree, search index off" ;; idx) name="this tree, search index on" ;;
    fts) name="this tree, search index off, FTS5 trigram index" ;; srt) name="this tree, search index off, sort index on" ;;
    xpr) name="this tree, search index off, SQLite's expression index" ;; esac
  echo "| $name | $(awk -v t="$t" '$1 == t' "$DIR/lines" | wc -l) | $(awk -v t="$t" '$1 == t { print $2 }' "$DIR/lines" | median) |$(awk -v t="$t" '$1 == t { printf " %s", $2 }' "$DIR/lines") |"
done
echo
for t in ${TREES#old }; do
  ratios=$(awk -v t="$t" '$1 == "old" { o[++i] = $2 } $1 == t { x[++j] = $2 } END { for (k = 1; k <= i && k <= j; k++) printf "%.2f\n", x[k] / o[k] }' "$DIR/lines")
  case $t in new) name="search index off" ;; idx) name="search index on" ;; fts) name="FTS5 trigram index" ;; srt) name="sort index on" ;; xpr) name="expression index" ;; esac
  echo "$name / base: median of the rounds' ratios $(echo "$ratios" | median) (rounds: $(echo $ratios))"
done
