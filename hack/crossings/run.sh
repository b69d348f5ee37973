#!/bin/sh
# Counts the package crossings of the four write paths of the checkout this
# script is in (or of DIR): hack/crossings/run.sh [DIR]. -v prints each call.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../..}
cd "$here"
go run . -dir "$dir" -entry '(*github.com/regent-mq/regent/broker/api/streams.Service).cycle;(*github.com/regent-mq/regent/broker/api/queue.Handler).handlePush;(*github.com/regent-mq/regent/broker/api/queue.Handler).handleTransaction;(*github.com/regent-mq/regent/broker/domain/spool.Spool).push'
