# Helpers of the issue 15 scripts (bench/conditional.sh, bench/keyflood.sh,
# bench/scopedflood.sh); source it from the repository root. It builds the
# example server and the bench commands into a temporary directory $DIR,
# and on exit stops every server it started, drops the PostgreSQL schemas
# named in $SCHEMAS and removes $DIR (KEEP=DIR copies the servers' logs
# there first).
set -euo pipefail
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
DIR=$(mktemp -d /tmp/formsapi-bench.XXXXXX)
SCHEMAS=()
SERVERS=()
bench_cleanup() {
  set +e
  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  for s in "${SCHEMAS[@]}"; do psql -q "$PG" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1; done
  [ -z "${KEEP:-}" ] || { mkdir -p "$KEEP" && cp "$DIR"/*.log "$DIR"/*.err "$KEEP"/ 2>/dev/null; }
  rm -rf "$DIR"
}
trap bench_cleanup EXIT
if ! command -v wrk >/dev/null; then
  apt-get install -y wrk >/dev/null || { echo "wrk is missing: apt-get install wrk" >&2; exit 1; }
fi
go build -o "$DIR/" ./examples/server ./internal/cmd/cpuwatch ./internal/cmd/probe ./internal/cmd/gendata
LUA=$PWD/bench
# shellcheck source=bench/wait.sh
source "$LUA/wait.sh"

# start_server NAME ARGS...: starts examples/server ($SERVER_BIN, a path
# relative to $DIR, if set) with ARGS on a free port of 127.0.0.1 (no
# access log), waits until it is ready (its banner; as long as it logs
# progress, see bench/wait.sh), and sets $pid and $url. Its stderr (the
# banner) goes to $DIR/NAME.err, its log to $DIR/NAME.log.
start_server() {
  local name=$1
  shift
  rm -f "$DIR/$name.err"
  (cd "$DIR" && exec "${SERVER_BIN:-./server}" -addr 127.0.0.1:0 -access-log=false "$@" >"$name.log" 2>"$name.err") &
  pid=$!
  SERVERS+=("$pid")
  wait_banner "$DIR/$name.err" "$pid" "$DIR/$name.log" && return 0
  echo "server $name did not start:" >&2
  cat "$DIR/$name.err" >&2
  return 1
}

# stop_server PID
stop_server() { kill "$1" 2>/dev/null; wait "$1" 2>/dev/null || true; }

# field LINE NAME: the value of NAME=… in a cpuwatch or probe line.
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

# requests WRK_OUTPUT: how many requests wrk completed.
requests() { echo "$1" | awk '/requests in/ {print $1}'; }

# per OUT_SECONDS N: milliseconds per request, three decimals.
per() { awk -v s="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.3f", 1000 * s / n; else print "-" }'; }

# ratio A B: A / B, three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "-" }'; }
