package celldb

import (
	"context"
	"fmt"
	"time"
)

// SourceLoad is how loaded a query's source queue is: what the autoscaler
// needs beyond the lag.
type SourceLoad struct {
	// PartitionsBehind counts the source's partitions holding messages the
	// query's consumer group has not consumed: the most workers that can
	// have work at once.
	PartitionsBehind int64
	// LastPush is when a message was last pushed to the source; nil when
	// none ever was.
	LastPush *time.Time
	// OpenWindows counts the windows of the query's pipeline that its
	// workers have still to emit.
	OpenWindows int64
}

// WindowKeys name the state rows of a pipeline's windows: each open
// window's rows start with Prefix, and Clock is the row of the watermark
// (pipeline.Prefix and pipeline.ClockKey, which the seam does not import:
// the pipeline package brings Kubernetes' libraries into the broker).
type WindowKeys struct{ Prefix, Clock string }

// SourceLoad reads the load of the tenant's queue source for consumer group
// group (queen_streams.query_source_load), and the open windows of query
// (queen_streams.query_open_windows), in one round trip. A queue that does
// not exist yet has no load.
func (d *DB) SourceLoad(ctx context.Context, tenant, query, source, group string, windows WindowKeys) (SourceLoad, error) {
	var l SourceLoad
	err := d.pool.QueryRow(ctx, `SELECT l.partitions_behind, l.last_push,
       queen_streams.query_open_windows(p_tenant => $1, p_name => $4, p_prefix => $5, p_clock => $6)
  FROM queen_streams.query_source_load(p_tenant => $1, p_source => $2, p_group => $3) l`,
		tenant, source, group, query, windows.Prefix, windows.Clock).Scan(&l.PartitionsBehind, &l.LastPush, &l.OpenWindows)
	if err != nil {
		return l, fmt.Errorf("load of source %q of tenant %q: %w", source, tenant, err)
	}
	return l, nil
}
