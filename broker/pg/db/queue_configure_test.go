package db_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db"
)

// The defaults of queue-api.md are the schema's column defaults, which a
// queue created by a push takes; configure reads them from there, so that
// no second copy can drift.
func TestQueueDefaultsAreTheSchemasColumnDefaults(t *testing.T) {
	f := newFixture(t)
	got, err := f.db.QueueDefaults(f.ctx)
	require.NoError(t, err)
	require.Equal(t, db.QueueOptions{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, TTL: 3600, Storage: "rows"}, got)

	f.exec(`ALTER TABLE queen.queues ALTER COLUMN lease_time SET DEFAULT 42,
		ALTER COLUMN dead_letter_queue SET DEFAULT true`)
	got, err = f.db.QueueDefaults(f.ctx)
	require.NoError(t, err)
	require.Equal(t, db.QueueOptions{LeaseTime: 42, RetryLimit: 3, RetryDelay: 1000, TTL: 3600, DeadLetterQueue: true, Storage: "rows"}, got)
}
