package queuestore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/hotlist"
)

// Listen feeds the hot list the announcements of every replica (the log's
// NOTIFYs) until ctx ends.
func (s *Store) Listen(ctx context.Context) {
	hotlist.Listen(ctx, s.db, s.hot, s.logger, s.reseedAll, s.catalog.ForgetQueueID)
}

// Reseed reseeds the hot list from the database every reseedEvery until
// ctx ends, which catches anything the announcements missed (a lease that
// expired, a lost connection).
func (s *Store) Reseed(ctx context.Context, reseedEvery time.Duration) {
	t := time.NewTicker(reseedEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reseedAll(ctx)
		}
	}
}

func (s *Store) reseedAll(ctx context.Context) {
	for q, groups := range s.hot.Groups() {
		for _, g := range groups {
			if _, err := s.seed(ctx, q, g); err != nil && ctx.Err() == nil {
				s.logger.Warn("hot list reseed failed", "queue_id", q, "group", g, "err", err)
			}
		}
	}
}

// seed adds to the hot list the partitions of queueID whose log reaches past
// group's cursor (or that the group has never read), and reports whether it
// added any.
func (s *Store) seed(ctx context.Context, queueID uuid.UUID, group string) (bool, error) {
	ids, err := s.db.HotPartitions(ctx, queueID, group)
	if err != nil {
		return false, err
	}
	return s.hot.Seed(queueID, group, ids), nil
}
