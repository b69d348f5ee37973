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
}

// SourceLoad reads the load of the tenant's queue source for consumer group
// group (queen_streams.query_source_load). A queue that does not exist yet
// has no load.
func (d *DB) SourceLoad(ctx context.Context, tenant, source, group string) (SourceLoad, error) {
	var l SourceLoad
	err := d.pool.QueryRow(ctx, `SELECT partitions_behind, last_push
  FROM queen_streams.query_source_load(p_tenant => $1, p_source => $2, p_group => $3)`,
		tenant, source, group).Scan(&l.PartitionsBehind, &l.LastPush)
	if err != nil {
		return l, fmt.Errorf("load of source %q of tenant %q: %w", source, tenant, err)
	}
	return l, nil
}
