#!/usr/bin/env bash
# Feed walkers against list walkers, peak memory (issue 15, finding 1):
# "32 concurrent feed walkers over forms of 1 MiB submissions with 100
# escaped attachments each stay within the same peak RSS as 32 list
# walkers over the same data, on SQLite and on PostgreSQL."
#
#   bash bench/feedwalk.sh                 # N=100 C=32, SQLite and PostgreSQL (about 6 min)
#   N=50 C=32 PG= bash bench/feedwalk.sh   # SQLite only
#
# `internal/cmd/feedwalk seed` puts N submissions into form "big" of a new
# account "bench", each as large as formsapi.DefaultLimits accept: data of
# MaxDataBytes, and MaxAttachments attachments whose strings are as long as
# the limits allow and full of '<', which the API sends as \u003c (six
# bytes for one stored). It does so once into a SQLite file and once into
# PostgreSQL schema formsapi_feedwalk at $PG. Then for each store and each
# walk (list: limit=1000, following nextCursor; feed: limit=1000 from
# sync=start, following syncToken while hasMore) it starts a fresh
# examples/server (default 4 MiB page budget, -rate-limit 0: this measures
# memory, not the limiter), has C clients walk the whole form once at the
# same time, checks each saw all N submissions, and reports pages, bytes,
# the largest page, the server's peak RSS (VmHWM from /proc/PID/status)
# and the CPU time per page of the server and, over PostgreSQL, of the
# backends serving it (those with this run's application_name, from
# pg_stat_activity; internal/cmd/cpuwatch). Last, formsclient's Sync with
# default options reads each store's form to the end (`feedwalk sync`).
#
# Everything runs on 127.0.0.1; servers are stopped, the schema dropped and
# the temporary directory removed on exit. Not part of `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100}
C=${C:-32}
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
SCHEMA=formsapi_feedwalk
APP=formsapi-feedwalk-$$
DIR=$(mktemp -d /tmp/feedwalk.XXXXXX)
pid=
cleanup() {
  set +e
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$PG" ] && psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
  rm -rf "$DIR"
}
trap cleanup EXIT
go build -o "$DIR/" ./examples/server ./internal/cmd/feedwalk ./internal/cmd/cpuwatch
cd "$DIR"

./feedwalk seed -db forms.db -n "$N" -keyfile lite.key
if [ -n "$PG" ]; then
  psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1
  ./feedwalk seed -postgres "$PG" -schema "$SCHEMA" -n "$N" -keyfile pg.key
fi

# start STORE: a fresh example server over STORE (sqlite or pg) in $pid,
# on a free port ($url).
start() {
  local args=(-addr 127.0.0.1:0 -access-log=false -rate-limit 0)
  if [ "$1" = pg ]; then
    args+=(-postgres "$PG&application_name=$APP" -schema "$SCHEMA" -demo-key-file pg.demo-key)
  else
    args+=(-db forms.db)
  fi
  rm -f server.err
  ./server "${args[@]}" >server.log 2>server.err &
  pid=$!
  for _ in $(seq 300); do
    url=$(sed -n 's/^forms API on \(http:[^ ]*\) over.*/\1/p' server.err 2>/dev/null)
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  cat server.err >&2
  return 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
url=

stores=(sqlite)
[ -n "$PG" ] && stores+=(pg)
load=$(cut -d' ' -f1-3 /proc/loadavg)
rows=()
for store in "${stores[@]}"; do
  key=lite.key
  [ "$store" = pg ] && key=pg.key
  for mode in list feed; do
    start "$store"
    idle=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
    watch=(./cpuwatch -pid "$pid")
    [ "$store" = pg ] && watch+=(-pg "$PG" -pg-app "$APP")
    out=$("${watch[@]}" -- ./feedwalk walk -url $url -keyfile $key -mode $mode -c "$C" -want "$N" -pid "$pid")
    echo "--- $store, $mode walk, $C clients (idle VmHWM $idle kB)"
    echo "$out"
    pages=$(echo "$out" | sed -n 's/.*: \([0-9]*\) pages.*/\1/p')
    mib=$(echo "$out" | sed -n 's/.* \([0-9.]*\) MiB in.*/\1/p')
    largest=$(echo "$out" | sed -n 's/.*largest page \([0-9.]*\) MiB.*/\1/p')
    hwm=$(echo "$out" | awk '/^VmHWM/ {print $2}')
    scpu=$(echo "$out" | sed -n "s/.* pid:$pid=\([0-9.]*\).*/\1/p")
    pcpu=$(echo "$out" | sed -n 's/.* pg=\([0-9.]*\).*/\1/p')
    rows+=("$store $mode $pages $mib $largest $idle $hwm $scpu ${pcpu:--}")
    if [ "$mode" = feed ]; then
      ./feedwalk sync -url $url -keyfile $key -want "$N" | sed "s/^/$store: /"
    fi
    stop
  done
done

echo
echo "N=$N submissions, $C clients, limit=1000, default 4 MiB page budget; load average before: $load"
printf '%-7s %-5s %6s %9s %12s %10s %10s %13s %13s\n' store walk pages MiB "largest MiB" "idle MB" "VmHWM MB" "server ms/pg" "pg ms/page"
for r in "${rows[@]}"; do
  set -- $r
  printf '%-7s %-5s %6s %9s %12s %10.1f %10.1f %13.2f %13s\n' "$1" "$2" "$3" "$4" "$5" \
    "$(echo "$6" | awk '{print $1*1.024/1000}')" "$(echo "$7" | awk '{print $1*1.024/1000}')" \
    "$(echo "$8 $3" | awk '{print 1000*$1/$2}')" \
    "$( [ "$9" = - ] && echo - || echo "$9 $3" | awk '{printf "%.2f", 1000*$1/$2}')"
done
