#!/usr/bin/env bash
# Feed walkers against list walkers, peak memory (issue 15, finding 1):
# "32 concurrent feed walkers over forms of 1 MiB submissions with 100
# escaped attachments each stay within the same peak RSS as 32 list
# walkers over the same data, on SQLite and on PostgreSQL."
#
#   bash bench/feedwalk.sh                     # N=100 N_PG=20 C=32 (about 9 min)
#   PG= bash bench/feedwalk.sh                 # SQLite only
#   STORES=pg N_PG=10 bash bench/feedwalk.sh   # PostgreSQL only
#   OLD=7cd4cd5^ bash bench/feedwalk.sh        # and the SQLite walks on the main before the fix
#
# `internal/cmd/feedwalk seed` puts submissions into form "big" of a new
# account "bench", each as large as formsapi.DefaultLimits accept: data of
# MaxDataBytes, and MaxAttachments attachments whose strings are as long as
# the limits allow and full of '<', which the API sends as \u003c (six
# bytes for one stored): N of them into a SQLite file, N_PG into
# PostgreSQL schema formsapi_feedwalk at $PG. Fewer over PostgreSQL because
# pgstore reads every row up to the limit whatever the byte budget (see
# the "limit 1 vs 1000" rows and BENCHMARKS.md), so a limit=1000 walk of N
# submissions costs it about N²/2 row reads.
#
# Then for each store and each walk (list: limit=1000, following
# nextCursor; feed: limit=1000 from sync=start, following syncToken while
# hasMore) it starts a fresh examples/server (default 4 MiB page budget,
# -rate-limit 0: this measures memory, not the limiter; over SQLite the
# list walk runs a second time with -cache-mib 0, to show what the read
# cache's copies add), has C clients
# walk the whole form once at the same time, checks each saw every
# submission, and reports pages, bytes, the largest page, the server's
# peak RSS (VmHWM from /proc/PID/status), and the CPU time per page of the
# server and, over PostgreSQL, of the backends serving it (those with
# this run's application_name, from pg_stat_activity; internal/cmd/cpuwatch).
# formsclient's Sync with default options then reads the form to the end
# (`feedwalk sync`). Last, on a fresh server, 20 requests for the first
# page with the limit that the first page holds at limit=1000 (the budget
# holds two of these submissions) and 20 with limit=1000 (or each of
# AMP_LIMITS): the same answer, so any difference in CPU is rows read and
# thrown away. How that grows with the rows after the page:
#
#   STORES=pg N_PG=100 C=1 AMP_LIMITS="10 50 100 1000" bash bench/feedwalk.sh
#
# With OLD=REV (and the SQLite store), examples/server is also built from commit REV (git
# archive; its migrations must match this tree's) and both SQLite walks
# run against it over the same file first, each stopped after
# OLD_TIMEOUT (120s): the baseline on the same data. A walk that fails or
# is stopped still reports how far it got and the peak RSS.
#
# Everything runs on 127.0.0.1; servers are stopped, the schema dropped and
# the temporary directory removed on exit. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
N_PG=${N_PG:-20}
C=${C:-32}
source bench/lib.sh
go build -o "$DIR/" ./internal/cmd/feedwalk
SCHEMA=formsapi_feedwalk
APP=formsapi-feedwalk-$$
stores=(${STORES:-sqlite pg})
[ -n "$PG" ] || stores=(sqlite)
has() { [[ " ${stores[*]} " == *" $1 "* ]]; }

if has sqlite; then
  "$DIR/feedwalk" seed -db "$DIR/forms.db" -n "$N" -keyfile "$DIR/sqlite.key"
fi
if [ -n "${OLD:-}" ]; then
  mkdir -p "$DIR/old-src"
  git archive "$OLD" | tar -x -C "$DIR/old-src"
  (cd "$DIR/old-src" && go build -o "$DIR/old-server" ./examples/server)
  stores=(old "${stores[@]}")
fi
if has pg; then
  psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
  SCHEMAS+=("$SCHEMA")
  "$DIR/feedwalk" seed -postgres "$PG" -schema "$SCHEMA" -n "$N_PG" -keyfile "$DIR/pg.key"
fi

# serve STORE: a fresh example server over STORE, in $pid at $url, and
# the cpuwatch flags for it in $watch.
serve() {
  if [ "$1" = pg ]; then
    start_server pg -postgres "$PG&application_name=$APP" -schema "$SCHEMA" -demo-key-file pg.demo-key -rate-limit 0
    watch=(-pid "$pid" -pg "$PG" -pg-app "$APP")
  else
    local bin=./server
    [ "$1" = old ] && bin=./old-server
    SERVER_BIN=$bin start_server "$1" -db forms.db -rate-limit 0 "${@:2}"
    watch=(-pid "$pid")
  fi
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
amp=()
for store in "${stores[@]}"; do
  key=$DIR/$store.key
  n=$N
  [ "$store" = pg ] && n=$N_PG
  extra=()
  if [ "$store" = old ]; then
    key=$DIR/sqlite.key
    extra=(-timeout "${OLD_TIMEOUT:-120s}")
  fi
  walks=(list feed)
  [ "$store" = sqlite ] && walks+=(list,cache-off)
  for walk in "${walks[@]}"; do
    mode=${walk%,*}
    if [ "$walk" = list,cache-off ]; then serve "$store" -cache-mib 0; else serve "$store"; fi
    idle=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
    status=ok
    out=$("$DIR/cpuwatch" "${watch[@]}" -- "$DIR/feedwalk" walk -url "$url" -keyfile "$key" -mode $mode -c "$C" -want "$n" -pid "$pid" "${extra[@]}") || status=failed
    [ $status = ok ] || [ "$store" = old ] || exit 1
    echo "--- $store, $walk walk, $C clients, $n submissions (idle VmHWM $idle kB)"
    echo "$out"
    line=$(echo "$out" | grep '^cpuwatch:')
    pages=$(echo "$out" | sed -n 's/.*: \([0-9]*\) pages.*/\1/p')
    mib=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MiB in.*/\1/p')
    largest=$(echo "$out" | sed -n 's/.*largest page \([0-9.]*\) MiB.*/\1/p')
    retried=$(echo "$out" | sed -n 's/.*, \([0-9]*\) retried after 503.*/\1/p')
    hwm=$(echo "$out" | awk '/^VmHWM/ {print $2}')
    pgms=-
    [ "$store" = pg ] && pgms=$(per "$(field "$line" pg)" "$pages")
    [ $status = ok ] || walk=$walk,FAILED
    rows+=("$store $walk $n $pages $mib $largest $(ratio "$idle" 976.5625) $(ratio "$hwm" 976.5625) $(per "$(field "$line" "pid:$pid")" "$pages") $pgms $retried")
    if [ "$walk" = feed ] && [ "$store" != old ]; then
      "$DIR/feedwalk" sync -url "$url" -keyfile "$key" -want "$n" | sed "s/^/$store: /"
    fi
    stop_server "$pid"
  done
  [ "$store" = old ] && continue
  serve "$store"
  per_page=$(curl -sf -H "Authorization: Bearer $(cat "$key")" "$url/v1/forms/big/submissions?limit=1000" | grep -o '{"formId":"big"' | wc -l)
  for limit in "$per_page" ${AMP_LIMITS:-1000}; do
    for q in "limit=$limit" "limit=$limit&sync=start"; do
      size=$(curl -sf -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $(cat "$key")" "$url/v1/forms/big/submissions?$q")
      line=$("$DIR/cpuwatch" "${watch[@]}" -- bash -c "for i in \$(seq 20); do curl -sf -o /dev/null -H \"Authorization: Bearer \$(cat $key)\" '$url/v1/forms/big/submissions?$q'; done" | grep '^cpuwatch:')
      pgms=-
      [ "$store" = pg ] && pgms=$(per "$(field "$line" pg)" 20)
      amp+=("$store ${q/&sync=start/,feed} $size $(per "$(field "$line" "pid:$pid")" 20) $pgms")
    done
  done
  stop_server "$pid"
done

echo
echo "C=$C clients, limit=1000, default 4 MiB page budget; load average before: $load"
[ -n "${OLD:-}" ] && echo "store old: examples/server of $OLD over the same SQLite file"
printf '%-7s %-15s %5s %6s %9s %12s %8s %9s %14s %11s %5s\n' store walk subs pages MiB "largest MiB" "idle MB" "VmHWM MB" "server ms/page" "pg ms/page" 503s
for r in "${rows[@]}"; do printf '%-7s %-15s %5s %6s %9s %12s %8.1f %9.1f %14s %11s %5s\n' $r; done
echo
echo "first page, 20 requests each, with the limit that page holds and with 1000 (the same answer):"
printf '%-7s %-16s %9s %14s %11s\n' store request bytes "server ms/req" "pg ms/req"
for r in "${amp[@]}"; do printf '%-7s %-16s %9s %14s %11s\n' $r; done
