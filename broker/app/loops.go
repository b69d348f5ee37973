package app

import (
	"context"
	"sync"
)

// A loop is one of the broker's background loops: it runs until its ctx
// ends, and what it must finish (a last flush, a last announcement) it
// finishes before it returns.
type loop func(ctx context.Context)

// loops are the broker's background loops, all started by New in one call
// of start, on one context, and all stopped by Close:
//
//   - the hot list's LISTEN on the log's channel, and its periodic reseed
//     (queuestore's Listen and Reseed);
//   - the announcer (hotlist.Announcer), which sends the partitions that
//     pushes, acks and seeks made deliverable to the other replicas;
//   - the retention and eviction sweeps (retention);
//   - the system flags' LISTEN, and their periodic re-read (flags);
//   - the quotas' LISTEN, their periodic re-read with the usage record,
//     and the rate tokens' leases (quota);
//   - the consumer groups' backlog refresh (backlog);
//   - the analytics counters' flush, with the parked long-polls' sample,
//     and the replica's samples of its process (counters);
//   - the spool's drain (spool);
//   - the identity provider's JWK Set refresh (auth), with --jwks-url;
//   - on Citus, the shard map's refresh (db.WatchNodes), with --citus-route.
type loops struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs each loop in a goroutine of its own until stop.
func start(ctx context.Context, each []loop) *loops {
	ctx, cancel := context.WithCancel(ctx)
	l := &loops{cancel: cancel}
	for _, run := range each {
		l.wg.Go(func() { run(ctx) })
	}
	return l
}

// stop ends every loop and waits until each has returned.
func (l *loops) stop() {
	l.cancel()
	l.wg.Wait()
}
