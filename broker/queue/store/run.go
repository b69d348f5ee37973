package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
		hotlist.Listen(ctx, s.pool.Config().ConnConfig.ConnString(), s.hot, s.logger, s.reseedAll, s.log.ForgetQueueID)
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
	rows, err := s.pool.Query(ctx, `SELECT p.id FROM queen.partitions p
		LEFT JOIN queen.cursors c ON c.partition_id = p.id AND c.consumer_group = $2
		WHERE p.queue_id = $1 AND p.next_offset > 0 AND p.next_offset > COALESCE(c.committed, 0)`, queueID, group)
	if err != nil {
		return fmt.Errorf("seed hot list: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("seed hot list: %w", err)
	}
	s.hot.Seed(queueID, group, ids)
	return nil
}
