package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Query is a registered stream query and what it has done, for the
// console: the StreamQuery status the operator writes, read from the same
// function, plus the source partitions the state browser addresses. Its
// names are snake_case, as on the three /streams/v1 POST routes: query_id
// and partition_id are what state/get and cycle take.
type Query struct {
	ID              string     `json:"query_id"`
	Name            string     `json:"name"`
	SourceQueue     string     `json:"source_queue"`
	SinkQueue       *string    `json:"sink_queue"`
	ConfigHash      string     `json:"config_hash"`
	ResetGeneration int64      `json:"reset_generation"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	Lag             int64      `json:"lag"`
	StateRows       int64      `json:"state_rows"`
	LastCycle       *time.Time `json:"last_cycle"`
	// Suspended and LastRewind are the StreamQuery's spec.suspend and its
	// last rewind-to annotation, as the operator applied them to the row.
	Suspended  bool             `json:"suspended"`
	LastRewind *Rewind          `json:"last_rewind"`
	Partitions []QueryPartition `json:"partitions"`
}

// Rewind is a query's last rewind: the time it rewound to (null: the
// beginning), when, and the source partitions whose cursor it moved.
type Rewind struct {
	To         *time.Time `json:"to"`
	At         time.Time  `json:"at"`
	Partitions int        `json:"partitions"`
}

// QueryPartition is a partition of a query's source queue: its lag behind
// the query's group and its state shard's size.
type QueryPartition struct {
	ID        string `json:"partition_id"`
	Name      string `json:"name"`
	Lag       int64  `json:"lag"`
	StateRows int64  `json:"state_rows"`
}

// The query's workers pop its source as the group streams.<name>, the
// group the operator reads the same progress for (Cell.Progress).
const queriesSQL = `SELECT q.id::text, q.name, q.source_queue, q.sink_queue, q.config_hash, q.reset_generation,
       q.created_at, q.updated_at, p.lag, p.state_rows, p.last_cycle,
       q.suspended, CASE WHEN isfinite(q.rewind_to) THEN q.rewind_to END, q.rewound_at, q.rewind_partitions,
       COALESCE((SELECT json_agg(json_build_object(
                        'partition_id', pa.id, 'name', pa.name,
                        'lag', GREATEST(pa.next_offset - COALESCE(c.committed, 0), 0),
                        'state_rows', (SELECT count(*) FROM queen_streams.state s
                                       WHERE s.query_id = q.id AND s.partition_id = pa.id))
                        ORDER BY pa.name)
                   FROM queen.queues qu
                   JOIN queen.partitions pa ON pa.queue_id = qu.id
                   LEFT JOIN queen.cursors c ON c.partition_id = pa.id AND c.consumer_group = 'streams.' || q.name
                  WHERE qu.tenant = q.tenant AND qu.name = q.source_queue), '[]')
  FROM queen_streams.queries q
 CROSS JOIN LATERAL queen_streams.query_progress_v2(
        p_tenant => q.tenant, p_name => q.name, p_group => 'streams.' || q.name, p_source => q.source_queue) p
 WHERE q.tenant = $1
 ORDER BY q.name`

// Queries lists the tenant's stream queries by name.
func (d *DB) Queries(ctx context.Context, tenant string) ([]Query, error) {
	rows, err := d.q.Query(ctx, queriesSQL, tenant)
	if err != nil {
		return nil, fmt.Errorf("list stream queries of tenant %q: %w", tenant, err)
	}
	out := []Query{}
	var (
		q                   Query
		parts               []byte
		rewindTo, rewoundAt *time.Time
		rewindPartitions    *int
	)
	_, err = pgx.ForEachRow(rows, []any{&q.ID, &q.Name, &q.SourceQueue, &q.SinkQueue, &q.ConfigHash, &q.ResetGeneration,
		&q.CreatedAt, &q.UpdatedAt, &q.Lag, &q.StateRows, &q.LastCycle,
		&q.Suspended, &rewindTo, &rewoundAt, &rewindPartitions, &parts}, func() error {
		q.Partitions, q.LastRewind = nil, nil
		if rewoundAt != nil {
			q.LastRewind = &Rewind{At: rewoundAt.UTC()}
			if rewindTo != nil {
				to := rewindTo.UTC()
				q.LastRewind.To = &to
			}
			if rewindPartitions != nil {
				q.LastRewind.Partitions = *rewindPartitions
			}
		}
		q.CreatedAt, q.UpdatedAt = q.CreatedAt.UTC(), q.UpdatedAt.UTC()
		if q.LastCycle != nil {
			t := q.LastCycle.UTC()
			q.LastCycle = &t
		}
		if err := json.Unmarshal(parts, &q.Partitions); err != nil {
			return fmt.Errorf("decode partitions of query %q: %w", q.Name, err)
		}
		out = append(out, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list stream queries of tenant %q: %w", tenant, err)
	}
	return out, nil
}
