#!/usr/bin/env bash
# The crash run of issue 26 ("no event lost across crashes"): webhook
# delivery from the sync feed must lose nothing when nodes die mid-flight.
#
#   flock /tmp/loadrun.lock bash bench/hookcrash.sh          # N=10000 over 20 forms, 3 nodes, a kill every 2 s
#   N=2000 KILL=1s bash bench/hookcrash.sh                    # shorter
#   KILL=0 bash bench/hookcrash.sh                            # the same without kills
#
# It builds examples/server and internal/cmd/hookcrash into a temporary
# directory and runs hookcrash, which:
#
#   - makes a PostgreSQL schema of its own (hookcrash_PID) on $PG, with
#     20 forms (FORMS) of one account, dropped at the end;
#   - starts five receivers on loopback and registers one endpoint for
#     each: two that answer 200 at once (one of them following three
#     forms only), one that fails the first attempt of every event with
#     500 (half its requests), one that stalls one request in 20 past
#     the attempt timeout, one following half the forms that answers 429
#     to one in 10 (a stall costs one of the endpoint's 4 attempt slots
#     for the 1 s timeout, and the n-th failure in a row of one event
#     waits the n-th step of the schedule: with a third of requests
#     stalled or a quarter refused, the two receivers take the retry
#     schedule's long steps often enough that one stream needs over 20
#     minutes to catch up, which measures the schedule, not the delivery);
#   - starts NODES example servers over the schema with -webhooks (poll
#     100 ms, attempt timeout 1 s, retry waits scaled by RETRY_SCALE, 0.01:
#     the schedule's 5 s, 5 min, 30 min ... become 50 ms, 3 s, 18 s ...,
#     a 10 h wait 6 min);
#   - writes N additions and deletions (a third deletions, of live
#     submissions) at RATE a second over the forms, straight into the
#     store, while it SIGKILLs a random node every KILL and starts it
#     again at once;
#   - waits until every stream of every endpoint is at its form's end (at
#     most QUIET), then checks what each receiver got against the final
#     feed: 0 missing entries (a submission added and deleted before its
#     endpoint got to it may never be sent: the feed no longer holds it),
#     every repeat of a webhook-id with the same body bytes, positions
#     strictly increasing per (endpoint, form) in first-delivery order; and
#     counts the events answered 2xx more than once (duplicates: a kill
#     between a 2xx and the cursor's write, or a stalled answer the sender
#     had given up on).
#
# It prints one line per endpoint and a summary line, and exits 1 if a
# check fails, keeping the nodes' logs (their directory is printed). The
# same checks without kills, on SQLite (one node) and memstore, are unit
# tests: TestConvergence in package webhook.
set -euo pipefail
cd "$(dirname "$0")/.."
PG=${PG-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
N=${N:-10000}
FORMS=${FORMS:-20}
NODES=${NODES:-3}
KILL=${KILL:-2s}
RATE=${RATE:-250}
QUIET=${QUIET:-20m}
RETRY_SCALE=${RETRY_SCALE:-0.01}
DIR=$(mktemp -d /tmp/formsapi-hookcrash.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
go build -o "$DIR/" ./examples/server ./internal/cmd/hookcrash
echo "hookcrash: commit $(git rev-parse --short HEAD), N=$N FORMS=$FORMS NODES=$NODES KILL=$KILL RATE=$RATE RETRY_SCALE=$RETRY_SCALE"
"$DIR/hookcrash" -server "$DIR/server" -dsn "$PG" -n "$N" -forms "$FORMS" -nodes "$NODES" -kill "$KILL" \
  -rate "$RATE" -quiet-timeout "$QUIET" -retry-scale "$RETRY_SCALE"
