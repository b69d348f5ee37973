package queuestore

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/pg/db"
)

// Configure creates or updates the queue name of tenant (the options as
// given) and makes sure its partition Default exists.
func (s *Store) Configure(ctx context.Context, tenant, name string, namespace, task *string, o *db.QueueOptions) (queueID, partitionID uuid.UUID, err error) {
	queueID, partitionID, err = s.db.ConfigureQueue(ctx, tenant, name, namespace, task, o)
	if err != nil {
		return uuid.Nil, uuid.Nil, fmt.Errorf("configure queue %q: %w", name, s.quotas.FromSQL(tenant, err))
	}
	s.catalog.Invalidate(tenant, name)
	return queueID, partitionID, nil
}

// QueueDefaults returns the options of a queue that sets none.
func (s *Store) QueueDefaults(ctx context.Context) (db.QueueOptions, error) {
	return s.db.QueueDefaults(ctx)
}

// DeleteQueue deletes the queue name of tenant with everything it holds,
// and reports whether it existed.
func (s *Store) DeleteQueue(ctx context.Context, tenant, name string) (bool, error) {
	deleted, err := s.db.DeleteQueue(ctx, tenant, name)
	if err != nil {
		return false, err
	}
	s.catalog.Invalidate(tenant, name)
	for _, id := range deleted {
		s.hot.Forget(id)
	}
	return len(deleted) > 0, nil
}
