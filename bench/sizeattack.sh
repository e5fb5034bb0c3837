#!/usr/bin/env bash
# Re-runs the size attack of issue 12 against examples/server and reports
# the server's peak resident memory (VmHWM) for each byte budget,
# concurrency and limit. Usage: bash bench/sizeattack.sh [submissions] [walks]
# Seeds N submissions of 1 MiB (the largest the default limits accept)
# into one form, then for each run starts a fresh server, has C clients
# each walk the whole form with limit=1000, and reads /proc/PID/status.
set -euo pipefail
N=${1:-100}
WALKS=${2:-2}
DIR=$(mktemp -d /tmp/sizeattack.XXXXXX)
cd "$(dirname "$0")/.."
# shellcheck source=bench/wait.sh
source bench/wait.sh
go build -o "$DIR/server" ./examples/server
go build -o "$DIR/sizeattack" ./internal/cmd/sizeattack
cd "$DIR"
port=18190
start() { # page-mib
  port=$((port + 1))
  ./server -addr 127.0.0.1:$port -access-log=false -rate-limit 0 -page-mib "$1" >out.log 2>term.log &
  pid=$!
  wait_banner term.log "$pid" out.log # as long as its start logs progress
}
start 4
kill $pid; wait $pid 2>/dev/null || true
./sizeattack -seed "$N" -db forms.db
echo "form big: $N submissions of 1 MiB; database $(du -h forms.db | cut -f1)"
# page-mib, clients, limit. Budget 0 is the server before this change
# (pages bounded by limit alone); limit=1000 then asks for the whole form
# in one page, limit=25 is the issue's own request.
for run in "4 4 1000" "4 32 1000" "1 32 1000" "0 4 1000" "0 4 25" "0 32 25"; do
  set -- $run
  start "$1"
  idle=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
  echo "--- page-mib $1, clients $2, limit $3 (idle VmHWM ${idle} kB)"
  ./sizeattack -url http://127.0.0.1:$port -key "$(cat forms.db.demo-key)" -pid $pid -c "$2" -walks "$WALKS" -limit "$3" || true
  kill $pid; wait $pid 2>/dev/null || true
done
rm -rf "$DIR"
