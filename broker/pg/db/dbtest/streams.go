package dbtest

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Grant gives a tenant an enabled streams quota grant whose cap on
// queries is max (nil: none), as the operator's TenantQuota would.
func (d *DB) Grant(ctx context.Context, tenant string, max *int) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen_streams.quota (tenant, enabled, max_queries) VALUES ($1, true, $2)
		ON CONFLICT (tenant) DO UPDATE SET enabled = true, max_queries = $2`, tenant, max)
	if err != nil {
		return fmt.Errorf("grant tenant %q a quota: %w", tenant, err)
	}
	return nil
}

// StreamQuery is a registered streams query, as stored.
type StreamQuery struct {
	Exists     bool
	Tenant     string
	Name       string
	Source     string
	Sink       *string // nil: the query has no sink
	ConfigHash string
	Suspended  bool
	// The table sink: its table (nil: none), key columns and mode.
	SinkTable *string
	SinkKeys  []string
	SinkMode  *string
}

// StreamQuery reads the query of that id. One that does not exist reads as
// the zero StreamQuery.
func (d *DB) StreamQuery(ctx context.Context, id string) (StreamQuery, error) {
	out := StreamQuery{Exists: true}
	err := d.pool.QueryRow(ctx, `SELECT tenant, name, source_queue, sink_queue, config_hash, suspended, sink_table, sink_keys, sink_mode
		  FROM queen_streams.queries WHERE id = $1`, id).
		Scan(&out.Tenant, &out.Name, &out.Source, &out.Sink, &out.ConfigHash, &out.Suspended, &out.SinkTable, &out.SinkKeys, &out.SinkMode)
	if errors.Is(err, pgx.ErrNoRows) {
		return StreamQuery{}, nil
	}
	if err != nil {
		return StreamQuery{}, fmt.Errorf("read query %s: %w", id, err)
	}
	return out, nil
}

// StreamQueries counts a tenant's queries called name.
func (d *DB) StreamQueries(ctx context.Context, tenant, name string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.queries WHERE tenant = $1 AND name = $2`, tenant, name).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the queries %q of tenant %q: %w", name, tenant, err)
	}
	return n, nil
}

// PutState writes a state row of a query's partition, as a committed
// cycle leaves it; value is JSON.
func (d *DB) PutState(ctx context.Context, queryID, partitionID, key, value string) error {
	_, err := d.pool.Exec(ctx, `INSERT INTO queen_streams.state (query_id, partition_id, key, value) VALUES ($1, $2, $3, $4)`,
		queryID, partitionID, key, value)
	if err != nil {
		return fmt.Errorf("put state %q of query %s: %w", key, queryID, err)
	}
	return nil
}

// State reads the state of a query's partition, JSON values by key; of
// every partition of the query, for the empty partitionID.
func (d *DB) State(ctx context.Context, queryID, partitionID string) (map[string]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT key, value::text FROM queen_streams.state
		 WHERE query_id = $1 AND ($2 = '' OR partition_id::text = $2)`, queryID, partitionID)
	if err != nil {
		return nil, fmt.Errorf("read the state of query %s: %w", queryID, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read the state of query %s: %w", queryID, err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the state of query %s: %w", queryID, err)
	}
	return out, nil
}

// StateRows counts a query's state rows, over all its partitions.
func (d *DB) StateRows(ctx context.Context, queryID string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, queryID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the state rows of query %s: %w", queryID, err)
	}
	return n, nil
}

// PlaceCursor puts a group's cursor on a partition of a tenant's queue at
// committed, as a consumer that had acknowledged that far would leave it.
func (d *DB) PlaceCursor(ctx context.Context, tenant, queue, partition, group string, committed int64) error {
	tag, err := d.pool.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, total_consumed)
		SELECT p.id, $4, $5, $5 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE q.tenant = $1 AND q.name = $2 AND p.name = $3
		ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = $5, total_consumed = $5`,
		tenant, queue, partition, group, committed)
	if err != nil {
		return fmt.Errorf("place the cursor of %s on %q/%s: %w", group, queue, partition, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("place the cursor of %s on %q/%s: no such partition", group, queue, partition)
	}
	return nil
}

// DropLeases clears every lease on a tenant's queue, as if none had been
// taken: unlike ExpireLeases, no lease is left to expire.
func (d *DB) DropLeases(ctx context.Context, tenant, queue string) error {
	_, err := d.pool.Exec(ctx, `UPDATE queen.cursors c SET lease_id = NULL, lease_expires_at = NULL
		  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
		 WHERE p.id = c.partition_id AND q.tenant = $1 AND q.name = $2`, tenant, queue)
	if err != nil {
		return fmt.Errorf("drop the leases of %q: %w", queue, err)
	}
	return nil
}

// ForgetCursors deletes every cursor of a tenant's queue, as if no group
// had ever consumed it.
func (d *DB) ForgetCursors(ctx context.Context, tenant, queue string) error {
	_, err := d.pool.Exec(ctx, `DELETE FROM queen.cursors c USING queen.partitions p, queen.queues q
		 WHERE p.id = c.partition_id AND q.id = p.queue_id AND q.tenant = $1 AND q.name = $2`, tenant, queue)
	if err != nil {
		return fmt.Errorf("forget the cursors of %q: %w", queue, err)
	}
	return nil
}

// SetConsumed sets the total a group's cursor on a partition of a
// tenant's queue has consumed, as that many acknowledged messages would.
func (d *DB) SetConsumed(ctx context.Context, tenant, queue, partition, group string, n int64) error {
	return d.setCursor(ctx, "total_consumed", "the consumed total", tenant, queue, partition, group, n)
}

// cycleLock is the advisory lock a cycle takes on its query and partition
// (queen_streams.cycle_owner), of $1 and $2.
const cycleLock = `hashtextextended($1::uuid::text || $2::uuid::text, 0)`

// HoldCycleLock takes the lock a running cycle holds on a query's
// partition, until release: a cycle of the pair meanwhile waits. It is
// taken as the cycles take it, in a statement on the partition's row, so
// that on Citus it is the lock of the node that holds the partition.
func (d *DB) HoldCycleLock(ctx context.Context, queryID, partitionID string) (release func() error, err error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("hold the cycle lock of query %s: %w", queryID, err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+cycleLock+`) FROM queen.partitions WHERE id = $2`, queryID, partitionID); err != nil {
		_ = tx.Rollback(ctx)
		return nil, fmt.Errorf("hold the cycle lock of query %s: %w", queryID, err)
	}
	return func() error { return tx.Rollback(context.WithoutCancel(ctx)) }, nil
}

// CycleLockWaiters counts the backends waiting for the cycle lock of a
// query's partition: of that pair only, so that tests sharing a database
// do not count each other's.
func (d *DB) CycleLockWaiters(ctx context.Context, queryID, partitionID string) (int, error) {
	var key int64
	if err := d.pool.QueryRow(ctx, `SELECT `+cycleLock, queryID, partitionID).Scan(&key); err != nil {
		return 0, fmt.Errorf("count the waiters for the cycle lock of query %s: %w", queryID, err)
	}
	// A bigint advisory key is split over classid (its high half) and
	// objid (its low half), with objsubid 1.
	n, err := d.countOnEveryNode(ctx, fmt.Sprintf(`SELECT count(*) FROM pg_locks
		 WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
		   AND classid = %d AND objid = %d`, uint32(uint64(key)>>32), uint32(key)))
	if err != nil {
		return 0, fmt.Errorf("count the waiters for the cycle lock of query %s: %w", queryID, err)
	}
	return n, nil
}

// BreakCycles replaces queen_streams.cycle_owner, which every cycle calls
// first, by one that fails with a division by zero, as a bad rollout
// would: every cycle of the database fails with an error that is not a
// refusal, for good.
func (d *DB) BreakCycles(ctx context.Context) error {
	_, err := d.pool.Exec(ctx, `CREATE OR REPLACE FUNCTION queen_streams.cycle_owner(
			p_tenant text, p_query_id uuid, p_partition_id uuid,
			OUT queue_id uuid, OUT queue_name text, OUT next_offset bigint)
		LANGUAGE plpgsql AS $$ BEGIN PERFORM 1 / 0; END $$`)
	if err != nil {
		return fmt.Errorf("break the cycles: %w", err)
	}
	return nil
}

// HideState renames queen_streams.state away, as a broken schema would:
// every read or write of any query's state fails, for good.
func (d *DB) HideState(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, `ALTER TABLE queen_streams.state RENAME TO state_moved`); err != nil {
		return fmt.Errorf("hide the state table: %w", err)
	}
	return nil
}
