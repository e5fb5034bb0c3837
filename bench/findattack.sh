#!/usr/bin/env bash
# The search attack of issue 42 (RELIABILITY cases 103 and 104), on this
# tree and on BASE (a commit; default 02c672b, main before the fix):
#
#   flock /tmp/loadrun.lock bash bench/findattack.sh [BASE]    # about 10 minutes with BASE
#   N=50 REQS=3 WRITES=10 bash bench/findattack.sh             # smaller
#
# For each tree it builds examples/server and internal/cmd/findattack (the
# command is copied into BASE's checkout: it uses the public API alone),
# seeds a fresh SQLite database with N (200) submissions of 1 MiB whose
# values hold every trigram of the term qwertz but not the term, and a
# megabyte of é, and starts the server on it, rate limiting off, search
# index on (the example server's default). It then reads REQS (5) times,
# one at a time with curl, each of:
#
#   q=qwertz&limit=100                first page of the search
#   q=qwertz&limit=100&total=exact    the same with an exact total
#
# and prints the server's CPU time per request (utime+stime from
# /proc/PID/stat, as bench/cpureq.sh does) and the rate units the same
# request costs (a server of its own with -rate-limit 600 -rate-window
# 1h: the drop of RateLimit's r over one request). Last, findattack -writes WRITES (20) prints a writer's CPU
# per write of 1 MiB of ASCII, of é and of U+FDFA, search index off and
# on, in each tree.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/wait.sh
source bench/wait.sh
BASE=${1:-02c672b}
N=${N:-200}
REQS=${REQS:-5}
WRITES=${WRITES:-20}
DIR=$(mktemp -d /tmp/formsapi-findattack.XXXXXX)
OLD=$DIR/base
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  git worktree remove --force "$OLD" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
git worktree add --detach "$OLD" "$BASE" >/dev/null 2>&1
mkdir -p "$OLD/internal/cmd/findattack"
cp internal/cmd/findattack/main.go "$OLD/internal/cmd/findattack/"
NEW=$PWD
echo "this tree: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with changes)'); base: $(git -C "$OLD" rev-parse --short HEAD)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs"
for t in new old; do
  src=$NEW
  [ $t = old ] && src=$OLD
  (cd "$src" && go build -o "$DIR/$t-server" ./examples/server && go build -o "$DIR/$t-findattack" ./internal/cmd/findattack)
done
tck=$(getconf CLK_TCK)
port=18290
start() { # TREE DB FLAGS...
  port=$((port + 1))
  local t=$1 d=$2
  shift 2
  (cd "$DIR" && exec "./$t-server" -addr 127.0.0.1:$port -db "$d" -access-log=false "$@" >"$DIR/out.log" 2>"$DIR/term.log") &
  pid=$!
  wait_banner "$DIR/term.log" "$pid" "$DIR/out.log" && return # as long as its start logs progress
  echo "the server did not start" >&2
  exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
get() { # QUERY: prints status and r of RateLimit
  curl -sg -o /dev/null -D - -H "Authorization: Bearer $(cat "$DIR/$db.demo-key")" "http://127.0.0.1:$port/v1/forms/attack/submissions?$1" |
    awk 'NR == 1 { s = $2 } tolower($1) == "ratelimit:" { match($0, /;r=[0-9]+/); r = substr($0, RSTART + 3, RLENGTH - 3) } END { print s, r }'
}
for t in old new; do
  db=$t.db
  start "$t" "$db" # makes the database and its demo key
  stop
  "$DIR/$t-findattack" -seed "$N" -db "$DIR/$db" -search-index
  start "$t" "$db" -rate-limit 0
  for qs in "q=qwertz&limit=100" "q=qwertz&limit=100&total=exact"; do
    c0=$(cpu)
    for _ in $(seq "$REQS"); do get "$qs" >/dev/null; done
    c1=$(cpu)
    awk -v t="$t" -v q="$qs" -v c="$((c1 - c0))" -v n="$REQS" -v tck="$tck" \
      'BEGIN { printf "%-4s %-34s cpu/req %8.1f ms\n", t, q, c * 1000 / tck / n }'
  done
  stop
  # 600 an hour: a unit comes back every 6 s, so that a request of a few
  # seconds shows what it cost.
  start "$t" "$db" -rate-limit 600 -rate-window 1h
  for qs in "q=qwertz&limit=100" "q=qwertz&limit=100&total=exact"; do
    read -r s1 r1 < <(get "limit=1")
    read -r s2 r2 < <(get "$qs")
    echo "$t  $qs: status $s2, rate units $((r1 - r2)) (r $r1 -> $r2)"
  done
  stop
done
for t in old new; do
  for idx in false true; do
    echo "$t: $("$DIR/$t-findattack" -writes "$WRITES" -search-index=$idx | tr '\n' ';')"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
