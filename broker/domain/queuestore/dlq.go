package queuestore

import (
	"context"

	"github.com/regent-mq/regent/broker/pg/db"
)

// DeadLetters returns the tenant's dead letters that f selects, newest
// first, their payloads opened, and how many there are in all.
func (s *Store) DeadLetters(ctx context.Context, f db.DeadLetterFilter) (int, []db.DeadLetter, error) {
	return s.db.DeadLetters(ctx, f, s.open)
}
