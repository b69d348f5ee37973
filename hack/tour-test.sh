#!/usr/bin/env bash
# Runs the README's quick tour as written against `make run`, as a new user would on a host
# without a network: on a copy of this checkout (uncommitted changes included), in a network
# namespace whose only interface is loopback, with a default route through it, so that
# everything stays on this machine. It fails on the first step of the tour that errors (bash -e,
# with pipefail), on any HTTP answer of 400 or more but the one 409 the tour shows, and when the
# tour's results are not what the README says. Needs root (unshare, ip) and a warm `make deps`:
# nothing can be downloaded in the namespace. `go test ./test/tour/` runs it.
# REGENT_TOUR_CITUS=1 runs it against `make run CITUS=1` instead, and then checks that the tour's
# data went to the Citus workers.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "tour-test: $*" >&2; }

if [ -z "${REGENT_TOUR_ISOLATED:-}" ]; then
  # PostgreSQL runs as the postgres user, which must reach its data under the copy.
  work=$(mktemp -d /tmp/regent-tour-XXXXXX)
  chmod 755 "$work"
  trap 'rm -rf "$work"' EXIT
  (cd "$root" && git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$work" -xf -
  say "running the tour in $work, in a network namespace with loopback alone"
  REGENT_TOUR_ISOLATED=1 unshare --net sh -c 'ip link set lo up && ip route add default dev lo && exec "$@"' \
    sh "$work/hack/tour-test.sh"
  exit
fi

cd "$root"
ip -brief address >&2
ip route >&2

# make run, in a process group of its own, so that Ctrl-C (SIGINT) can be sent to it as a
# terminal would.
setsid make run ${REGENT_TOUR_CITUS:+CITUS=1} >run.log 2>&1 &
run=$!
stop() {
  kill -INT -- "-$run" 2>/dev/null || true
  for _ in $(seq 120); do
    kill -0 -- "-$run" 2>/dev/null || return 0
    sleep 0.5
  done
  say "make run did not stop within 60 s of Ctrl-C; killing it"
  kill -KILL -- "-$run" 2>/dev/null || true
}
trap stop EXIT

say "waiting for make run (it builds bin/ first)"
for i in $(seq 900); do
  grep -q '^Regent is running' run.log && break
  if ! kill -0 "$run" 2>/dev/null || [ "$i" = 900 ]; then
    say "make run did not start:"
    cat run.log >&2
    exit 1
  fi
  sleep 1
done
say "make run is up"

# The tour: the README's block under "A quick tour", as written, after a curl that records
# each answer's status and refuses the unexpected ones.
statuses=$PWD/tour.statuses
{
  cat <<EOF
set -euo pipefail
curl() {
  local - hdr status
  set +x # the trace shows the tour's steps, not this
  hdr=\$(mktemp)
  command curl -D "\$hdr" "\$@" || { echo "tour-test: curl \$* failed (\$?)" >&2; return 1; }
  status=\$(awk 'NR == 1 { print \$2 }' "\$hdr")
  rm -f "\$hdr"
  echo "\$status" >>$statuses
  case \$status in
  2?? | 409) ;;
  *) echo "tour-test: HTTP \$status from curl \$*" >&2; return 1 ;;
  esac
}
set -x
EOF
  awk '/^## A quick tour/ { tour = 1 } tour && /^```sh$/ { in_block = 1; next } in_block && /^```$/ { exit } in_block' README.md
} >tour.sh
if ! bash tour.sh >tour.out; then
  say "the tour failed; its output:"
  cat tour.out >&2
  say "make run's output:"
  cat run.log >&2
  exit 1
fi
cat tour.out >&2

fail=0
want() {
  if ! grep -Eq -- "$2" tour.out; then
    say "the tour did not show $1 (no line matching $2)"
    fail=1
  fi
}
want "the cycle's state" '"count": 2'
want "clicks-per-page Ready with its query id" '^default +streamquery\.streams\.regent\.dev/clicks-per-page +default +clicks +clicks\.per_page +True .* [0-9a-f-]{36}$'
want "the pipeline sample Ready with its query id" '^default +streamquery\.streams\.regent\.dev/orders-revenue +default +orders +orders\.revenue +True .* [0-9a-f-]{36}$'
want "acme's sample Ready with its query id" '^acme-streams +streamquery\.streams\.regent\.dev/orders-per-minute +acme +orders +orders\.per_minute +True .* [0-9a-f-]{36}$'
want "the worker's window of /home" '^\{"key":"/home",.*"count":2\}$'
want "the worker's window of /docs" '^\{"key":"/docs",.*"count":1\}$'
want "acme's query to acme" '^\{"name":"orders\.per_minute","source_queue":"orders","query_id":"[0-9a-f-]{36}"\}$'
want "the default tenant's queries without acme's" '^\["clicks-per-page","orders-revenue","sales-per-region","tour\.count"\]$'
want "the table sink's row of eu, read with psql" '^ eu +\| [0-9: +-]+ +\| +2 +\| +15$'
want "the table sink's row of us, read with psql" '^ us +\| [0-9: +-]+ +\| +1 +\| +7$'
if [ "$(grep -c '^409$' "$statuses")" != 1 ]; then
  say "the tour answered 409 $(grep -c '^409$' "$statuses") times; the README shows it once"
  fail=1
fi
if [ -n "${REGENT_TOUR_CITUS:-}" ]; then
  # migrate placed the tables, and the partitions' shards are the workers', none the coordinator's.
  PG=postgres://postgres@127.0.0.1:6641/regent
  placed=$(psql -XAtq $PG -c 'SELECT count(*) FROM pg_dist_partition')
  shards=$(psql -XAtq $PG -c "SELECT string_agg(nodeport || ':' || n, ' ' ORDER BY nodeport)
    FROM (SELECT nodeport, count(*) AS n FROM citus_shards WHERE table_name = 'queen.partitions'::regclass GROUP BY 1) s")
  stored=$(psql -XAtq $PG -c 'SELECT count(*) FROM queen.log_segments')
  say "on Citus: $placed tables placed; queen.partitions' shards by node port: $shards; $stored segments stored"
  [ "$placed" -gt 0 ] || { say "no table is distributed"; fail=1; }
  [ "$shards" = "6642:16 6643:16" ] || { say "queen.partitions' shards are not 16 on each worker"; fail=1; }
  [ "$stored" -gt 0 ] || { say "the workers hold no segment of the tour's messages"; fail=1; }
fi
[ "$fail" = 0 ] || exit 1
say "the tour ran as written ($(wc -l <"$statuses") HTTP requests)"
