// Package retention removes what the queue no longer keeps, as Queen's
// cleanup does (queue-admin-api.md §8):
//
//   - retention, for queues with retentionEnabled (the master switch):
//     messages older than retentionSeconds, consumed or not, and messages
//     older than completedRetentionSeconds that every cursor on their
//     partition has consumed;
//   - eviction, for queues with maxWaitTimeSeconds, whatever
//     retentionEnabled says: messages older than that, for every group,
//     without a dead letter, leased ones included;
//   - always: push dedup rows older than their queue's dedup window, and partitions
//     that hold no messages and saw no push or cursor activity for the
//     cleanup age, with their cursors; traces of messages that are gone,
//     and traces, analytics minutes, replica samples and retention events
//     older than --metrics-retention.
//
// The log is made of immutable segments, so a rule raises its partition's
// floor (queen.floors_to_raise, queen.raise_floors_v2): offsets below it
// are gone for pops, acks and lookups, and the segments wholly below it are
// dropped in chunks. Offsets then have gaps; pops and acks walk over them.
// A floor is a prefix, so eviction, which Queen applies from the lowest
// cursor on, also takes what every cursor had consumed below that: no
// cursor notices, but a group that subscribes afterwards does not get those
// messages, where Queen would keep them until retention.
//
// Floors are raised and segments dropped a shard at a time, each a call and
// a transaction of its own, which Citus sends whole to the shard's worker
// (on PostgreSQL, one call for the queue).
//
// Every replica runs a Sweeper; retention and eviction share one
// PostgreSQL advisory lock, so one sweep of either runs at a time across the
// cluster and the others skip their turn.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/pg/db"
)

// cleanupCap bounds the idle partitions one sweep deletes, as Queen's does.
const cleanupCap = 1000

// Settings are the sweeps' knobs (queue-admin-api.md §8 gives Queen's
// defaults).
type Settings struct {
	DedupWindow    time.Duration // how long a client transactionId is remembered
	RetentionChunk int           // rows one retention statement deletes (RETENTION_BATCH_SIZE)
	EvictionChunk  int           // rows one eviction statement deletes (EVICTION_BATCH_SIZE)
	CleanupAfter   time.Duration // idle age of an empty partition that goes (PARTITION_CLEANUP_DAYS)
	MetricsAge     time.Duration // how long traces, analytics minutes and samples are kept (--metrics-retention); 0 keeps them
}

// Sweeper sweeps periodically. It is safe for concurrent use.
type Sweeper struct {
	db       *db.DB
	log      *slog.Logger
	set      Settings
	announce func(queue, partition uuid.UUID)
}

// Stats is what one sweep removed. Aged, Consumed and Evicted count
// offsets (messages) that went below a floor; Segments the rows dropped.
type Stats struct {
	Aged, Consumed, Evicted int64
	Segments                int64
	Dedup                   int64
	Partitions              int64 // idle empty partitions deleted
	Traces                  int64 // traces of messages gone, or past MetricsAge
	Skipped                 bool  // another replica held the lock
}

// New returns a Sweeper. announce tells the hot lists that a partition
// whose lease a sweep ended may have messages to deliver
// (hotlist.Announcer.Announce).
func New(d *db.DB, log *slog.Logger, set Settings, announce func(queue, partition uuid.UUID)) *Sweeper {
	return &Sweeper{db: d, log: log, set: set, announce: announce}
}

// Run runs retention every retain and eviction every evict until ctx ends.
func (s *Sweeper) Run(ctx context.Context, retain, evict time.Duration) {
	rt := time.NewTicker(retain)
	defer rt.Stop()
	et := time.NewTicker(evict)
	defer et.Stop()
	for {
		var st Stats
		var err error
		select {
		case <-ctx.Done():
			return
		case <-rt.C:
			st, err = s.Sweep(ctx)
		case <-et.C:
			st, err = s.Evict(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("retention sweep failed", "err", err)
		case st.Evicted > 0:
			// Recorded: an evicted message was never delivered.
			s.log.Info("eviction sweep", "evicted_messages", st.Evicted, "segments", st.Segments)
		case st.Aged+st.Consumed+st.Dedup+st.Partitions > 0:
			s.log.Debug("retention sweep", "aged_messages", st.Aged, "consumed_messages", st.Consumed,
				"segments", st.Segments, "dedup_rows", st.Dedup, "idle_partitions", st.Partitions)
		}
	}
}

// Sweep runs one retention sweep now, unless another replica is sweeping.
func (s *Sweeper) Sweep(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.locked(ctx, &st, func(sw *db.Sweeping) error {
		for _, r := range []struct {
			rule     db.Rule
			kind     string
			consumed bool
			offsets  *int64
		}{
			{db.RetentionSeconds, "retention", false, &st.Aged},
			{db.CompletedRetentionSeconds, "completed_retention", true, &st.Consumed},
		} {
			if err := s.floors(ctx, sw, r.rule, r.kind, r.consumed, s.set.RetentionChunk, r.offsets, &st.Segments); err != nil {
				return fmt.Errorf("retention: %w", err)
			}
		}
		var err error
		if st.Dedup, err = sw.TrimDedup(ctx, s.set.DedupWindow, s.set.RetentionChunk); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		if st.Traces, err = sw.DeleteGoneTraces(ctx, s.set.MetricsAge); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		if s.set.MetricsAge > 0 {
			if err := sw.DeleteOldMinutes(ctx, s.set.MetricsAge); err != nil {
				return fmt.Errorf("retention: analytics: %w", err)
			}
		}
		if st.Partitions, err = sw.DeleteIdlePartitions(ctx, s.set.CleanupAfter, cleanupCap); err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		return nil
	})
	return st, err
}

// Evict runs one eviction sweep now, unless another replica is sweeping.
func (s *Sweeper) Evict(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.locked(ctx, &st, func(sw *db.Sweeping) error {
		if err := s.floors(ctx, sw, db.MaxWaitTimeSeconds, "eviction", false, s.set.EvictionChunk, &st.Evicted, &st.Segments); err != nil {
			return fmt.Errorf("eviction: %w", err)
		}
		return nil
	})
	return st, err
}

// locked runs sweep holding the sweeps' lock, or marks st skipped when
// another replica holds it.
func (s *Sweeper) locked(ctx context.Context, st *Stats, sweep func(*db.Sweeping) error) error {
	ran, err := s.db.Sweep(ctx, sweep)
	st.Skipped = !ran
	return err
}

// floors raises the floors of every queue that sets rule and drops the
// segments wholly below them in chunks, adding the offsets that went to
// offsets and the segments dropped to segments.
func (s *Sweeper) floors(ctx context.Context, sw *db.Sweeping, rule db.Rule, kind string, consumed bool, chunk int, offsets, segments *int64) error {
	queues, err := sw.Policies(ctx, rule)
	if err != nil {
		return err
	}
	for _, q := range queues {
		if err := s.raise(ctx, sw, q, kind, consumed, offsets); err != nil {
			return err
		}
		// Also after no floor rose: a sweep cut short may have left
		// segments.
		dropped, err := sw.DropBelowFloors(ctx, q.Queue, chunk)
		*segments += dropped
		if err != nil {
			return err
		}
	}
	return nil
}

// raise raises the floors of q's partitions that its rule raises, a shard
// (and a transaction) at a time, adding the offsets that went to offsets,
// announcing each partition whose lease a floor ended, and records what
// went under kind.
func (s *Sweeper) raise(ctx context.Context, sw *db.Sweeping, q db.Policy, kind string, consumed bool, offsets *int64) error {
	groups, err := sw.FloorsToRaise(ctx, q, consumed)
	if err != nil {
		return err
	}
	var raised []db.Floor
	for _, g := range groups {
		var floors []db.Floor
		if floors, err = sw.RaiseFloors(ctx, g); err != nil {
			break
		}
		for _, f := range floors {
			*offsets += f.Removed
			if f.Released {
				s.announce(q.Queue, f.Partition) // committed: each group's raise is a transaction of its own
			}
		}
		raised = append(raised, floors...)
	}
	// The floors raised before a failure stay raised, and are recorded.
	return errors.Join(err, sw.RecordRemoved(ctx, q.Queue, kind, raised))
}
