package db

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// queueMinuteColumns are the queen.queue_minutes columns of the counters'
// fields, in the order of counters.Field.
var queueMinuteColumns = [counters.Fields]string{"push_requests", "push_messages", "pop_requests", "pop_messages",
	"pop_empty", "ack_requests", "ack_success", "ack_failed", "dead_lettered", "transactions", "lag_sum_ms",
	"lag_count", "parked_sum"}

// addQueueMinutes adds one row per (tenant, minute, queue) to the replica's
// rows: one statement for every queue and minute counted since the last
// flush.
var addQueueMinutes = func() string {
	var cols, params, sets strings.Builder
	for i, name := range append(queueMinuteColumns[:], "lag_max_ms") {
		fmt.Fprintf(&cols, ", %s", name)
		fmt.Fprintf(&params, ", $%d::bigint[]", i+5)
		set := "queue_minutes." + name + " + EXCLUDED." + name
		if name == "lag_max_ms" {
			set = "greatest(queue_minutes.lag_max_ms, EXCLUDED.lag_max_ms)"
		}
		fmt.Fprintf(&sets, ", %s = %s", name, set)
	}
	return `INSERT INTO queen.queue_minutes (tenant, minute, queue, replica` + cols.String() + `)
		SELECT u.tenant, to_timestamp(u.minute * 60), u.queue, $4` + strings.ReplaceAll(cols.String(), ", ", ", u.") + `
		  FROM unnest($1::text[], $2::bigint[], $3::text[]` + params.String() + `)
		       AS u (tenant, minute, queue` + cols.String() + `)
		ON CONFLICT (tenant, minute, queue, replica) DO UPDATE SET ` + strings.TrimPrefix(sets.String(), ", ")
}()

// addQueryMinutes adds one row per (tenant, query, minute) to the replica's.
const addQueryMinutes = `INSERT INTO queen_streams.query_minutes (tenant, query_id, minute, replica, cycles, refused)
	SELECT u.tenant, u.query_id, to_timestamp(u.minute * 60), $4, u.cycles, u.refused
	  FROM unnest($1::text[], $2::uuid[], $3::bigint[], $5::bigint[], $6::bigint[]) AS u (tenant, query_id, minute, cycles, refused)
	ON CONFLICT (tenant, query_id, minute, replica) DO UPDATE
	   SET cycles = query_minutes.cycles + EXCLUDED.cycles, refused = query_minutes.refused + EXCLUDED.refused`

// AddMinutes adds a flush of the counters to the replica's rows of
// queen.queue_minutes and queen_streams.query_minutes: one batch, one round
// trip, of at most two statements. It sorts queues and queries, so that two
// replicas that share a name never lock each other's rows in opposite
// orders.
func (d *DB) AddMinutes(ctx context.Context, replica string, queues []counters.QueueMinute, queries []counters.QueryMinute) error {
	if len(queues) == 0 && len(queries) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if len(queues) > 0 {
		batch.Queue(addQueueMinutes, queueMinuteArgs(queues, replica)...)
	}
	if len(queries) > 0 {
		batch.Queue(addQueryMinutes, queryMinuteArgs(queries, replica)...)
	}
	if err := d.q.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("flush %d queue minutes and %d query minutes: %w", len(queues), len(queries), err)
	}
	return nil
}

func queueMinuteArgs(queues []counters.QueueMinute, replica string) []any {
	slices.SortFunc(queues, func(a, b counters.QueueMinute) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Minute, b.Minute), cmp.Compare(a.Queue, b.Queue))
	})
	tenants, names := make([]string, len(queues)), make([]string, len(queues))
	minutes := make([]int64, len(queues))
	counts := make([][]int64, counters.Fields+1)
	for f := range counts {
		counts[f] = make([]int64, len(queues))
	}
	for i, q := range queues {
		tenants[i], minutes[i], names[i] = q.Tenant, q.Minute, q.Queue
		for f := range counters.Fields {
			counts[f][i] = q.N[f]
		}
		counts[counters.Fields][i] = q.LagMax
	}
	args := []any{tenants, minutes, names, replica}
	for _, col := range counts {
		args = append(args, col)
	}
	return args
}

func queryMinuteArgs(queries []counters.QueryMinute, replica string) []any {
	slices.SortFunc(queries, func(a, b counters.QueryMinute) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), bytes.Compare(a.Query[:], b.Query[:]), cmp.Compare(a.Minute, b.Minute))
	})
	tenants, queryIDs := make([]string, len(queries)), make([]uuid.UUID, len(queries))
	minutes, done, refused := make([]int64, len(queries)), make([]int64, len(queries)), make([]int64, len(queries))
	for i, q := range queries {
		tenants[i], queryIDs[i], minutes[i] = q.Tenant, q.Query, q.Minute
		done[i], refused[i] = q.Cycles, q.Refused
	}
	return []any{tenants, ids.IDs(queryIDs), minutes, replica, done, refused}
}

// RecordReplicaSample writes the replica's sample of its minute, with the
// pool's connections as they are now.
func (d *DB) RecordReplicaSample(ctx context.Context, s counters.Sample) error {
	st := d.PoolStats()
	_, err := d.q.Exec(ctx, `INSERT INTO queen.replica_samples (replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct,
			rss_bytes, virtual_bytes, pool_size, pool_idle, pool_active)
		VALUES ($1, date_trunc('minute', $2::timestamptz), $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (minute, replica) DO UPDATE SET sampled_at = EXCLUDED.sampled_at,
			cpu_user_pct = EXCLUDED.cpu_user_pct, cpu_sys_pct = EXCLUDED.cpu_sys_pct,
			rss_bytes = EXCLUDED.rss_bytes, virtual_bytes = EXCLUDED.virtual_bytes,
			pool_size = EXCLUDED.pool_size, pool_idle = EXCLUDED.pool_idle, pool_active = EXCLUDED.pool_active`,
		s.Replica, s.At, s.CPUUserPct, s.CPUSysPct, s.RSS, s.Virtual, st.TotalConns, st.IdleConns, st.AcquiredConns)
	if err != nil {
		return fmt.Errorf("write the replica sample: %w", err)
	}
	return nil
}
