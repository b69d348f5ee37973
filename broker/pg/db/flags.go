package db

import (
	"context"
	"fmt"
)

// SystemFlags reads the cluster-wide switches named: whether each is on. A
// switch never set is off.
func (d *DB) SystemFlags(ctx context.Context, names ...string) ([]bool, error) {
	on := make([]bool, len(names))
	rows, err := d.q.Query(ctx, `SELECT coalesce(f.enabled, false)
		  FROM unnest($1::text[]) WITH ORDINALITY AS n (name, i)
		  LEFT JOIN queen.system_flags f ON f.name = n.name
		 ORDER BY n.i`, names)
	if err != nil {
		return nil, fmt.Errorf("read system flags: %w", err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		if err := rows.Scan(&on[i]); err != nil {
			return nil, fmt.Errorf("read system flags: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read system flags: %w", err)
	}
	return on, nil
}

// SetSystemFlag turns the switch name on or off and notifies channel, in
// one statement: the NOTIFY goes with the commit.
func (d *DB) SetSystemFlag(ctx context.Context, name string, on bool, channel string) error {
	_, err := d.q.Exec(ctx, `WITH up AS (
			INSERT INTO queen.system_flags (name, enabled) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET enabled = EXCLUDED.enabled, updated_at = EXCLUDED.updated_at
			RETURNING 1)
		SELECT pg_notify($3, '') FROM up`, name, on, channel)
	if err != nil {
		return fmt.Errorf("set system flag %s: %w", name, err)
	}
	return nil
}
