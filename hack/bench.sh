#!/usr/bin/env bash
# `make bench`: regent-bench against a freshly started local broker, on a
# throwaway PostgreSQL with its default durability (synchronous_commit on),
# everything on this machine; then hack/bench-limit.sh on the same cluster,
# and each scenario as a fraction of its pgbench limit, the figure that does
# not change with the machine's speed of the day.
#
# Each point runs three times, each on a fresh queue that regent-bench
# deletes after it; each run prints one JSON line on stdout and
# regent-bench a `#` line with the medians on stderr. The points: push with
# a transactionId on every item (as Queen's JavaScript client sends them) at
# C = 1, 4, 16, 64, and without at C=4; push with 10 million rows in the
# dedup table; popack and cycle at C = 1, 4, 16, 64 (P=16) and at P = 1,000
# and 10,000 (C=4); stateget; Regent's worker running a pipeline end to end
# at C = 4 and 16 (regent-bench -scenario pipeline); its outputs into a sink
# queue and into a table sink (emit sink=queue, emit sink=table); Regent's worker and a
# stock-style worker folding 1,000 keys at batch 100 and 1000 (worker
# batch=B, stock batch=B). N is chosen for each point to run at least 5 s
# on a quiet 2-core machine, and the whole for about 20 minutes there (some
# 50 when six other builds share it). BENCH_QUICK=1 runs each point once
# with N/20 (and 200,000 dedup rows): a pass of two minutes that shows
# everything works, whose figures mean little. BENCH_ONLY=REGEX runs only
# the points whose name matches (grep -E), without the limit, BENCH_RUNS=N
# runs each N times, and BENCH_BROKER=PATH serves with another broker
# binary: together they make an A/B of a change quick. BENCH_CITUS=N serves
# from a Citus cluster instead, a coordinator and N workers on this machine
# (on REGENT_BENCH_PG_PORT and 10 + i past it), on which the broker's migrate places
# the tables: each node's CPU is reported apart (regent-bench -node-pids),
# and the pgbench limits, which are one PostgreSQL's, are not run. Extra
# arguments go to every regent-bench call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgport=${REGENT_BENCH_PG_PORT:-6651}
addr=${REGENT_BENCH_ADDR:-127.0.0.1:6652}
runs=${BENCH_RUNS:-3} div=1 dedup=10000000 limitsecs=10
if [ -n "${BENCH_QUICK:-}" ]; then runs=1 div=20 dedup=200000 limitsecs=2; fi
broker=${BENCH_BROKER:-$root/bin/broker}
only=${BENCH_ONLY:-}
dir=$(mktemp -d /tmp/regent-bench.XXXXXX)
chmod 755 "$dir"
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  as_pg=(runuser -u postgres --)
fi
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# start_pg DATA PORT SETTINGS...: a PostgreSQL server with the bench's
# settings, running until the script ends.
start_pg() {
  local data=$1 port=$2
  shift 2
  "${as_pg[@]}" "$pgbin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
  "${as_pg[@]}" "$pgbin/postgres" -D "$data" -p "$port" -k "$dir" -c listen_addresses=127.0.0.1 \
    -c max_connections=300 -c shared_buffers=512MB "$@" >"$data.log" 2>&1 &
  pids+=($!)
  until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$port"; do sleep 0.2; done
}
db="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"
psql=("$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -d "$db")
# As root, $! is runuser's pid; each postmaster writes its own.
postmaster() { head -1 "$dir/$1/postmaster.pid"; }
citus=${BENCH_CITUS:-}
watch=()
if [ -z "$citus" ]; then
  start_pg "$dir/data" "$pgport"
  watch=(-pg-pid "$(postmaster data)")
else
  # As test/pgtest starts its Citus clusters: the nodes reach each other
  # over loopback without TLS. Worker i listens on the port 10 + i past
  # the coordinator's, clear of the broker's.
  ports=("$pgport")
  nodes=(coordinator)
  for i in $(seq 1 "$citus"); do nodes+=("worker$i") ports+=($((pgport + 10 + i))); done
  for i in "${!nodes[@]}"; do
    start_pg "$dir/${nodes[$i]}" "${ports[$i]}" -c shared_preload_libraries=citus -c citus.node_conninfo=sslmode=disable
    "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -d "postgres://postgres@127.0.0.1:${ports[$i]}/postgres" -c "CREATE EXTENSION citus"
  done
  "${psql[@]}" -c "SELECT citus_set_coordinator_host('127.0.0.1', $pgport)" >/dev/null
  pidlist=coordinator=$(postmaster coordinator)
  for i in $(seq 1 "$citus"); do
    "${psql[@]}" -c "SELECT citus_add_node('127.0.0.1', ${ports[$i]})" >/dev/null
    pidlist+=,worker$i=$(postmaster "worker$i")
  done
  watch=(-node-pids "$pidlist")
fi

# The environment, not a flag: a BENCH_BROKER from before --metrics-listen ignores it.
REGENT_METRICS_LISTEN=${REGENT_BENCH_METRICS_ADDR:-127.0.0.1:6653} "$broker" --database-url "$db" --listen "$addr" --spool-dir "$dir/spool" --log-level warn >"$dir/broker.log" 2>&1 &
brokerpid=$!
pids+=($brokerpid)
until curl -sf "http://$addr/health" >/dev/null; do
  kill -0 "$brokerpid" 2>/dev/null || { echo "the broker exited:" >&2; cat "$dir/broker.log" >&2; exit 1; }
  sleep 0.2
done

# 1234567 -> 1,234,567
commas() { sed ':a; s/\B[0-9]\{3\}\>/,&/; ta' <<<"$1"; }

# point NAME LIMIT C N ARGS...: one point, C clients and N messages (divided
# for a quick pass), compared at the end with the pgbench LIMIT script at C.
# A point that fails is reported, and the others still run.
failed=()
point() {
  local name=$1 limit=$2 c=$3 n=$(($4 / div))
  shift 4
  if [ -n "$only" ] && ! grep -qE "$only" <<<"$name"; then return; fi
  echo "# $name: C=$c N=$n $*" >&2
  if ! "$root/bin/regent-bench" -url "http://$addr" -runs "$runs" -broker-pid "$brokerpid" "${watch[@]}" \
    -c "$c" -n "$n" "$@" "${extra[@]}" | tee "$dir/last.jsonl"; then
    failed+=("$name")
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$limit" "$c" \
    "$(jq -s 'map(.msgs_per_sec) | sort | .[length / 2 | floor]' "$dir/last.jsonl")" \
    "$(jq -s 'map(.broker_rss_peak_mb) | max' "$dir/last.jsonl")" >>"$dir/points"
}
extra=("$@")

point "push without transactionIds" push 4 400000 -scenario push -txid=false
for c in 1 4 16 64; do
  point "push C=$c" push "$c" $((c == 1 ? 100000 : 200000)) -scenario push
done

# A dedup window as a busy hour leaves it: 10 million remembered ids over
# the 16 partitions the point pushes to, UUIDv7 text like the ids the
# JavaScript client makes (their random bits are a counter: cheaper to make,
# and unique over the table), created over the last 30 minutes (inside the
# broker's default window of one hour, so that no sweep removes them during
# the point). One INSERT per partition, in id order, as they would have come.
# Then VACUUM ANALYZE, as autovacuum would long have done on a table that
# grew over an hour.
dedupname="push, $(commas "$dedup") dedup rows"
if [ -z "$only" ] || grep -qE "$only" <<<"$dedupname"; then
  echo "# filling queen.push_dedup with $dedup rows" >&2
  filled=$SECONDS
  "$root/bin/regent-bench" -url "http://$addr" -scenario push -queue bench-dedup -c 4 -b 1 -p 16 -n 16 >"$dir/dedup-queue" 2>&1 ||
    { cat "$dir/dedup-queue" >&2; exit 1; }
  per=$((dedup / 16))
  for i in $(seq 0 15); do
    "${psql[@]}" -c "INSERT INTO queen.push_dedup (partition_id, transaction_id, message_id, created_at)
      SELECT p, substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 1, 3) || '-8' || substr(r, 4, 3) || '-' || substr(r, 7, 12),
             (h || '7' || substr(r, 1, 3) || '8' || substr(r, 4, 15))::uuid, to_timestamp(ms / 1000.0)
        FROM (SELECT p.id AS p, ms, lpad(to_hex(ms), 12, '0') AS h, lpad(to_hex(g + $((i * per))), 18, '0') AS r
                FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id,
                     generate_series(1, $per) g,
                     LATERAL (SELECT (extract(epoch FROM now() - interval '30 minutes') * 1000)::bigint + g::bigint * 1800000 / $per AS ms) t
               WHERE q.name = 'bench-dedup' AND p.name = 'p$i') ids"
  done
  "${psql[@]}" -c "VACUUM ANALYZE queen.push_dedup"
  echo "# filled and analyzed in $((SECONDS - filled)) s" >&2
  point "$dedupname" push 4 200000 -scenario push -queue bench-dedup -p 16
fi

for s in popack cycle; do
  for c in 1 4 16 64; do
    point "$s C=$c" "${s%ack}" "$c" $((c == 1 ? 150000 : 300000)) -scenario "$s"
  done
  point "$s P=1000" "${s%ack}" 4 300000 -scenario "$s" -p 1000
  # N = P * B: every partition holds one segment.
  point "$s P=10000" "${s%ack}" 4 1000000 -scenario "$s" -p 10000
done
point "stateget" stateget 4 30000 -scenario stateget
# Regent's worker end to end (regent-bench runs streamworker in process):
# against the cycle scenario at the same C and B, and the same limit.
for c in 4 16; do
  point "pipeline C=$c" cycle "$c" 300000 -scenario pipeline
done
# A table sink beside a sink queue: Regent's worker emitting one output per
# event (regent-bench -scenario emit), into a sink queue, and as rows of a
# table sink in mode append, written by the same cycles; the run verifies
# that the table holds N rows.
for sink in queue table; do
  point "emit sink=$sink C=4" cycle 4 200000 -scenario emit -sink "$sink" -database-url "$db"
done
# The work a user would recognise: 16 partitions, 1,000 keys, a tumbling
# minute's count and sum per key, N prefilled, folded by Regent's worker
# and by a stock-style worker of the same loop (test/stockworker), each
# with 4 fold loops, at batch 100 and 1000; each process's CPU per 1,000
# events is in the JSON line (cpu_ms_per_1000_msgs).
for b in 100 1000; do
  for w in worker stock; do
    s=$([ "$w" = worker ] && echo pipeline || echo stock)
    point "$w batch=$b" cycle 4 $((b == 100 ? 100000 : 400000)) -scenario "$s" -keys 1000 -p 16 -b "$b"
  done
done

if [ -n "$only" ] || [ -n "$citus" ]; then exit $((${#failed[@]} > 0)); fi

# What the broker stores for a request of 100 messages of 64 bytes, and for
# a cycle's sink item, so that the limit writes segments of the same size.
sizes=$("${psql[@]}" -At -F ' ' -c "SELECT round(avg(octet_length(body)) FILTER (WHERE frame_count = 100)),
  round(avg(octet_length(body)) FILTER (WHERE frame_count = 1 AND q.name LIKE '%.sink'))
  FROM queen.log_segments s JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id")
read -r bytes sinkbytes <<<"$sizes"
echo "# segments stored: $bytes bytes for 100 messages, $sinkbytes for a sink item" >&2

# The broker has done its part; the limit has the machine to itself.
kill "$brokerpid"
REGENT_BENCH_PG_PORT=$pgport REGENT_BENCH_LIMIT_SECONDS=$limitsecs REGENT_BENCH_SEGMENT_BYTES=$bytes \
  REGENT_BENCH_SINK_SEGMENT_BYTES=$sinkbytes "$root/hack/bench-limit.sh" | tee "$dir/limits.jsonl"

echo "# Each point as a fraction of its pgbench limit (median msgs/s; reads/s for stateget), and the broker's largest RSS:" >&2
while IFS=$'\t' read -r name limit c got rss; do
  max=$(jq -r --arg l "$limit" --argjson c "$c" 'select(.limit == $l and .clients == $c) | .msgs_per_sec' "$dir/limits.jsonl")
  if [ -z "$max" ] || [ "$got" = null ] || [ "$rss" = null ]; then
    echo "# $name: no figure" >&2
    continue
  fi
  printf '# %s: %s msgs/s = %s of the pgbench limit of %s msgs/s; broker RSS peak %.0f MB\n' "$name" \
    "$(commas "$(printf '%.0f' "$got")")" "$(awk "BEGIN {printf \"%.2f\", $got / $max}")" "$(commas "$max")" "$rss" >&2
done <"$dir/points"
if [ ${#failed[@]} -gt 0 ]; then
  echo "# failed: ${failed[*]}" >&2
  exit 1
fi
