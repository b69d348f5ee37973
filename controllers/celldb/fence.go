package celldb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A reset fence tells whether a reset has happened since the fence was put
// up. It is a state row of the query, and a reset deletes every state row of
// the query in the same transaction that rewrites the registration, so the
// fence is gone exactly when a reset has committed after it was placed.
//
// It lives under the nil partition id, which no real partition has (they
// are UUIDv7), so no state read or cycle, which always name a partition,
// ever sees it, and Progress leaves it out of the counts.
const (
	fencePartition = "00000000-0000-0000-0000-000000000000"
	fenceKey       = "regent.operator/reset-fence"
)

// PlaceResetFence puts up the fence for the tenant's query name, recording
// why in note. It reports false, placing nothing, when there is no such
// query: then there is no state to reset either.
func (d *DB) PlaceResetFence(ctx context.Context, tenant, name, note string) (bool, error) {
	var id string
	err := d.pool.QueryRow(ctx, `
INSERT INTO queen_streams.state AS s (query_id, partition_id, key, value)
SELECT q.id, $3, $4, jsonb_build_object('reset', $5::text)
  FROM queen_streams.queries q
 WHERE q.tenant = $1 AND q.name = $2
    ON CONFLICT (query_id, partition_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()
RETURNING s.query_id::text`, tenant, name, fencePartition, fenceKey, note).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("place reset fence of query %q of tenant %q: %w", name, tenant, err)
	}
	return true, nil
}

// ResetFenceStands reports whether the fence of the tenant's query name is
// still there, that is whether no reset has committed since it was placed.
func (d *DB) ResetFenceStands(ctx context.Context, tenant, name string) (bool, error) {
	var stands bool
	err := d.pool.QueryRow(ctx, `
SELECT EXISTS (
    SELECT 1 FROM queen_streams.state s JOIN queen_streams.queries q ON q.id = s.query_id
     WHERE q.tenant = $1 AND q.name = $2 AND s.partition_id = $3 AND s.key = $4)`,
		tenant, name, fencePartition, fenceKey).Scan(&stands)
	if err != nil {
		return false, fmt.Errorf("read reset fence of query %q of tenant %q: %w", name, tenant, err)
	}
	return stands, nil
}
