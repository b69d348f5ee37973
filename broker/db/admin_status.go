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

// PoolConns are this replica's connections to PostgreSQL, all of them and
// the idle ones, as the pool counts them now; no round trip.
func (d *DB) PoolConns() (total, idle int32) {
	s := d.pool.Stat()
	return s.TotalConns(), s.IdleConns()
}
