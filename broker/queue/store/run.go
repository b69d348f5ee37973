package store

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/hotlist"
)

// Run feeds the hot list until ctx ends: a LISTEN for the log's NOTIFYs, and
// a reseed from the database every reseedEvery, which catches anything the
// notifications missed (a lease that expired, a lost connection). It also
// sends this replica's announcements.
func (s *Store) Run(ctx context.Context, reseedEvery time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		hotlist.Listen(ctx, s.db, s.hot, s.logger, s.reseedAll, s.log.ForgetQueueID)
	})
	wg.Go(func() { s.log.Run(ctx) })
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
			if err := s.seed(ctx, q, g); err != nil && ctx.Err() == nil {
				s.logger.Warn("hot list reseed failed", "queue_id", q, "group", g, "err", err)
			}
		}
	}
}

// seed adds to the hot list the partitions of queueID whose log reaches past
// group's cursor (or that the group has never read).
func (s *Store) seed(ctx context.Context, queueID uuid.UUID, group string) error {
	ids, err := s.db.HotPartitions(ctx, queueID, group)
	if err != nil {
		return err
	}
	s.hot.Seed(queueID, group, ids)
	return nil
}
