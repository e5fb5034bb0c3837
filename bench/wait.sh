# Waiting for the example server to start, for the bench scripts; source
# it. A server listens at once, answers /healthz, and answers /readyz with
# 200 (and prints its banner, "forms API on URL over …", to stderr) once
# its store is open: a start that migrates a big database or builds its
# search index takes minutes, and logs its progress at least every 5 s
# (docs/operations.md). So the waits here have no deadline of their own:
# they last while the server's process lives and its log files grow, and
# give up after START_STALL seconds (60) in which none grew.

# wait_for COND PID FILES...: evaluates COND (a shell command, which may
# set the caller's variables) every 0.1 s until it succeeds; fails if PID
# ends first, or if none of FILES grew for START_STALL seconds.
wait_for() {
  local cond=$1 pid=$2 size last=-1 since=$SECONDS
  shift 2
  while :; do
    eval "$cond" && return 0
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the server (pid $pid) ended while starting" >&2
      return 1
    fi
    size=$(cat "$@" 2>/dev/null | wc -c || true)
    if [ "$size" != "$last" ]; then last=$size since=$SECONDS; fi
    if [ $((SECONDS - since)) -ge "${START_STALL:-60}" ]; then
      echo "the server (pid $pid) logged nothing for ${START_STALL:-60} s while starting" >&2
      return 1
    fi
    sleep 0.1
  done
}

# readyz URL: succeeds when the server at URL is ready: /readyz answers
# 200, or anything but 503 and no answer (a server of an older tree,
# without /readyz, that listens once it is ready).
readyz() {
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' "$1/readyz" 2>/dev/null) || true
  [ "$code" = 200 ] || { [ -n "$code" ] && [ "$code" != 000 ] && [ "$code" != 503 ]; }
}

# wait_ready URL PID FILES...: waits until the server at URL is ready,
# while its FILES (its log, its stderr) show progress.
wait_ready() {
  local u=$1
  shift
  wait_for "readyz $u" "$@"
}

# wait_banner ERRFILE PID FILES...: waits for the server's banner in
# ERRFILE, its stderr, while ERRFILE and FILES show progress, and sets
# url to the URL it names.
wait_banner() {
  local err=$1 pid=$2
  shift 2
  url=
  wait_for 'url=$(sed -n "s/^forms API on \(http:[^ ]*\) over.*/\1/p" "$err" 2>/dev/null || true); [ -n "$url" ]' "$pid" "$err" "$@"
}
