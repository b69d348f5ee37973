package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/pg"
)

// History is a window of the per-minute history, in buckets of Width
// aligned to multiples of it from the Unix epoch, as the analytics routes
// roll queue_minutes up.
type History struct {
	From, To time.Time
	Width    time.Duration
}

// GroupLag is a consumer group's lag in one bucket: the largest sample of
// its minutes, since a lag is a gauge and its peak is what a chart must not
// hide.
type GroupLag struct {
	Bucket     time.Time
	Group      string
	Lag        int64
	LagSeconds float64
}

// GroupLag reads the lag of every group of the tenant's queue over the
// window, by bucket then group. One statement: a range scan of
// group_minutes' primary key (tenant, queue, minute).
func (d *DB) GroupLag(ctx context.Context, tenant, queue string, h History) ([]GroupLag, error) {
	rows, err := d.q.Query(ctx, `SELECT date_bin($3::interval, minute, '1970-01-01T00:00:00Z'), consumer_group, max(lag), max(lag_seconds)
		  FROM queen.group_minutes
		 WHERE tenant = $1 AND queue = $2 AND minute >= date_trunc('minute', $4::timestamptz) AND minute <= $5
		 GROUP BY 1, 2 ORDER BY 1, 2`, tenant, queue, h.Width, h.From, h.To)
	if err != nil {
		return nil, fmt.Errorf("read the lag history of %q: %w", queue, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[GroupLag])
	if err != nil {
		return nil, fmt.Errorf("read the lag history of %q: %w", queue, err)
	}
	return out, nil
}

// QueryCycles are a stream query's cycles in one bucket, over replicas.
type QueryCycles struct {
	Bucket          time.Time
	Cycles, Refused int64
}

// QueryCycles reads the cycles of the tenant's query over the window, by
// bucket. One statement: a range scan of query_minutes' primary key
// (tenant, query_id, minute).
func (d *DB) QueryCycles(ctx context.Context, tenant string, query uuid.UUID, h History) ([]QueryCycles, error) {
	rows, err := d.q.Query(ctx, `SELECT date_bin($3::interval, minute, '1970-01-01T00:00:00Z'), sum(cycles)::bigint, sum(refused)::bigint
		  FROM queen_streams.query_minutes
		 WHERE tenant = $1 AND query_id = $2 AND minute >= date_trunc('minute', $4::timestamptz) AND minute <= $5
		 GROUP BY 1 ORDER BY 1`, tenant, pg.ID(query), h.Width, h.From, h.To)
	if err != nil {
		return nil, fmt.Errorf("read the cycle history of query %s: %w", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueryCycles])
	if err != nil {
		return nil, fmt.Errorf("read the cycle history of query %s: %w", query, err)
	}
	return out, nil
}
