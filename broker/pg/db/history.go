package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// GroupLag is a consumer group's lag in one bucket: the largest sample of
// its minutes, since a lag is a gauge and its peak is what a chart must not
// hide.
type GroupLag struct {
	Bucket     time.Time
	Group      string
	Lag        int64
	LagSeconds float64
}

// GroupLag reads the lag of every group of the tenant's queue w.Queue over
// the window, in the analytics' buckets, by bucket then group. One
// statement: a range scan of group_minutes' primary key (tenant, queue,
// minute).
func (d *DB) GroupLag(ctx context.Context, tenant string, w Window) ([]GroupLag, error) {
	rows, err := d.q.Query(ctx, `SELECT `+bucketSQL("minute")+`, consumer_group, max(lag), max(lag_seconds)
		  FROM queen.group_minutes
		 WHERE tenant = $1 AND queue = $5 AND minute >= date_trunc('minute', $3::timestamptz) AND minute <= $4
		 GROUP BY 1, 2 ORDER BY 1, 2`, tenant, w.Width, w.From, w.To, w.Queue)
	if err != nil {
		return nil, fmt.Errorf("read the lag history of %q: %w", w.Queue, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[GroupLag])
	if err != nil {
		return nil, fmt.Errorf("read the lag history of %q: %w", w.Queue, err)
	}
	return out, nil
}

// QueryCycles are a stream query's cycles in one bucket, over replicas.
type QueryCycles struct {
	Bucket          time.Time
	Cycles, Refused int64
}

// QueryCycles reads the cycles of the tenant's query over the window, in
// the analytics' buckets. One statement: a range scan of query_minutes'
// primary key (tenant, query_id, minute).
func (d *DB) QueryCycles(ctx context.Context, tenant string, query uuid.UUID, w Window) ([]QueryCycles, error) {
	rows, err := d.q.Query(ctx, `SELECT `+bucketSQL("minute")+`, sum(cycles)::bigint, sum(refused)::bigint
		  FROM queen_streams.query_minutes
		 WHERE tenant = $1 AND query_id = $5 AND minute >= date_trunc('minute', $3::timestamptz) AND minute <= $4
		 GROUP BY 1 ORDER BY 1`, tenant, w.Width, w.From, w.To, ids.ID(query))
	if err != nil {
		return nil, fmt.Errorf("read the cycle history of query %s: %w", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueryCycles])
	if err != nil {
		return nil, fmt.Errorf("read the cycle history of query %s: %w", query, err)
	}
	return out, nil
}
