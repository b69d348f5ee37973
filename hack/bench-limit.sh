#!/usr/bin/env bash
# The physical limit of each `make bench` scenario on this machine: pgbench
# runs the least SQL one request of the scenario must do
# (hack/bench-limit/*.sql), at the scenario's concurrency, on the cluster
# hack/bench.sh started (so with its settings: synchronous_commit on), in a
# database of its own whose schema the broker made (`broker migrate`). The
# machine's speed changes between days; a scenario's fraction of its limit
# does not. One JSON line per run on stdout, a `#` line on stderr.
#
#   REGENT_BENCH_PG_PORT             the running cluster (required)
#   REGENT_BENCH_LIMIT_CLIENTS       concurrencies of push, pop and cycle ("1 4 16 64")
#   REGENT_BENCH_LIMIT_SECONDS       length of each pgbench run (10)
#   REGENT_BENCH_SEGMENT_BYTES       body of a 100-frame segment, as the broker stores
#                                    one of 100 messages of 64 bytes (2730, measured)
#   REGENT_BENCH_SINK_SEGMENT_BYTES  body of a cycle's 1-frame sink segment (89, measured)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
port=${REGENT_BENCH_PG_PORT:?the port of a running cluster, such as the one hack/bench.sh starts}
clients=${REGENT_BENCH_LIMIT_CLIENTS:-1 4 16 64}
seconds=${REGENT_BENCH_LIMIT_SECONDS:-10}
bytes=${REGENT_BENCH_SEGMENT_BYTES:-2730}
sinkbytes=${REGENT_BENCH_SINK_SEGMENT_BYTES:-89}
partitions=16 # as the scenarios' default P
segments=100  # per partition, for pop to read around
db=regent_limit
url="postgres://postgres@127.0.0.1:$port/$db?sslmode=disable"
export PGOPTIONS="-c client_min_messages=warning"
psql=("$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)

"${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
"$root/bin/broker" migrate --database-url "$url" --log-level warn

# Random bytes: the body is compressed, so it does not compress again.
randomhex() { "${psql[@]}" -d "$db" -At -c "SELECT '\\x' || string_agg(lpad(to_hex((random() * 255)::int), 2, '0'), '') FROM generate_series(1, $1)"; }
body=$(randomhex "$bytes")
sinkbody=$(randomhex "$sinkbytes")
txids=$("${psql[@]}" -d "$db" -At -c "SELECT array_agg(gen_random_uuid())::text FROM generate_series(1, 100)")
"${psql[@]}" -d "$db" -v partitions="$partitions" -v segments="$segments" -v body="$body" -v txids="$txids" \
  -f "$root/hack/bench-limit/setup.sql"
# pgbench checks what push, pop and cycle return; stateget's rows are
# checked here, once.
rows=$("${psql[@]}" -d "$db" -At -c "SELECT count(*), count(*) FILTER (WHERE key >= E'tumb:60\x1f' AND key < E'tumb:60\x20')
  FROM queen_streams.state WHERE query_id = '00000000-0000-0000-0002-000000000001' AND partition_id = '00000000-0000-0000-0002-000000000001'")
[ "$rows" = "64|32" ] || { echo "bench-limit: the stateget shard has $rows rows (all|prefix), want 64|32" >&2; exit 1; }

# limit SCRIPT CLIENTS MESSAGES: one pgbench run of SCRIPT; MESSAGES is what
# one of its transactions stands for (a request of 100 messages, or a read).
limit() {
  local script=$1 c=$2 per=$3 out
  out=$("$pgbin/pgbench" -n -M prepared -h 127.0.0.1 -p "$port" -U postgres -c "$c" -j "$((c < 2 ? c : 2))" -T "$seconds" \
    -D partitions="$partitions" -D segments="$segments" -D body="$body" -D sinkbody="$sinkbody" -D txids="$txids" \
    -f "$root/hack/bench-limit/$script.sql" "$db" 2>&1) || { echo "$out" >&2; return 1; }
  local tps lat failed
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out")
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")
  failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
  if [ -z "$tps" ] || [ "${failed:-0}" != 0 ]; then
    echo "$out" >&2
    return 1
  fi
  printf '{"limit":"%s","clients":%d,"seconds":%d,"tps":%s,"msgs_per_sec":%.0f,"latency_ms":%s}\n' \
    "$script" "$c" "$seconds" "$tps" "$(awk "BEGIN {print $tps * $per}")" "$lat"
  printf '# limit %s C=%d: %.0f transactions/s of %d messages, latency %s ms\n' "$script" "$c" "$tps" "$per" "$lat" >&2
}

for script in push pop cycle; do
  for c in $clients; do
    limit "$script" "$c" 100
  done
done
limit stateget 4 1
# Regent's own push SQL with a transactionId on every item, beside push's limit.
for c in 4 16; do
  limit log_push "$c" 100
done
