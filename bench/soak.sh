#!/usr/bin/env bash
# Loopback soak: the example server over SQLite, a steady writer in a
# second process, 32 keep-alive clients sending valid, invalid and foreign
# requests for 60 s; then zero transport errors, zero unexpected statuses,
# PRAGMA integrity_check = ok, and the server's memory over time.
#
#   bash bench/soak.sh          # DURATION=60s CLIENTS=32 by default
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/wait.sh
source bench/wait.sh
DURATION=${DURATION:-60s}
CLIENTS=${CLIENTS:-32}
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
go build -o "$WORK/" ./examples/server ./internal/cmd/gendata ./internal/cmd/soak
"$WORK/gendata" -db "$WORK/soak.db" -big 20000 -forms 2 -per-form 1000 -key bench-key
"$WORK/server" -db "$WORK/soak.db" -addr 127.0.0.1:18093 -access-log=false -rate-limit 0 >"$WORK/server.log" & SERVER=$!
wait_ready http://127.0.0.1:18093 "$SERVER" "$WORK/server.log" # as long as its start logs progress
"$WORK/soak" -url http://127.0.0.1:18093 -db "$WORK/soak.db" -key bench-key -foreign-form contact \
  -duration "$DURATION" -clients "$CLIENTS" -pid "$SERVER"
