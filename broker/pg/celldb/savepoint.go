package celldb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Savepoint describes a savepoint of a query: a consistent copy of its
// state rows and of its consumer group's positions on the source, with the
// config hash and the pipeline they were folded by.
type Savepoint struct {
	Name       string
	TakenAt    time.Time
	ConfigHash string
	StateRows  int64
	Cursors    int32
}

// ErrNoSavepoint is returned when the query has no savepoint of that name.
var ErrNoSavepoint = errors.New("no such savepoint")

// TakeSavepoint copies the state of the tenant's query name and the
// positions of its consumer group, group, with pipeline (nil: none) into
// the savepoint called savepoint, in one transaction that no cycle falls
// inside (queen_streams.savepoint_take). A name already taken is not taken
// again: existed says so, and sp describes the earlier savepoint.
func (d *DB) TakeSavepoint(ctx context.Context, tenant, name, group, savepoint string, pipeline *string) (sp Savepoint, existed bool, err error) {
	var outcome string
	var at *time.Time
	var hash *string
	var rows *int64
	var cursors *int32
	err = d.pool.QueryRow(ctx, `SELECT outcome, taken_at, config_hash, state_rows, cursors
  FROM queen_streams.savepoint_take(p_tenant => $1, p_name => $2, p_group => $3, p_savepoint => $4, p_pipeline => $5)`,
		tenant, name, group, savepoint, pipeline).Scan(&outcome, &at, &hash, &rows, &cursors)
	if err == nil && outcome == "missing" {
		err = ErrNoQuery
	}
	if err != nil {
		return sp, false, fmt.Errorf("take savepoint %q of query %q of tenant %q: %w", savepoint, name, tenant, err)
	}
	return Savepoint{Name: savepoint, TakenAt: *at, ConfigHash: *hash, StateRows: *rows, Cursors: *cursors}, outcome == "exists", nil
}

// Savepoints lists the savepoints of the tenant's query name, newest first.
func (d *DB) Savepoints(ctx context.Context, tenant, name string) ([]Savepoint, error) {
	rows, err := d.pool.Query(ctx, `SELECT name, taken_at, config_hash, state_rows, cursors
  FROM queen_streams.savepoint_list(p_tenant => $1, p_name => $2)`, tenant, name)
	if err != nil {
		return nil, fmt.Errorf("list savepoints of query %q of tenant %q: %w", name, tenant, err)
	}
	defer rows.Close()
	var out []Savepoint
	for rows.Next() {
		var sp Savepoint
		if err := rows.Scan(&sp.Name, &sp.TakenAt, &sp.ConfigHash, &sp.StateRows, &sp.Cursors); err != nil {
			return nil, fmt.Errorf("list savepoints of query %q of tenant %q: %w", name, tenant, err)
		}
		out = append(out, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list savepoints of query %q of tenant %q: %w", name, tenant, err)
	}
	return out, nil
}

// PruneSavepoints drops the savepoints of the tenant's query name beyond
// the newest keep, and returns how many it dropped.
func (d *DB) PruneSavepoints(ctx context.Context, tenant, name string, keep int32) (int32, error) {
	var n int32
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.savepoint_prune(p_tenant => $1, p_name => $2, p_keep => $3)`,
		tenant, name, keep).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune savepoints of query %q of tenant %q to %d: %w", name, tenant, keep, err)
	}
	return n, nil
}

// deref is *p, or the zero value when p is nil: the 'already' answer of a
// restore whose savepoint has since been pruned has no row counts.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// Restored is what a restore did.
type Restored struct {
	// Already says that the restore of this token had committed before:
	// nothing changed now, and the rest describes that restore.
	Already    bool
	At         time.Time
	ConfigHash string  // the hash registered now, the savepoint's
	Pipeline   *string // the savepoint's pipeline, nil when it had none
	StateRows  int64
	Cursors    int32
}

// RestoreSavepoint puts back the state rows, the positions of the consumer
// group, group, and the config hash of the savepoint called savepoint of the
// tenant's query name, releasing the group's leases, in one transaction,
// once per token (queen_streams.savepoint_restore).
func (d *DB) RestoreSavepoint(ctx context.Context, tenant, name, group, savepoint, token string) (Restored, error) {
	var (
		rs      Restored
		outcome string
		at      *time.Time
		hash    *string
		rows    *int64
		cursors *int32
	)
	err := d.pool.QueryRow(ctx, `SELECT outcome, restored_at, config_hash, pipeline, state_rows, cursors
  FROM queen_streams.savepoint_restore(p_tenant => $1, p_name => $2, p_group => $3, p_savepoint => $4, p_token => $5)`,
		tenant, name, group, savepoint, token).Scan(&outcome, &at, &hash, &rs.Pipeline, &rows, &cursors)
	switch {
	case err != nil:
	case outcome == "missing":
		err = ErrNoQuery
	case outcome == "no_savepoint":
		err = ErrNoSavepoint
	}
	if err != nil {
		return rs, fmt.Errorf("restore savepoint %q of query %q of tenant %q: %w", savepoint, name, tenant, err)
	}
	rs.Already = outcome == "already"
	rs.At, rs.ConfigHash, rs.StateRows, rs.Cursors = deref(at), deref(hash), deref(rows), deref(cursors)
	return rs, nil
}

// Leases returns on how many source partitions of the tenant's query name
// its consumer group, group, holds a live lease.
func (d *DB) Leases(ctx context.Context, tenant, name, group string) (int32, error) {
	var n int32
	if err := d.pool.QueryRow(ctx, `SELECT queen_streams.query_leases(p_tenant => $1, p_name => $2, p_group => $3)`,
		tenant, name, group).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the live leases of query %q of tenant %q: %w", name, tenant, err)
	}
	return n, nil
}
