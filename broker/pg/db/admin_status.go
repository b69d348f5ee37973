package db

import (
	"context"
	"fmt"
)

// Ping sends the cheapest statement there is, for the status route that
// says whether the database answers: one round trip on a pooled
// connection, which it also proves usable.
func (d *DB) Ping(ctx context.Context) error {
	var one int
	if err := d.q.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("ping the database: %w", err)
	}
	return nil
}
