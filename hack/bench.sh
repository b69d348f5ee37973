#!/usr/bin/env bash
# `make bench`: regent-bench against a freshly started local broker, on a
# throwaway PostgreSQL with its default durability (synchronous_commit on),
# everything on this machine. Each scenario runs three times; each run prints
# one JSON line. Extra arguments go to every regent-bench call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pgport=${REGENT_BENCH_PG_PORT:-6651}
addr=${REGENT_BENCH_ADDR:-127.0.0.1:6652}
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

"${as_pg[@]}" "$pgbin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
"${as_pg[@]}" "$pgbin/postgres" -D "$dir/data" -p "$pgport" -k "$dir" -c listen_addresses=127.0.0.1 \
  -c max_connections=300 -c shared_buffers=512MB >"$dir/postgres.log" 2>&1 &
pids+=($!)
until "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pgport"; do sleep 0.2; done
db="postgres://postgres@127.0.0.1:$pgport/postgres?sslmode=disable"

"$root/bin/broker" --database-url "$db" --listen "$addr" --log-level warn >"$dir/broker.log" 2>&1 &
pids+=($!)
until curl -sf "http://$addr/health" >/dev/null; do sleep 0.2; done

bench() { "$root/bin/regent-bench" -url "http://$addr" -runs 3 "$@"; }
echo "# push: C=4 B=100 P=16 N=200000" >&2
bench -scenario push -c 4 -b 100 -p 16 -n 200000 "${@}"
echo "# popack: C=4 B=100 P=16 N=100000" >&2
bench -scenario popack -c 4 -b 100 -p 16 -n 100000 "${@}"
echo "# cycle: C=4 B=100 S=4 P=16 N=100000" >&2
bench -scenario cycle -c 4 -b 100 -p 16 -n 100000 "${@}"
echo "# stateget: C=4 N=20000 reads" >&2
bench -scenario stateget -c 4 -n 20000 "${@}"
