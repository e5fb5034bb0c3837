#!/usr/bin/env bash
# The write cost of a change, issue 24's way: BenchmarkAddSubmission of
# sqlitestore and pgstore on this tree and on BASE (a commit, default
# 82da653: main before the form incarnation and the random version bits),
# in the same run, interleaved, this tree twice: with the search index off
# (its default) and on (-bench.search-index: sqlitestore and pgstore's
# WithSearchIndex), for a BASE that has no such switch. Not part of
# `go test` or CI.
#
#   flock /tmp/loadrun.lock bash bench/writecost.sh            # about 3 minutes; PostgreSQL at $PG
#   COUNT=10 STORES=sqlitestore bash bench/writecost.sh 82da653
#
# It checks BASE out into a temporary worktree, builds each store's test
# binary in both trees, then runs them in turn COUNT times (5), the order
# swapped every round (base, off, on; then on, off, base), each run
# `-test.bench '^BenchmarkAddSubmission$' -test.benchmem -test.count 1`
# (one second of writes) in its package's directory. It prints each run's
# line, then per store the median ns/op, B/op, allocs/op and pgstore's
# pg-cpu-ns/op (CPU time of the store's PostgreSQL backends per write) of
# each tree, this tree's median over BASE's (index off, and index on), and
# the median of the rounds' own ratios (each round's this-tree run over
# its base run, which ran next to it: on a shared machine the steadier
# figure). A BASE with the switch runs with its index off. SORT=1 runs
# this tree a third way, with the sort index on and the search index off
# (-bench.sort-index: WithSortIndex), reported as "sort index on", for
# the fields of SORT_FIELDS (default company: one field of every
# submission; "*" for every field, the index as it was before it took
# field names). BASE_SEARCH=1 runs BASE a second way too, with its search
# index on, reported as "base, search index on", and this tree's index-on
# runs are then also compared with it (for a BASE that has the switch).
# BENCHTIME (default 1s) is each run's -test.benchtime: a count of writes
# such as 1536x runs every tree through the same number of folds.
# FORMS=N spreads each run's writes over N forms in turn
# (-bench.forms, every tree; a BASE from before the flag gets this
# tree's bench_test.go of each store, which must then compile there).
# IDS=1 gives each write a metadata ID (-bench.ids; a BASE without the
# flag gets this tree's bench_test.go the same way).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-82da653}
COUNT=${COUNT:-5}
STORES=${STORES:-sqlitestore pgstore}
export FORMSAPI_TEST_POSTGRES=${FORMSAPI_TEST_POSTGRES:-${PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}}
NAME=writecost
# shellcheck source=bench/basetree.sh
source bench/basetree.sh
for s in $STORES; do
  if { [ -n "${FORMS:-}" ] && ! grep -q bench.forms "$OLD/$s/bench_test.go"; } ||
    { [ -n "${IDS:-}" ] && ! grep -q bench.ids "$OLD/$s/bench_test.go"; }; then
    echo "FORMS or IDS: $s/bench_test.go of this tree copied into the base"
    cp "$NEW/$s/bench_test.go" "$OLD/$s/bench_test.go"
  fi
  (cd "$NEW" && go test -c -o "$DIR/new-$s.test" "./$s/")
  (cd "$OLD" && go test -c -o "$DIR/old-$s.test" "./$s/")
done
TREES="old new idx"
[ -n "${BASE_SEARCH:-}" ] && TREES="old oix new idx"
[ -n "${SORT:-}" ] && TREES="$TREES srt"
run() { # TREE STORE (TREE: old, oix: old with the search index on, new, idx: new with the search index on, or srt: with the sort index on)
  local dir=$NEW bin=$1 flags=()
  [ "$1" = old ] && dir=$OLD
  [ "$1" = oix ] && dir=$OLD bin=old flags=(-bench.search-index)
  [ "$1" = idx ] && bin=new flags=(-bench.search-index)
  [ "$1" = srt ] && bin=new flags=("-bench.sort-index=${SORT_FIELDS:-company}")
  [ -n "${FORMS:-}" ] && flags+=("-bench.forms=$FORMS")
  [ -n "${IDS:-}" ] && flags+=(-bench.ids)
  (cd "$dir/$2" && "$DIR/$bin-$2.test" -test.run '^$' -test.bench '^BenchmarkAddSubmission$' -test.benchmem -test.count 1 -test.benchtime "${BENCHTIME:-1s}" "${flags[@]}") |
    grep '^BenchmarkAddSubmission' | sed "s/^/$1 $2 /" | tee -a "$DIR/lines"
}
for i in $(seq "$COUNT"); do
  for s in $STORES; do
    if [ $((i % 2)) = 1 ]; then
      for t in $TREES; do run "$t" "$s"; done
    else
      for t in $(echo "$TREES" | tr ' ' '\n' | tac); do run "$t" "$s"; done
    fi
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| store | tree | runs | ns/op (median) | B/op | allocs/op | PostgreSQL CPU per write |"
echo "|---|---|---:|---:|---:|---:|---:|"
# median UNIT TREE STORE: the median of the value before UNIT in the lines of TREE and STORE.
median() {
  awk -v unit="$1" -v t="$2" -v s="$3" '$1 == t && $2 == s { for (i = 4; i <= NF; i++) if ($i == unit) print $(i-1) }' "$DIR/lines" |
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
for s in $STORES; do
  for t in $TREES; do
    case $t in old) name="$BASE (base)" ;; oix) name="$BASE (base), search index on" ;; new) name="this tree, search index off" ;; idx) name="this tree, search index on" ;; srt) name="this tree, sort index on" ;; esac
    n=$(awk -v t="$t" -v s="$s" '$1 == t && $2 == s' "$DIR/lines" | wc -l)
    pg=$(median pg-cpu-ns/op "$t" "$s")
    echo "| $s | $name | $n | $(median ns/op "$t" "$s") | $(median B/op "$t" "$s") | $(median allocs/op "$t" "$s") | $([ "$pg" = - ] && echo - || echo "$pg ns") |"
  done
done
echo
for s in $STORES; do
  for t in ${TREES#old }; do
    case $t in oix) what="base's search index on" ;; new) what="search index off" ;; idx) what="search index on" ;; srt) what="sort index on" ;; esac
    for unit in ns/op allocs/op B/op pg-cpu-ns/op; do
      o=$(median "$unit" old "$s") n=$(median "$unit" "$t" "$s")
      [ "$o" = - ] && continue
      paired=$(awk -v s="$s" -v t="$t" -v unit="$unit" '$2 == s { for (i = 4; i <= NF; i++) if ($i == unit) v[$1, ++k[$1]] = $(i-1) }
        END { for (j = 1; j <= k[t] && j <= k["old"]; j++) if (v["old", j] > 0) printf "%.3f\n", v[t, j] / v["old", j] }' "$DIR/lines" |
        sort -g | awk '{ v[NR] = $1; all = all " " $1 } END { if (NR == 0) print "-"; else printf "%s (rounds:%s)", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), all }')
      echo "$s $unit, $what: this tree / base = $(awk -v a="$n" -v b="$o" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'), median of the rounds' ratios $paired"
    done
  done
  if [ -n "${BASE_SEARCH:-}" ]; then
    for unit in ns/op pg-cpu-ns/op; do
      o=$(median "$unit" oix "$s") n=$(median "$unit" idx "$s")
      [ "$o" = - ] && continue
      paired=$(awk -v s="$s" -v unit="$unit" '$2 == s { for (i = 4; i <= NF; i++) if ($i == unit) v[$1, ++k[$1]] = $(i-1) }
        END { for (j = 1; j <= k["idx"] && j <= k["oix"]; j++) if (v["oix", j] > 0) printf "%.3f %.3f\n", v["idx", j] / v["oix", j], (v["oix", j] > v["old", j] ? (v["idx", j] - v["new", j]) / (v["oix", j] - v["old", j]) : 0) }' "$DIR/lines")
      echo "$s $unit, search index on, this tree / base with its index on, and the index's share (on - off) this tree / base, each round: $(echo "$paired" | tr '\n' ';')"
    done
  fi
done
