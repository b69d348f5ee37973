package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// NewTrace is a trace to record against a message.
type NewTrace struct {
	ID                       uuid.UUID
	PartitionID              uuid.UUID
	TransactionID            string
	ConsumerGroup, EventType string
	Data                     json.RawMessage
	Names                    []string
	Worker                   string
}

// AddTrace records a trace against the tenant's message, and reports
// whether the message exists: queen.trace_add, one call, on Citus one
// command to the partition's worker, sent to it straight (Options.Route).
func (d *DB) AddTrace(ctx context.Context, tenant string, t NewTrace) (bool, error) {
	var found bool
	err := d.on(t.PartitionID).QueryRow(ctx, `SELECT queen.trace_add($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		t.PartitionID, tenant, t.TransactionID, t.ID, t.ConsumerGroup, t.EventType, t.Data, t.Worker, t.Names).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("record a trace: %w", err)
	}
	return found, nil
}

// Trace is a recorded trace; Queue, Partition and the frame are filled by
// the by-name read only.
type Trace struct {
	ID                       uuid.UUID
	PartitionID              uuid.UUID
	TransactionID            string
	EventType, ConsumerGroup string
	Worker                   string
	Data                     json.RawMessage
	CreatedAt                time.Time
	Names                    []string
	Queue, Partition         string
	// The segment that holds the message, when it is still stored, and
	// the message's offset in the partition.
	Offset   int64
	Base     *int64 // nil when the segment is gone; then so are the three below
	Count    *int32
	Body     []byte
	Checksum *int64
}

// maxMessageTraces bounds the traces of one message that a read returns.
const maxMessageTraces = 1000

// traceNamesSQL is a trace's names, sorted.
const traceNamesSQL = `coalesce((SELECT array_agg(n.name ORDER BY n.name) FROM queen.trace_names n
	WHERE n.partition_id = t.partition_id AND n.trace_id = t.id), '{}')`

// MessageTraces lists the traces of the tenant's message, oldest first, at
// most 1,000. One statement: traces (partition_id, transaction_id, id),
// with each trace's names by trace_names (partition_id, trace_id): on
// Citus one statement on the partition's shard.
func (d *DB) MessageTraces(ctx context.Context, tenant string, partition uuid.UUID, txid string) ([]Trace, error) {
	return collect(ctx, d, `SELECT t.id, t.event_type, t.data, t.consumer_group, t.worker_id, t.created_at, `+traceNamesSQL+`
		  FROM queen.traces t
		  JOIN queen.partitions p ON p.id = t.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id AND q.tenant = $1
		 WHERE t.partition_id = $2 AND t.transaction_id = $3
		 ORDER BY t.id LIMIT $4`, "read a message's traces", func(r pgx.CollectableRow) (Trace, error) {
		var t Trace
		return t, r.Scan(&t.ID, &t.EventType, &t.Data, &t.ConsumerGroup, &t.Worker, &t.CreatedAt, &t.Names)
	}, tenant, partition, txid, maxMessageTraces)
}

// TracesByName is a page of the tenant's traces that carry a name, oldest
// first, and how many carry it. Two statements: a count over the range of
// trace_names' primary key (tenant, name), and the page along it, each
// trace joined to its partition, queue, names and the segment that holds
// its message (log_segments' primary key). On Citus both run over every
// shard (an admin listing, off the hot path: CITUS.md), the page's rows
// joined within each shard, since a trace's names lie beside it.
func (d *DB) TracesByName(ctx context.Context, tenant, name string, limit, offset int) ([]Trace, int64, error) {
	var total int64
	if err := d.q.QueryRow(ctx, `SELECT count(*) FROM queen.trace_names WHERE tenant = $1 AND name = $2`, tenant, name).
		Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count traces by name: %w", err)
	}
	rows, err := d.q.Query(ctx, `SELECT t.id, t.partition_id, t.transaction_id, t.event_type, t.data, t.consumer_group,
			t.worker_id, t.created_at, `+traceNamesSQL+`, q.name, p.name, t.message_offset,
			sg.base_offset, sg.frame_count, sg.body, sg.checksum
		  FROM queen.trace_names tn
		  JOIN queen.traces t ON t.partition_id = tn.partition_id AND t.id = tn.trace_id
		  JOIN queen.partitions p ON p.id = t.partition_id
		  JOIN queen.queues q ON q.id = p.queue_id
		  LEFT JOIN LATERAL (SELECT s.base_offset, s.frame_count, s.body, s.checksum FROM queen.log_segments s
		                      WHERE s.partition_id = t.partition_id AND s.base_offset <= t.message_offset
		                      ORDER BY s.base_offset DESC LIMIT 1) sg ON sg.base_offset + sg.frame_count > t.message_offset
		 WHERE tn.tenant = $1 AND tn.name = $2
		 ORDER BY tn.trace_id LIMIT $3 OFFSET $4`, tenant, name, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("read traces by name: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Trace, error) {
		var t Trace
		return t, r.Scan(&t.ID, &t.PartitionID, &t.TransactionID, &t.EventType, &t.Data, &t.ConsumerGroup, &t.Worker,
			&t.CreatedAt, &t.Names, &t.Queue, &t.Partition, &t.Offset, &t.Base, &t.Count, &t.Body, &t.Checksum)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read traces by name: %w", err)
	}
	return out, total, nil
}

// TraceName is one name's figures.
type TraceName struct {
	Name             string
	Traces, Messages int64
	LastSeen         time.Time
}

// TraceNames is a page of the tenant's trace names, most recently seen
// first, and how many names there are. One statement: an aggregate over
// the tenant's range of trace_names (tenant, name), each joined to its
// trace; its cost grows with the tenant's traces, which retention bounds.
func (d *DB) TraceNames(ctx context.Context, tenant string, limit, offset int) ([]TraceName, int64, error) {
	rows, err := d.q.Query(ctx, `SELECT tn.name, count(*), count(DISTINCT (t.partition_id, t.transaction_id)),
			max(t.created_at), count(*) OVER ()
		  FROM queen.trace_names tn JOIN queen.traces t ON t.partition_id = tn.partition_id AND t.id = tn.trace_id
		 WHERE tn.tenant = $1
		 GROUP BY tn.name ORDER BY max(t.created_at) DESC, tn.name LIMIT $2 OFFSET $3`, tenant, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("read trace names: %w", err)
	}
	var total int64
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TraceName, error) {
		var n TraceName
		return n, r.Scan(&n.Name, &n.Traces, &n.Messages, &n.LastSeen, &total)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read trace names: %w", err)
	}
	if len(out) == 0 && offset > 0 {
		// A page past the end still says how many names there are.
		if err := d.q.QueryRow(ctx, `SELECT count(DISTINCT name) FROM queen.trace_names WHERE tenant = $1`, tenant).
			Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("count trace names: %w", err)
		}
	}
	return out, total, nil
}
