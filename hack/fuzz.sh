#!/usr/bin/env bash
# Fuzz every target of one package in turn: go test fuzzes one target at a time.
# Usage: hack/fuzz.sh <test binary> <package dir> <fuzztime>
#
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is mid-input on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27). That failure writes no failing input,
# so a target that fails without writing one is run once more; a target that
# writes a failing input (testdata/fuzz/<target>/) fails at once.
set -u
bin=$1 dir=$2 fuzztime=$3
cache="$(go env GOCACHE)/fuzz/github.com/regent-mq/regent/${dir#./}"
cd "$dir" || exit 1

inputs() { ls "testdata/fuzz/$1" 2>/dev/null | wc -l; }
fuzz() {
	"$bin" -test.run '^$' -test.fuzz "^$1\$" -test.fuzztime "$fuzztime" -test.parallel 1 \
		-test.fuzzcachedir "${cache%/}"
}

failed=
for t in $("$bin" -test.list '^Fuzz' | grep '^Fuzz'); do
	echo "fuzz $t for $fuzztime"
	before=$(inputs "$t")
	fuzz "$t" && continue
	if [ "$(inputs "$t")" != "$before" ]; then
		failed="$failed $t"
		continue
	fi
	echo "fuzz $t failed without writing a failing input (go.dev/issue/75804): once more"
	fuzz "$t" || failed="$failed $t"
done
if [ -n "$failed" ]; then
	echo "fuzz targets that failed:$failed" >&2
	exit 1
fi
