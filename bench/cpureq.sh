#!/usr/bin/env bash
# The server's CPU time per request for a few queries of one form's list,
# requests one at a time with curl: (utime+stime of PID over the requests,
# from /proc/PID/stat) / N, and the wall time per request.
#
#   bash bench/cpureq.sh PID PORT KEY FORM N QUERY...
#   bash bench/cpureq.sh 1234 8080 "$(cat forms.db.demo-key)" contact 20 'filter[k]=true&limit=1' 'limit=1'
set -euo pipefail
pid=$1 port=$2 key=$3 form=$4 n=$5
shift 5
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
for qs in "$@"; do
  c0=$(cpu); t0=$(date +%s.%N)
  for _ in $(seq "$n"); do
    curl -sg -o /dev/null -H "Authorization: Bearer $key" "http://127.0.0.1:$port/v1/forms/$form/submissions?$qs"
  done
  c1=$(cpu); t1=$(date +%s.%N)
  awk -v q="$qs" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v n="$n" -v tck="$tck" \
    'BEGIN { printf "%-60s cpu/req %7.1f ms  wall/req %7.1f ms\n", q, c * 1000 / tck / n, (t1 - t0) * 1000 / n }'
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
