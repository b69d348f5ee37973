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
	// SinkTable is the query's table sink and what its cycles wrote;
	// null without one.
	SinkTable *SinkTableStatus `json:"sink_table"`
}

// SinkTableStatus is a query's table sink as the console shows it.
type SinkTableStatus struct {
	Schema     string   `json:"schema"`
	Table      string   `json:"table"`
	KeyColumns []string `json:"key_columns"`
	Mode       string   `json:"mode"`
	// Rows is the table's row count (null: the table is gone), exact up
	// to a million and the planner's estimate beyond (RowsEstimated).
	Rows          *int64 `json:"rows"`
	RowsEstimated bool   `json:"rows_estimated"`
	// Written is how many rows the query's cycles wrote, and LastWrite
	// when the last of them committed (null: none yet).
	Written   int64      `json:"written"`
	LastWrite *time.Time `json:"last_write"`
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
// The partitions' rows are read apart from the queries' and joined after:
// on Citus the partitions' tables are distributed, and no sub-select over
// them may refer to a row of the catalog's.
const queriesSQL = `WITH parts AS MATERIALIZED (
       SELECT q.id AS query_id, pa.id, pa.name, GREATEST(pa.next_offset - COALESCE(c.committed, 0), 0) AS lag,
              COALESCE(st.n, 0) AS state_rows
         FROM queen_streams.queries q
         JOIN queen.queues qu ON qu.tenant = q.tenant AND qu.name = q.source_queue
         JOIN queen.partitions pa ON pa.queue_id = qu.id
         LEFT JOIN queen.cursors c ON c.partition_id = pa.id AND c.consumer_group = 'streams.' || q.name
         LEFT JOIN (SELECT s.query_id, s.partition_id, count(*) AS n FROM queen_streams.state s
                     WHERE s.query_id IN (SELECT x.id FROM queen_streams.queries x WHERE x.tenant = $1)
                     GROUP BY s.query_id, s.partition_id) st ON st.query_id = q.id AND st.partition_id = pa.id
        WHERE q.tenant = $1),
     writes AS MATERIALIZED (
       SELECT sw.query_id, COALESCE(sum(sw.rows), 0)::bigint AS written, max(sw.written_at) AS last_write
         FROM queen_streams.sink_writes sw
        WHERE sw.query_id IN (SELECT x.id FROM queen_streams.queries x WHERE x.tenant = $1)
        GROUP BY sw.query_id)
SELECT q.id::text, q.name, q.source_queue, q.sink_queue, q.config_hash, q.reset_generation,
       q.created_at, q.updated_at, p.lag, p.state_rows, p.last_cycle,
       q.suspended, CASE WHEN isfinite(q.rewind_to) THEN q.rewind_to END, q.rewound_at, q.rewind_partitions,
       COALESCE((SELECT json_agg(json_build_object('partition_id', x.id, 'name', x.name, 'lag', x.lag, 'state_rows', x.state_rows)
                        ORDER BY x.name)
                   FROM parts x WHERE x.query_id = q.id), '[]'),
       q.sink_table, CASE WHEN q.sink_table IS NOT NULL THEN queen_streams.tenant_schema(q.tenant, NULL) END, q.sink_keys, q.sink_mode, t.rows, t.estimated,
       CASE WHEN q.sink_table IS NOT NULL THEN COALESCE(w.written, 0) END, CASE WHEN q.sink_table IS NOT NULL THEN w.last_write END
  FROM queen_streams.queries q
  LEFT JOIN LATERAL queen_streams.sink_table_rows(p_tenant => q.tenant, p_table => q.sink_table) t ON q.sink_table IS NOT NULL
  LEFT JOIN writes w ON w.query_id = q.id
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
		sinkTable, schema   *string
		mode                *string
		sink                SinkTableStatus
		estimated           *bool
		written             *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&q.ID, &q.Name, &q.SourceQueue, &q.SinkQueue, &q.ConfigHash, &q.ResetGeneration,
		&q.CreatedAt, &q.UpdatedAt, &q.Lag, &q.StateRows, &q.LastCycle,
		&q.Suspended, &rewindTo, &rewoundAt, &rewindPartitions, &parts,
		&sinkTable, &schema, &sink.KeyColumns, &mode, &sink.Rows, &estimated, &written, &sink.LastWrite}, func() error {
		q.Partitions, q.LastRewind, q.SinkTable = nil, nil, nil
		if sinkTable != nil {
			t := sink
			t.Table, t.Schema, t.Mode, t.RowsEstimated, t.Written = *sinkTable, *schema, *mode, estimated != nil && *estimated, *written
			if t.LastWrite != nil {
				at := t.LastWrite.UTC()
				t.LastWrite = &at
			}
			q.SinkTable = &t
		}
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
