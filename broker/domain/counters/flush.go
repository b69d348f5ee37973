package counters

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
)

// Settings are where the counts come from and how often they are flushed.
type Settings struct {
	Replica    string        // this replica's name: its pod name
	FlushEvery time.Duration // how often the counts go to the database
}

// QueueMinute is a queue's counts of one minute, as a flush adds them.
type QueueMinute struct {
	Tenant, Queue string
	Minute        int64 // Unix minutes
	N             [Fields]int64
	LagMax        int64
}

// QueryMinute is a stream query's cycles of one minute, as a flush adds
// them.
type QueryMinute struct {
	Tenant          string
	Query           uuid.UUID
	Minute          int64 // Unix minutes
	Cycles, Refused int64
}

// Store is where the counts and the samples go (broker/pg/db).
type Store interface {
	// AddMinutes adds the counts to the replica's rows, in one round trip.
	AddMinutes(ctx context.Context, replica string, queues []QueueMinute, queries []QueryMinute) error
	// RecordReplicaSample writes the sample of its minute.
	RecordReplicaSample(ctx context.Context, s Sample) error
}

// Run flushes the counts every FlushEvery and samples the parked
// long-polls every second, until ctx ends; then it flushes what is left.
// The retention sweep deletes old minutes (Sweep), one replica at a time.
func (c *Counters) Run(ctx context.Context, db Store, s Settings, log *slog.Logger) {
	flush := time.NewTicker(s.FlushEvery)
	defer flush.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	for {
		select {
		case <-ctx.Done():
			// The pool is closed only after Run returns: the last counts go.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := c.Flush(fctx, db, s.Replica); err != nil {
				log.Warn("analytics: flush counters at shutdown", "err", err)
			}
			cancel()
			return
		case <-second.C:
			c.sampleParked()
		case <-flush.C:
			if err := c.Flush(ctx, db, s.Replica); err != nil && ctx.Err() == nil {
				log.Warn("analytics: flush counters", "err", err)
			}
		}
	}
}

// Flush adds the counts so far to the replica's rows. Counts that fail to
// reach the database stay for the next flush.
func (c *Counters) Flush(ctx context.Context, db Store, replica string) error {
	taken, cyc := c.take()
	if len(taken) == 0 && len(cyc) == 0 {
		return nil
	}
	queues := make([]QueueMinute, 0, len(taken))
	for k, b := range taken {
		queues = append(queues, QueueMinute{Tenant: k.tenant, Queue: k.queue, Minute: k.minute, N: b.n, LagMax: b.lagMax})
	}
	queries := make([]QueryMinute, 0, len(cyc))
	for k, n := range cyc {
		queries = append(queries, QueryMinute{Tenant: k.tenant, Query: k.query, Minute: k.minute, Cycles: n[0], Refused: n[1]})
	}
	if err := db.AddMinutes(ctx, replica, queues, queries); err != nil {
		c.giveBack(taken, cyc)
		return err
	}
	return nil
}
