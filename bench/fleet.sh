#!/usr/bin/env bash
# The fleet (issue 16): API nodes over one PostgreSQL, back to back in one
# run, on the multi-tenant workload of bench/mixed.sh (20 accounts × 10
# forms × 500 submissions; bench/mixed.lua: a random key, one of its forms,
# limit 10/25/50/100, random order, and 1 in 20 lists the key's forms),
# spread over the nodes by bench/fleet.lua (wrk's thread i talks to node
# i mod n). Rows, each with a fresh set of nodes:
#
#   baseline      benchserver -mode static: a precomputed 100-item page
#   sqlite        1 examples/server over SQLite (rate limits in memory);
#                 SQLITE_KEY_COPY=true|false gives it -sqlite-key-copy
#                 (sqlitestore.WithKeyCopy; unset: the server's default,
#                 on since issue 38)
#   pg1-redis     1 node over PostgreSQL, rate limits in Redis (-redis)
#   pg2-redis     2 nodes, the same
#   pg3-redis     3 nodes, the same
#   pg1-pglimit   1 node over PostgreSQL, rate limits in PostgreSQL
#   bouncer1      1 node through PgBouncer (transaction mode, DSN with
#                 default_query_exec_mode=exec), rate limits in Redis
#   bouncer2      2 nodes, the same
#   pg1-hit       pg1-redis, every request for the same page (one key,
#                 one form, limit 10), which the cache holds: the floor,
#                 one statement (the key with the form) per request
#   pg3+writer    pg3-redis while `tenants write` adds a submission to a
#                 random form every WRITE_EVERY (2ms) through pgstore,
#                 WRITERS (1) writes in flight at most (one write's
#                 latency caps a single writer's rate)
#   pg1+writer    pg1-redis, the same writer (not in the default ROWS)
#   pg2+writer    pg2-redis, the same writer (not in the default ROWS)
#   pg1-follow, pg3-follow, pg3+writer-follow   pg1-redis, pg3-redis and
#                 pg3+writer with -follow "$FOLLOW" (1ms): nodes that
#                 follow the change log (pgstore.WithFollow, issue 38);
#                 each node's rounds are printed after the row (not in
#                 the default ROWS)
#   pg3-stale, pg3+writer-stale   pg3-follow and pg3+writer-follow with
#                 -staleness "$STALE" (10ms): bounded staleness
#                 (pgstore.WithStaleness; not in the default ROWS)
#   pgN+writer, pgN-follow, pgN+writer-follow, pgN-stale, pgN+writer-stale
#                 the same rows with N nodes, 1 to 6 (wrk runs N threads,
#                 2 for one node), for the fleet's cost as it grows
#   pgN-shared, pgN+writer-shared   pgN-follow and pgN+writer-follow
#                 with -shared-rounds: one leader's rounds serve every
#                 node (pgstore.WithSharedRounds over Redis, issue 38;
#                 the row's own -redis-prefix); each node's rounds,
#                 tickets and published rounds are printed after the row
#   pgN-shared-stale, pgN+writer-shared-stale   the shared rows with
#                 -staleness "$STALE" too: bounded staleness over shared
#                 rounds
#   With BATCH=K (0, off, by default) every -follow, -stale and -shared row's nodes
#   also get -round-batch K -round-max-spacing "$ROUND_MAX" (10ms): rounds
#   spaced by each node's request rate (pgstore.WithRoundBatch), and wrk at
#   least BATCH connections per node (CONN raised for the row if need be).
#
# Rows on a primary and a hot standby of the script's own (not in the
# default ROWS; the shared server allows no replication): initdb into
# $WORK/pair-<migrations>/primary as postgres (kept, with the same
# dataset generated into it once), a standby made afresh each run with
# pg_basebackup -R -X stream, both on free ports, stopped at the end.
#
#   rpg3          3 nodes on that primary alone, Redis limiter
#   rpg3-replica  the same nodes with -replica (pgstore.WithReplica)
#   rpg3+writer   rpg3 while the writer adds a submission every WRITE_EVERY
#   rpg3+writer-replica   the same with -replica
# RPG_ARGS, flags split on spaces, go to these rows' nodes too: with
# RPG_ARGS="-follow 1ms -shared-rounds -staleness 10ms -replica-rounds" the
# -replica rows' rounds read the standby (pgstore.WithReplicaRounds).
#
# For these rows pg-µs is the primary's backends of the run, replica-µs the
# standby's, and repl-µs replication itself (the primary's WAL sender,
# the standby's startup (replay) and WAL receiver processes).
#
# Every node has rate limiting on (a policy of 10,000,000 a minute per
# account, which never refuses) and a read cache of CACHE_MIB (32) MiB,
# which holds the workload's pages (200 forms × 2 orders × up to 100
# items of about 440 bytes: some 18 MB, more than the default 12 MiB;
# CACHE_MIB=12 shows the default); nodes
# of a row start all at once (so several first starts race on the
# migration and seed locks, through PgBouncer too). Before each measured
# run, WARM (5s) of the same requests fill the caches and pools (the
# workload has some 1,600 distinct pages; a node's first read of each is a
# miss, which a fleet pays once per node and per write, not per request).
#
# Each row prints req/s and the CPU time (user + system, internal/cmd/
# cpuwatch) per request of: the API nodes (summed), the PostgreSQL
# backends serving them (application_name of this run, from
# pg_stat_activity; autovacuum, the WAL writer and the writer's own
# backend are left out), PgBouncer's process, the Redis server (the whole
# process: other users of this Redis count too) and wrk; the ratios to the
# baseline; and the requests that were not 2xx/3xx or failed on the socket
# (must be 0). Then the capacity model those figures give: API requests a
# second per core of PostgreSQL, of Redis, and of the nodes. On a shared
# two-core machine req/s moves with the neighbours' load; CPU per request
# is the steady figure, and the one that carries over to real machines.
#
# PROFILE=DIR gives every node -cpuprofile DIR/<row>-<i>-<round>.prof (the
# whole run of the node, warm-up included), for go tool pprof with a
# binary of the example server built from the same commit.
# TABLES=1 prints, for each row on the shared server, what the measured
# run did to the schema's tables (pg_stat_user_tables: rows updated, of
# them HOT, dead rows, index scans, heap and index blocks hit) per
# request; the nodes' statements per request (the database's
# transactions in the run less the submissions written in it: other
# users of the server count too, so only under a quiet-run does it say
# much); and before the run, the forms table's dead row versions (which
# every key lookup may walk) and the age of the oldest other session's
# snapshot (which keeps pruning from removing them).
#
# WRITER_PG (default PG) is the DSN of the writer rows' writer on the
# shared server: the same database as another role, say, so that
# pg_stat_statements (which keys by role) tells its statements from the
# nodes'.
# PER_FORM (500) is the submissions of each form in the datasets; it is
# part of their names, so each size is generated once.
# SEARCH_INDEX=false starts the nodes with -search-index=false: a fresh
# schema is then never given the search index (the first start with it
# builds it, some minutes on a loaded machine), and writes do not keep it.
#
# OLD=DIR (a checkout of another commit, e.g. `git worktree add --detach
# DIR <commit>`) puts that commit's example server beside this one's on
# the same workload: its examples/server and internal/cmd/tenants are
# built from DIR, and the rows old-pg1-redis, old-pg2-redis,
# old-pg3-redis, old-pg1-hit, old-pgN-follow and old-pgN+writer-follow
# (N from 1 to 6; -follow "$FOLLOW" alone, never BATCH, and the writer
# built from DIR too) run them as pg1-redis ... pgN+writer-follow do, over
# a dataset generated by its own tenants (its own migrations) into schema
# OLD_SCHEMA (default ${SCHEMA}_old), kept and reused like the other.
# The commit's server must take the flags used here (issue 16's on).
#
#   bash bench/fleet.sh                      # DUR=8s CONN=32, about 3 min
#   ROWS="baseline pg1-redis" bash bench/fleet.sh
#   PG=... REDIS=... bash bench/fleet.sh     # default: the test services
#
# PgBouncer (apt-get install pgbouncer) runs from a config of its own on a
# free port, as nobody, and is stopped at the end. The SQLite dataset is
# generated once into $WORK (/tmp/formsapi-fleet) and copied for each run;
# the PostgreSQL one once into schema formsapi_fleet (2,000 submissions a
# transaction, formsapi.BatchWriter), kept with its keys file in $WORK and reused
# (the writer's additions accumulate; remove $WORK/pg-*.keys to start
# afresh). Everything runs on 127.0.0.1 and stops by itself.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-8s}
WARM=${WARM:-5s}
CONN=${CONN:-32}
WRITE_EVERY=${WRITE_EVERY:-2ms}
WRITERS=${WRITERS:-1}
WRITERARGS=()
[ "$WRITERS" = 1 ] || WRITERARGS=(-writers "$WRITERS")
WORK=${WORK:-/tmp/formsapi-fleet}
REDIS=${REDIS-redis://127.0.0.1:6379/0}
ROWS=${ROWS:-baseline sqlite pg1-redis pg2-redis pg3-redis pg1-pglimit bouncer1 bouncer2 pg1-hit pg3+writer}
SCHEMA=${SCHEMA:-formsapi_fleet}
CACHE_MIB=${CACHE_MIB:-32}
PER_FORM=${PER_FORM:-500}
SEARCH_INDEX=${SEARCH_INDEX:-true}
SQLITE_KEY_COPY=${SQLITE_KEY_COPY:-}
KEY_COPY=()
if [ -n "$SQLITE_KEY_COPY" ]; then KEY_COPY=(-sqlite-key-copy="$SQLITE_KEY_COPY"); fi
RATE=(-rate-limit 10000000 -rate-window 1m -cache-mib "$CACHE_MIB" -search-index="$SEARCH_INDEX")
source bench/lib.sh
[ -n "$PG" ] || { echo "fleet.sh needs PostgreSQL: set PG to a DSN" >&2; exit 1; }
[ -n "$REDIS" ] || { echo "fleet.sh needs Redis: set REDIS to a URL" >&2; exit 1; }
if ! command -v pgbouncer >/dev/null; then
  apt-get install -y pgbouncer >/dev/null || { echo "pgbouncer is missing: apt-get install pgbouncer" >&2; exit 1; }
fi
go build -o "$DIR/" ./internal/cmd/benchserver ./internal/cmd/tenants
OLD=${OLD:-}
OLD_SCHEMA=${OLD_SCHEMA:-${SCHEMA}_old}
if [ -n "$OLD" ]; then
  mkdir -p "$DIR/old"
  (cd "$OLD" && go build -o "$DIR/old/" ./examples/server ./internal/cmd/tenants)
  echo "old rows: $(git -C "$OLD" rev-parse --short HEAD) from $OLD, schema $OLD_SCHEMA" >&2
fi
APP=formsapi-fleet-$$
export FORMSAPI_CURSOR_SECRET=fleet-bench-$$-shared-by-every-node
# The primary and standby of the rpg rows (see above).
PAIR_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PAIR_DIR="$WORK/pair-$(cat pgstore/migrations/*.sql | sha1sum | cut -c1-8)-$PER_FORM"
PAIR_UP=
REPL_PIDS=
PRIMARY=
STANDBY=
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() {
  local p
  for p in $(shuf -i 20000-60000 -n 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  return 1
}
stop_pair() {
  [ -n "$PAIR_UP" ] || return 0
  as_postgres "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/standby" -m fast stop >/dev/null 2>&1 || true
  as_postgres "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/primary" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$PAIR_DIR/standby"
  PAIR_UP=
}
start_pair() {
  local p1 p2
  [ -z "$PAIR_UP" ] || return 0
  mkdir -p "$PAIR_DIR"
  if [ "$(id -u)" = 0 ]; then chown postgres "$PAIR_DIR"; fi
  if [ ! -f "$PAIR_DIR/primary/PG_VERSION" ]; then
    as_postgres "$PAIR_BIN/initdb" -D "$PAIR_DIR/primary" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    printf '%s\n' "listen_addresses = '127.0.0.1'" "wal_level = replica" \
      "max_wal_senders = 4" "hot_standby = on" "hot_standby_feedback = on" "max_connections = 200" |
      as_postgres sh -c "cat >>'$PAIR_DIR/primary/postgresql.conf'"
    echo 'host replication all 127.0.0.1/32 trust' | as_postgres sh -c "cat >>'$PAIR_DIR/primary/pg_hba.conf'"
  fi
  p1=$(free_port)
  as_postgres "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/primary" -l "$PAIR_DIR/primary.log" -o "-p $p1 -k $PAIR_DIR" -w start >/dev/null
  PAIR_UP=1
  PRIMARY="postgres://postgres@127.0.0.1:$p1/postgres?sslmode=disable"
  if [ ! -f "$PAIR_DIR/keys" ]; then
    "$DIR/tenants" gen -postgres "$PRIMARY" -schema "$SCHEMA" -keys "$PAIR_DIR/keys.tmp" -accounts 20 -forms 10 -per-form "$PER_FORM" 2>"$DIR/gen.err" || { cat "$DIR/gen.err" >&2; exit 1; }
    mv "$PAIR_DIR/keys.tmp" "$PAIR_DIR/keys"
  fi
  rm -rf "$PAIR_DIR/standby"
  as_postgres "$PAIR_BIN/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres -D "$PAIR_DIR/standby" -R -X stream -c fast
  p2=$(free_port)
  as_postgres "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/standby" -l "$PAIR_DIR/standby.log" -o "-p $p2 -k $PAIR_DIR" -w start >/dev/null
  STANDBY="postgres://postgres@127.0.0.1:$p2/postgres?sslmode=disable"
  REPL_PIDS=$(psql -Atq "$PRIMARY" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'walsender'"),$(psql -Atq "$STANDBY" -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type IN ('startup', 'walreceiver')")
}
trap 'stop_pair; bench_cleanup' EXIT

# dsn BASE PARAMS: BASE with PARAMS appended as query parameters.
dsn() { case $1 in *\?*) echo "$1&$2" ;; *) echo "$1?$2" ;; esac; }

# Datasets, named after the schema, so a new migration makes a new one.
mkdir -p "$WORK"
PRISTINE="$WORK/sqlite-$(cat sqlitestore/migrations/*.sql | sha1sum | cut -c1-8)-$PER_FORM.db"
KEYS="$PRISTINE.keys"
# wants PATTERN: whether a row of ROWS matches the extended regexp PATTERN
# (a dataset only the rows that use it make).
wants() { echo " $ROWS " | tr ' ' '\n' | grep -q -E "^($1)\$"; }
if wants sqlite && { [ ! -f "$PRISTINE" ] || [ ! -f "$KEYS" ]; }; then
  rm -f "$PRISTINE" "$PRISTINE-wal" "$PRISTINE-shm" "$KEYS"
  "$DIR/tenants" gen -db "$PRISTINE" -keys "$KEYS" -accounts 20 -forms 10 -per-form "$PER_FORM" 2>"$DIR/gen.err" || { cat "$DIR/gen.err" >&2; exit 1; }
fi
if wants sqlite; then cp "$PRISTINE" "$DIR/fleet.db"; fi
# The keys file names the server and schema too: one made against another
# server's dataset opens nothing here (every request a 404).
PGKEYS="$WORK/pg-$(cat pgstore/migrations/*.sql | sha1sum | cut -c1-8)-$(printf '%s %s' "$PG" "$SCHEMA" | sha1sum | cut -c1-8)-$PER_FORM.keys"
if wants 'pg.*|bouncer.*' && [ ! -f "$PGKEYS" ]; then
  "$DIR/tenants" gen -postgres "$PG" -schema "$SCHEMA" -keys "$PGKEYS.tmp" -accounts 20 -forms 10 -per-form "$PER_FORM" 2>"$DIR/gen.err" || { cat "$DIR/gen.err" >&2; exit 1; }
  mv "$PGKEYS.tmp" "$PGKEYS"
fi
OLDKEYS=
if wants 'old-.*'; then
  [ -n "$OLD" ] || { echo "fleet.sh: old-* rows need OLD (a checkout of the other commit)" >&2; exit 1; }
  OLDKEYS="$WORK/pg-old-$OLD_SCHEMA-$(cat "$OLD"/pgstore/migrations/*.sql | sha1sum | cut -c1-8)-$(printf '%s' "$PG" | sha1sum | cut -c1-8)-$PER_FORM.keys"
  if [ ! -f "$OLDKEYS" ]; then
    "$DIR/old/tenants" gen -postgres "$PG" -schema "$OLD_SCHEMA" -keys "$OLDKEYS.tmp" -accounts 20 -forms 10 -per-form "$PER_FORM" 2>"$DIR/gen.err" || { cat "$DIR/gen.err" >&2; exit 1; }
    mv "$OLDKEYS.tmp" "$OLDKEYS"
  fi
fi

# PgBouncer in transaction mode on a free port, logging in to PostgreSQL as
# the user of $PG (auth_type any: the bench's clients are trusted).
BOUNCER_PID=
start_bouncer() {
  local host port db user port2
  host=$(psql -Atq "$PG" -c "SELECT coalesce(inet_server_addr()::text, 'localhost')" | sed 's,/.*,,')
  port=$(psql -Atq "$PG" -c "SELECT current_setting('port')")
  db=$(psql -Atq "$PG" -c "SELECT current_database()")
  user=$(psql -Atq "$PG" -c "SELECT current_user")
  for port2 in $(shuf -i 20000-60000 -n 50); do # one nothing listens on
    (exec 3<>"/dev/tcp/127.0.0.1/$port2") 2>/dev/null || break
  done
  mkdir -p "$DIR/pgbouncer"
  cat >"$DIR/pgbouncer/pgbouncer.ini" <<EOF
[databases]
$db = host=$host port=$port dbname=$db user=$user
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port2
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = ${BOUNCER_POOL:-8}
max_client_conn = 1000
logfile = $DIR/pgbouncer/pgbouncer.log
pidfile = $DIR/pgbouncer/pgbouncer.pid
EOF
  chmod 755 "$DIR" "$DIR/pgbouncer"
  chown -R nobody "$DIR/pgbouncer"
  pgbouncer -u nobody "$DIR/pgbouncer/pgbouncer.ini" >/dev/null 2>&1 &
  BOUNCER_PID=$!
  SERVERS+=("$BOUNCER_PID")
  BOUNCER="postgres://$user@127.0.0.1:$port2/$db?sslmode=disable"
  for _ in $(seq 100); do
    psql -Atq "$BOUNCER" -c 'SELECT 1' >/dev/null 2>&1 && BOUNCER=$(dsn "$BOUNCER" default_query_exec_mode=exec) && return 0
    sleep 0.1
  done
  echo "pgbouncer did not start:" >&2
  cat "$DIR/pgbouncer/pgbouncer.log" >&2
  return 1
}

# start_nodes NAME N ARGS...: starts N example servers with ARGS at once,
# each on a free port, and waits for all; sets NODES (host:port ...),
# NODE_PIDS (comma-separated) and NODE_URL (the first one's URL).
start_nodes() {
  local name=$1 n=$2 i u p
  shift 2
  local pids=()
  for i in $(seq "$n"); do
    rm -f "$DIR/$name-$i.err"
    local prof=()
    if [ -n "${PROFILE:-}" ]; then
      mkdir -p "$PROFILE"
      ROUND=$((${ROUND:-0} + 1))
      prof=(-cpuprofile "$PROFILE/$name-$i-$ROUND.prof")
    fi
    (cd "$DIR" && exec "${NODE_BIN:-./server}" -addr 127.0.0.1:0 -access-log=false -demo-key-file "$name.demo-key" "${prof[@]}" "$@" >"$name-$i.log" 2>"$name-$i.err") &
    pids+=($!)
    SERVERS+=($!)
  done
  NODES=
  NODE_PIDS=
  NODE_URL=
  for i in $(seq "$n"); do
    p=${pids[$((i - 1))]}
    # Ready once it prints its banner; a first start over a big schema
    # migrates and builds the search index for minutes, logging its
    # progress, which the wait follows (bench/wait.sh).
    u=
    if wait_banner "$DIR/$name-$i.err" "$p" "$DIR/$name-$i.log"; then u=$url; fi
    if [ -z "$u" ]; then
      echo "node $name-$i did not start:" >&2
      cat "$DIR/$name-$i.err" >&2
      return 1
    fi
    NODES="$NODES ${u#http://}"
    NODE_PIDS="$NODE_PIDS${NODE_PIDS:+,}$p"
    [ -n "$NODE_URL" ] || NODE_URL=$u
  done
}
stop_nodes() { local p; for p in ${NODE_PIDS//,/ }; do stop_server "$p"; done; }

REDIS_PID=$(redis-cli -u "$REDIS" INFO server | tr -d '\r' | sed -n 's/^process_id://p')
[ -n "$REDIS_PID" ] && [ -d "/proc/$REDIS_PID" ] || { echo "fleet.sh: Redis at $REDIS is not a process of this machine" >&2; exit 1; }

# measure NAME NODES THREADS URL WRK_ARGS...: WARM then DUR of wrk; appends
# "NAME nodes req/s node pg bouncer redis wrk errors" (seconds of CPU, the
# figures per request come later) to $DIR/rows.
measure() {
  local name=$1 n=$2 t=$3 url=$4 c out line reqs errs pids
  shift 4
  c=$(((CONN + t - 1) / t * t)) # a whole number of connections per thread
  # With BATCH, at least BATCH connections a thread (wrk's thread i talks
  # to node i mod n): a node whose clients are fewer than its round's
  # target never fills a round and holds each request for ROUND_MAX
  # (docs/fleet.md); six nodes at 32 connections served a fifth of three.
  if [ "$BATCH" != 0 ] && [ "$c" -lt $((t * BATCH)) ]; then c=$((t * BATCH)); fi
  FLEET_NODES=$NODES wrk -t"$t" -c"$c" -d"$WARM" "$@" "$url" -- "${LUAARGS[@]}" >/dev/null 2>&1 || true
  local tables0= xacts0=
  if [ -n "${TABLES:-}" ] && [ -z "$ON_PAIR" ] && [ "$name" != baseline ] && [ "$name" != sqlite ]; then
    tables0=$(table_stats "$PG")
    xacts0=$(xact_count "$PG")
    # Dead row versions of the forms table that every lookup may walk, and
    # how long another session has held back what pruning may remove.
    psql -Atq "$PG" -c "SELECT '$name before: formsapi_forms ' || n_live_tup || ' live rows, ' || n_dead_tup || ' dead, '
        || pg_relation_size(relid) / 8192 || ' pages; the oldest other snapshot: '
        || coalesce((SELECT round(extract(epoch FROM now() - min(xact_start)))::text || ' s old' FROM pg_stat_activity
             WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid() HAVING count(*) > 0), 'none')
      FROM pg_stat_user_tables WHERE schemaname = '${ROW_SCHEMA:-$SCHEMA}' AND relname = 'formsapi_forms'" | tee -a "$DIR/tables" >&2
  fi
  pids=$NODE_PIDS,$REDIS_PID
  [ -n "$BOUNCER_PID" ] && pids=$pids,$BOUNCER_PID
  local pgdsn=$PG watch2=()
  if [ -n "$ON_PAIR" ]; then
    pgdsn=$PRIMARY
    watch2=(-pg2 "$STANDBY")
    pids=$pids,$REPL_PIDS
  fi
  out=$(FLEET_NODES=$NODES "$DIR/cpuwatch" -pid "$pids" -pg "$pgdsn" "${watch2[@]}" -pg-app "$APP" -- \
    wrk -t"$t" -c"$c" -d"$DUR" "$@" "$url" -- "${LUAARGS[@]}" 2>&1)
  line=$(echo "$out" | grep '^cpuwatch:')
  reqs=$(requests "$out")
  errs=$(echo "$out" | awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}')
  local node=0 p
  for p in ${NODE_PIDS//,/ }; do node=$(awk -v a="$node" -v b="$(field "$line" "pid:$p")" 'BEGIN {print a + b}'); done
  local bouncer=-
  [ -n "$BOUNCER_PID" ] && bouncer=$(field "$line" "pid:$BOUNCER_PID")
  local replica=- repl=-
  if [ -n "$ON_PAIR" ]; then
    replica=$(field "$line" pg2)
    repl=0
    for p in ${REPL_PIDS//,/ }; do repl=$(awk -v a="$repl" -v b="$(field "$line" "pid:$p")" 'BEGIN {print a + b}'); done
  fi
  echo "$name $n $(echo "$out" | awk '/Requests\/sec/ {print $2}') $reqs $node $(field "$line" pg) $bouncer $(field "$line" "pid:$REDIS_PID") $(field "$line" client) $errs $replica $repl" >>"$DIR/rows"
  echo "$name: $reqs requests, errors $errs; $line" >&2
  if [ "$errs" != 0 ]; then echo "$out" >&2; fi
  if [ -n "$tables0" ]; then
    local tables1 xacts1
    tables1=$(table_stats "$PG")
    xacts1=$(xact_count "$PG")
    # What the measured run did to each table, per request.
    join <(echo "$tables0") <(echo "$tables1") | awk -v row="$name" -v n="$reqs" '
      { d = ""; for (i = 2; i <= 7; i++) d = d sprintf(" %s=%.3f", h[i], ($(i + 7) - $i) / n) }
      BEGIN { split("- upd hot_upd dead idx_scan seq_scan heap_hit", h, " ") }
      { printf "%s tables per request: %s%s\n", row, $1, d }' | tee -a "$DIR/tables" >&2
    # Transactions of the whole database during the run, less the
    # submissions written in it (the writer's, one transaction each), per
    # request: the nodes' statements (one transaction each). Other users
    # of the server count too, so only a quiet-run says much.
    local ins0 ins1
    ins0=$(echo "$tables0" | awk '$1 == "formsapi_submissions" {print $8}')
    ins1=$(awk '$1 == "formsapi_submissions" {print $8}' <<<"$tables1")
    awk -v row="$name" -v n="$reqs" -v a="$xacts0" -v b="$xacts1" -v w=$((ins1 - ins0)) \
      'BEGIN { printf "%s statements per request: %.3f (%d transactions, %d of them writes, over %d requests)\n", row, (b - a - w) / n, b - a, w, n }' |
      tee -a "$DIR/tables" >&2
  fi
}

# xact_count DSN: transactions committed and rolled back in DSN's database.
xact_count() { psql -Atq "$1" -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"; }

# table_stats DSN: per table of SCHEMA, "name n_tup_upd n_tup_hot_upd
# n_dead_tup idx_scan seq_scan heap_blks_hit n_tup_ins", sorted by name.
table_stats() {
  psql -Atq -F' ' "$1" -c "SELECT s.relname, s.n_tup_upd, s.n_tup_hot_upd, s.n_dead_tup, coalesce(s.idx_scan, 0), s.seq_scan,
      coalesce(io.heap_blks_hit, 0) + coalesce(io.idx_blks_hit, 0), s.n_tup_ins
    FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
    WHERE s.schemaname = '${ROW_SCHEMA:-$SCHEMA}' ORDER BY 1" | sort
}

# node_row NAME N THREADS NODE_ARGS...: starts N nodes, measures, stops them.
node_row() {
  local name=$1 n=$2 t=$3
  shift 3
  start_nodes "$name" "$n" "$@"
  LUAARGS=("${ROW_KEYS:-$PGKEYS}")
  measure "$name" "$n" "$t" "$NODE_URL" -s "$LUA/fleet.lua"
  stop_nodes
}

PGNODE=(-postgres "$(dsn "$PG" "application_name=$APP")" -schema "$SCHEMA" "${RATE[@]}")
FOLLOW=${FOLLOW:-1ms}
STALE=${STALE:-10ms}
BATCH=${BATCH:-0}
ROUND_MAX=${ROUND_MAX:-10ms}
BATCHARGS=()
[ "$BATCH" = 0 ] || BATCHARGS=(-round-batch "$BATCH" -round-max-spacing "$ROUND_MAX")

# follow_rounds NAME: prints the rounds each -follow node of row NAME
# logged at exit (warm-up included): rounds, lookups the copy could not
# answer (misses), and copies dropped whole (resets).
follow_rounds() {
  cat "$DIR/$1"-*.log | grep '"msg":"follow rounds"' | sed "s/^/$1 /" >&2 || true
}
load=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$DIR/rows"
for row in $ROWS; do
  BOUNCER_PID=
  ON_PAIR=
  NODE_BIN= ROW_SCHEMA= ROW_KEYS=
  case $row in rpg*) start_pair; ON_PAIR=1 ;; esac
  RPGNODE=(-postgres "$(dsn "${PRIMARY:-$PG}" "application_name=$APP")" -schema "$SCHEMA" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$APP")
  case $row in
  baseline)
    "$DIR/benchserver" -mode static -addr 127.0.0.1:18190 >/dev/null 2>&1 &
    bs=$!
    SERVERS+=("$bs")
    for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18190/ && break || sleep 0.1; done
    NODES= NODE_PIDS=$bs LUAARGS=()
    measure baseline 1 2 "http://127.0.0.1:18190/v1/forms/bench-form-000/submissions?limit=100" -H "Authorization: Bearer bench-key"
    stop_server "$bs"
    ;;
  sqlite)
    start_nodes sqlite 1 -db fleet.db "${RATE[@]}" "${KEY_COPY[@]}"
    LUAARGS=("$KEYS")
    measure sqlite 1 2 "$NODE_URL" -s "$LUA/fleet.lua"
    stop_nodes
    ;;
  pg1-redis) node_row "$row" 1 2 "${PGNODE[@]}" -redis "$REDIS" -redis-prefix "$APP" ;;
  pg2-redis) node_row "$row" 2 2 "${PGNODE[@]}" -redis "$REDIS" -redis-prefix "$APP" ;;
  pg3-redis) node_row "$row" 3 3 "${PGNODE[@]}" -redis "$REDIS" -redis-prefix "$APP" ;;
  pg1-pglimit) node_row "$row" 1 2 "${PGNODE[@]}" ;;
  pg[1-6]-follow | pg[1-6]-stale | pg[1-6]-shared | pg[1-6]-shared-stale)
    n=${row%%-*}
    n=${n#pg}
    stale=() prefix=$APP
    case $row in
    *-shared-stale) stale=(-shared-rounds -staleness "$STALE") prefix=$APP-$row ;;
    *-stale) stale=(-staleness "$STALE") ;;
    *-shared) stale=(-shared-rounds) prefix=$APP-$row ;;
    esac
    node_row "$row" "$n" "$(( n == 1 ? 2 : n ))" "${PGNODE[@]}" -redis "$REDIS" -redis-prefix "$prefix" -follow "$FOLLOW" "${stale[@]}" "${BATCHARGS[@]}"
    follow_rounds "$row"
    ;;
  old-pg[1-6]-follow)
    NODE_BIN=./old/server ROW_SCHEMA=$OLD_SCHEMA ROW_KEYS=$OLDKEYS
    n=${row#old-pg}
    n=${n%-follow}
    node_row "$row" "$n" "$(( n == 1 ? 2 : n ))" -postgres "$(dsn "$PG" "application_name=$APP")" -schema "$OLD_SCHEMA" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$APP" -follow "$FOLLOW"
    follow_rounds "$row"
    ;;
  old-pg1-redis | old-pg2-redis | old-pg3-redis)
    NODE_BIN=./old/server ROW_SCHEMA=$OLD_SCHEMA ROW_KEYS=$OLDKEYS
    n=${row#old-pg}
    n=${n%-redis}
    node_row "$row" "$n" "$(( n == 1 ? 2 : n ))" -postgres "$(dsn "$PG" "application_name=$APP")" -schema "$OLD_SCHEMA" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$APP"
    ;;
  pg1-hit | old-pg1-hit)
    hitkeys=$PGKEYS hitschema=$SCHEMA
    case $row in old-*) NODE_BIN=./old/server ROW_SCHEMA=$OLD_SCHEMA hitkeys=$OLDKEYS hitschema=$OLD_SCHEMA ;; esac
    start_nodes "$row" 1 -postgres "$(dsn "$PG" "application_name=$APP")" -schema "$hitschema" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$APP"
    read -r hitkey hitform _ <"$hitkeys"
    LUAARGS=()
    measure "$row" 1 2 "$NODE_URL/v1/forms/$hitform/submissions?limit=10" -H "Authorization: Bearer $hitkey"
    stop_nodes
    ;;
  bouncer1 | bouncer2)
    start_bouncer
    n=${row#bouncer}
    node_row "$row" "$n" 2 -postgres "$(dsn "$BOUNCER" "application_name=$APP")" -schema "$SCHEMA" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$APP"
    stop_server "$BOUNCER_PID"
    ;;
  pg[1-6]+writer | pg[1-6]+writer-follow | pg[1-6]+writer-stale | pg[1-6]+writer-shared | pg[1-6]+writer-shared-stale | old-pg[1-6]+writer-follow)
    n=${row#old-}
    n=${n%%+writer*}
    n=${n#pg}
    follow=() prefix=$APP
    case $row in
    old-*) follow=(-follow "$FOLLOW") ;;
    *-follow) follow=(-follow "$FOLLOW" "${BATCHARGS[@]}") ;;
    *-shared-stale) follow=(-follow "$FOLLOW" -shared-rounds -staleness "$STALE" "${BATCHARGS[@]}") prefix=$APP-$row ;;
    *-stale) follow=(-follow "$FOLLOW" -staleness "$STALE" "${BATCHARGS[@]}") ;;
    *-shared) follow=(-follow "$FOLLOW" -shared-rounds "${BATCHARGS[@]}") prefix=$APP-$row ;;
    esac
    wschema=$SCHEMA wkeys=$PGKEYS tenants=$DIR/tenants
    case $row in old-*) NODE_BIN=./old/server ROW_SCHEMA=$OLD_SCHEMA wschema=$OLD_SCHEMA wkeys=$OLDKEYS tenants=$DIR/old/tenants ;; esac
    start_nodes "$row" "$n" -postgres "$(dsn "$PG" "application_name=$APP")" -schema "$wschema" "${RATE[@]}" -redis "$REDIS" -redis-prefix "$prefix" "${follow[@]}"
    "$tenants" write -postgres "$(dsn "${WRITER_PG:-$PG}" "application_name=$APP-writer")" -schema "$wschema" \
      -keys "$wkeys" -every "$WRITE_EVERY" "${WRITERARGS[@]}" -duration "$(( ${WARM%s} + ${DUR%s} + 1 ))s" >"$DIR/writer.out" 2>&1 &
    writer=$!
    LUAARGS=("$wkeys")
    measure "$row" "$n" "$(( n == 1 ? 2 : n ))" "$NODE_URL" -s "$LUA/fleet.lua"
    wait "$writer" || { echo "writer failed:" >&2; cat "$DIR/writer.out" >&2; }
    echo "$(cat "$DIR/writer.out")" >&2
    stop_nodes
    case $row in *-follow | *-stale | *-shared) follow_rounds "$row" ;; esac
    ;;
  rpg3 | rpg3-replica | rpg3+writer | rpg3+writer-replica)
    args=("${RPGNODE[@]}")
    # shellcheck disable=SC2206 # RPG_ARGS is flags, split on spaces
    args+=(${RPG_ARGS:-})
    case $row in *-replica) args+=(-replica "$(dsn "$STANDBY" "application_name=$APP")") ;; esac
    start_nodes "$row" 3 "${args[@]}"
    writer=
    case $row in *+writer*)
      "$DIR/tenants" write -postgres "$(dsn "$PRIMARY" "application_name=$APP-writer")" -schema "$SCHEMA" \
        -keys "$PAIR_DIR/keys" -every "$WRITE_EVERY" "${WRITERARGS[@]}" -duration "$(( ${WARM%s} + ${DUR%s} + 1 ))s" >"$DIR/writer.out" 2>&1 &
      writer=$! ;;
    esac
    LUAARGS=("$PAIR_DIR/keys")
    measure "$row" 3 3 "$NODE_URL" -s "$LUA/fleet.lua"
    if [ -n "$writer" ]; then
      wait "$writer" || { echo "writer failed:" >&2; cat "$DIR/writer.out" >&2; }
      echo "$(cat "$DIR/writer.out")" >&2
    fi
    stop_nodes
    case ${RPG_ARGS:-} in *-follow*) follow_rounds "$row" ;; esac
    # Each -replica node logs at exit how its replica reads went (warm-up
    # included): served there, or read from the primary because the
    # replica was behind (stale) or failed.
    case $row in *-replica)
      cat "$DIR/$row"-*.log | grep '"msg":"replica reads"' |
        sed 's/.*"served":\([0-9]*\),"stale":\([0-9]*\),"failed":\([0-9]*\).*/\1 \2 \3/' |
        awk -v row="$row" '{s += $1; t += $2; f += $3} END {printf "%s: replica pages served %d, stale (read from the primary) %d (%.2f%%), failed %d\n", row, s, t, (s + t + f) ? 100 * t / (s + t + f) : 0, f}' |
        tee -a "$DIR/replica-reads" >&2 ;;
    esac
    ;;
  *) echo "fleet.sh: unknown row $row" >&2; exit 1 ;;
  esac
done

echo
echo "wrk -c$CONN (rounded up to a multiple of the threads) -d$DUR after -d$WARM of warm-up, $(date -u +%FT%TZ), main at $(git rev-parse --short HEAD 2>/dev/null || echo '?'); load average before: $load"
echo "CPU µs per request (user + system over the run / requests): nodes summed; PostgreSQL: the nodes' backends; Redis: the whole server"
printf '%-12s %5s %9s %8s %9s %8s %8s %8s %8s %8s %7s %11s %8s\n' row nodes req/s "x base" node-µs "x base" pg-µs pgb-µs redis-µs wrk-µs errors replica-µs repl-µs
# With several baseline rows (one per round), the ratios are to their mean.
base_rps=$(awk '$1=="baseline" {s += $3; n++} END {if (n) print s / n}' "$DIR/rows")
base_cpu=$(awk '$1=="baseline" {s += 1e6 * $5 / $4; n++} END {if (n) print s / n}' "$DIR/rows")
us() { awk -v s="$1" -v n="$2" 'BEGIN { if (s == "-" || n <= 0) print "-"; else printf "%.1f", 1e6 * s / n }'; }
while read -r name n rps reqs node pg bouncer redis client errs replica repl; do
  [ "$name" = baseline ] && pg=- && redis=-
  case $name in sqlite) pg=- ;; esac
  nus=$(us "$node" "$reqs")
  printf '%-12s %5s %9.0f %8s %9s %8s %8s %8s %8s %8s %7s %11s %8s\n' "$name" "$n" "$rps" "$(ratio "$rps" "${base_rps:-0}")" "$nus" \
    "$(ratio "$nus" "${base_cpu:-0}")" "$(us "$pg" "$reqs")" "$(us "$bouncer" "$reqs")" "$(us "$redis" "$reqs")" "$(us "$client" "$reqs")" "$errs" \
    "$(us "${replica:--}" "$reqs")" "$(us "${repl:--}" "$reqs")"
done <"$DIR/rows"

if [ -s "$DIR/replica-reads" ]; then
  echo
  cat "$DIR/replica-reads"
fi

echo
echo "Capacity model (per core, from the CPU per request above): API requests a second one core of each serves"
printf '%-12s %14s %14s %14s %14s %22s %14s\n' row PostgreSQL PgBouncer Redis "API node" "node cores per PG core" "replica"
while read -r name n rps reqs node pg bouncer redis client errs replica repl; do
  case $name in baseline | sqlite) continue ;; esac
  cap() { awk -v s="$1" -v n="$2" 'BEGIN { if (s == "-" || s <= 0) print "-"; else printf "%.0f", n / s }'; }
  printf '%-12s %14s %14s %14s %14s %22s %14s\n' "$name" "$(cap "$pg" "$reqs")" "$(cap "$bouncer" "$reqs")" "$(cap "$redis" "$reqs")" \
    "$(cap "$node" "$reqs")" "$(ratio "$node" "$pg")" "$(cap "${replica:--}" "$reqs")"
done <"$DIR/rows"
