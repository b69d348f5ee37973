package db

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/tracing"
)

// Ack is a cycle's source ack.
type Ack struct {
	LeaseID *uuid.UUID
	OK      bool   // a success status word, or none
	Count   *int64 // nil: the whole leased batch
	Release bool
}

// Cycle is one POST /streams/v1/cycle, its sink items already packed.
// Segments must be sorted by partition id (the lock order).
type Cycle struct {
	Tenant      string
	QueryID     uuid.UUID
	PartitionID uuid.UUID
	Group       string
	Ops         StateOps
	Segments    Segments
	Ack         *Ack // nil: an idle-flush cycle
	// Generation, when set, is the reset generation the worker registered
	// under: the cycle is refused once the query's has moved
	// (queen_streams.cycle_gate).
	Generation *int64
	// TableRows, when set, is a JSON array of objects: the rows the
	// committed cycle writes to the query's table sink
	// (queen_streams.cycle_table).
	TableRows json.RawMessage
	// Next, when set, asks for the source partition's next batch in the
	// same transaction (queen_streams.cycle_next_v2). Only with a success ack
	// of the whole batch (Ack.OK and Ack.Release).
	Next *Next
}

// Next is what a cycle's next batch is claimed with, as a pop's
// (PopCall): a lease id of its own, the batch and the byte cap.
type Next struct {
	LeaseID  uuid.UUID
	Batch    int
	MaxBytes int64
}

// StateOps are a cycle's state_ops folded to their effect: each key once,
// in one of the two lists, with the value of its last upsert.
type StateOps struct {
	Applied      int32 // how many ops the request carried
	UpsertKeys   []string
	UpsertValues []json.RawMessage // UpsertKeys[i]'s value
	DeleteKeys   []string
	// ExpectKeys are rows the cycle expects as the worker read them: with
	// the updated_at it read (ExpectAt[i]), or to exist at all (nil).
	ExpectKeys []string
	ExpectAt   []*time.Time
	// Refusal, when set, is why the cycle must fail: the first op that
	// breaks the rules. See CheckOwner.
	Refusal string
}

// CycleResult is what a cycle came to. When Duplicates or Gone is set,
// nothing was written.
type CycleResult struct {
	// Duplicates: sink segments carried client transaction ids already
	// recorded for their partitions: per partition, those ids and the
	// message ids they were recorded with. The caller repacks without them
	// and runs the cycle again.
	Duplicates Duplicates
	// Gone: a sink partition was deleted behind the caller's cache.
	Gone bool

	// The rest describes a committed cycle.
	QueueID       uuid.UUID // the source partition's queue
	QueueName     string
	BaseOffsets   []int64 // per segment, in the order of Cycle.Segments
	AckCount      int64
	LeaseReleased bool
	// Announce: the released source partition still holds data to deliver.
	Announce bool
	// Next is the source partition's next batch, claimed under
	// Cycle.Next.LeaseID, when the cycle asked for it and the partition had
	// one (LeaseReleased is then false); StateAt is when the cycle wrote
	// its state rows, their updated_at.
	Next    *PopClaim
	StateAt time.Time
}

// Committed reports whether the cycle committed.
func (r *CycleResult) Committed() bool { return r.Duplicates == nil && !r.Gone }

// StaleGeneration is the Code of a cycle refused for the reset generation
// it carried: the query was reset or restored since its worker registered.
const StaleGeneration = "streams.stale_generation"

// The Codes of a cycle refused for its table rows: they do not fit the
// query's table, or the query has no table sink. Bad input, not a rule of
// the seed's cycle.
const (
	SinkRows    = "streams.sink_rows"
	NoSinkTable = "streams.no_sink_table"
)

// Failure is a cycle refused by the rules: nothing of it committed.
// Message is meant for the client; Code names the rule, when the broker
// acts on it (Refused).
type Failure struct{ Message, Code string }

func (f *Failure) Error() string { return f.Message }

// flushDeferred prefixes the Code of an idle flush deferred by the rules
// (queen_streams.cycle_rules): the partition is not idle, or a row it deletes
// is gone or changed since it was read as ripe.
const flushDeferred = "streams.flush_deferred."

// DeferredLeased is the reason of a flush deferred while a worker holds the
// partition's live lease.
const DeferredLeased = "leased"

// Deferred reports whether the cycle was an idle flush the rules deferred,
// and the rule's reason (leased, unacknowledged, gone or changed). Nothing
// of it committed, and the worker loses nothing: the windows it would have
// emitted are still in the state.
func (f *Failure) Deferred() (reason string, ok bool) {
	return strings.CutPrefix(f.Code, flushDeferred)
}

// Duplicates maps a sink partition to the duplicate transaction ids and the
// message ids they were recorded with.
type Duplicates map[uuid.UUID]map[string]uuid.UUID

// The cycle's SQL passes the request as one queen_streams.cycle_request,
// built from its fields in the type's order (migration 0015): as a row of
// parameters, each sent in binary as pgx sends any other, it costs less to
// pass and read than the same request as jsonb. The table rows follow it,
// as the JSON they came in (NULL: none).
//
// The source partition comes first, the call's shard: on Citus the call
// goes whole to the worker that holds it (queen_streams.cycle_v7 and
// cycle_next_v2). A cycle with table rows calls queen_streams.cycle_v6 or
// cycle_next instead, which Citus runs on the coordinator, where the
// query's table is.
var (
	cycleSQL          = cycleCall(`queen_streams.cycle_v7($1, `, 2, false)
	cycleNextSQL      = cycleCall(`queen_streams.cycle_next_v2($1, `, 2, true)
	cycleTableSQL     = cycleCall(`queen_streams.cycle_v6(`, 1, false)
	cycleNextTableSQL = cycleCall(`queen_streams.cycle_next(`, 1, true)
)

// cycleCall is a call of a cycle function, fn up to its first argument
// (the shard, when delegated), followed by the request's 25 fields from
// parameter n, the table rows, and with next the next batch's lease id,
// batch and byte cap.
func cycleCall(fn string, n int, next bool) string {
	var b strings.Builder
	b.WriteString(`SELECT outcome, queue_id, queue_name, base_offsets, ack_count, lease_released, announce,
		partition_id, dup_txids, dup_message_ids`)
	if next {
		b.WriteString(`, state_at, partition_name, retry_at, batch_start, batch_end, base_offset, frame_count, body, checksum`)
	}
	b.WriteString(" FROM " + fn + "ROW(")
	for i := range 25 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "$%d", n)
		n++
	}
	b.WriteString(")::queen_streams.cycle_request")
	rest := 1
	if next {
		rest = 4
	}
	for range rest {
		fmt.Fprintf(&b, ", $%d", n)
		n++
	}
	b.WriteString(")")
	return b.String()
}

// RunCycle runs one cycle in one transaction and one round trip. A cycle
// the rules refuse is a *Failure. Any other error means the call itself
// failed, and nothing of it committed unless the connection died after the
// commit was sent. The caller announces the sink partitions, and the source
// when CycleResult.Announce says so, once it returns.
func (d *DB) RunCycle(ctx context.Context, c Cycle) (CycleResult, error) {
	ctx, span := tracing.StartDB(ctx, "cycle")
	r, err := d.runCycle(ctx, c)
	tracing.End(span, err)
	return r, err
}

func (d *DB) runCycle(ctx context.Context, c Cycle) (CycleResult, error) {
	a := c.Segments
	var (
		hasAck, ok, release bool
		lease               *[16]byte
		count               *int64
	)
	if c.Ack != nil {
		hasAck, ok, release, count = true, c.Ack.OK, c.Ack.Release, c.Ack.Count
		if c.Ack.LeaseID != nil {
			lease = (*[16]byte)(c.Ack.LeaseID)
		}
	}

	// Ids go as [16]byte, which pgx encodes directly; a uuid.UUID would go
	// through its driver.Valuer as a string, at a cost seen in profiles.
	args := []any{
		ids.ID(c.PartitionID), c.Tenant, ids.ID(c.QueryID), ids.ID(c.PartitionID), c.Group,
		c.Ops.UpsertKeys, c.Ops.UpsertValues, c.Ops.DeleteKeys, c.Ops.ExpectKeys, c.Ops.ExpectAt,
		a.Partitions, a.Frames, a.Bodies, a.Checksums, a.TxIDs, a.MinAt, a.MaxAt,
		a.Dedups, a.DedupTxIDs, a.DedupMsgIDs,
		hasAck, lease, ok, count, release, c.Generation, c.TableRows,
	}
	var r CycleResult
	var (
		outcome  string
		qid      pgtype.UUID
		qname    pgtype.Text
		ackCount pgtype.Int8
		released pgtype.Bool
		announce pgtype.Bool
		dupTx    []string
		dupIDs   []uuid.UUID
		next     *nextRows // with Cycle.Next only: a cycle without pays nothing for it
	)
	var pid pgtype.UUID
	scan := []any{&outcome, &qid, &qname, &r.BaseOffsets, &ackCount, &released, &announce, &pid, &dupTx, &dupIDs}
	sql := cycleSQL
	if c.Next != nil {
		sql, next = cycleNextSQL, &nextRows{}
		args = append(args, ids.ID(c.Next.LeaseID), c.Next.Batch, c.Next.MaxBytes)
		p := &next.row
		scan = append(scan, &next.stateAt, &p.name, &p.retryAt, &p.start, &p.end, &p.base, &p.count, &p.body, &p.sum)
	}
	q := d.on(c.PartitionID)
	if c.TableRows != nil {
		// Not delegated: no shard, and the query's table is the
		// coordinator's.
		sql, args, q = cycleTableSQL, args[1:], d.q
		if c.Next != nil {
			sql = cycleNextTableSQL
		}
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return CycleResult{}, refusal(err)
	}
	_, err = pgx.ForEachRow(rows, scan, func() error {
		switch outcome {
		case "committed":
			r.QueueID, r.QueueName, r.AckCount = qid.Bytes, qname.String, ackCount.Int64
			r.LeaseReleased, r.Announce = released.Bool, announce.Bool
			if next != nil {
				r.StateAt = next.stateAt.Time
			}
		case "duplicates":
			if r.Duplicates == nil {
				r.Duplicates = Duplicates{}
			}
			m := make(map[string]uuid.UUID, len(dupTx))
			for i, t := range dupTx {
				m[t] = dupIDs[i]
			}
			r.Duplicates[pid.Bytes] = m
		case "gone":
			r.Gone = true
		case "segment", "claimed", "busy", "empty":
			next.row.pid, next.row.outcome = pid.Bytes, outcome
			next.add(&next.row)
			next.row.body = nil // the segment keeps it
		default:
			return fmt.Errorf("unknown outcome %q", outcome)
		}
		return nil
	})
	if err != nil {
		return CycleResult{}, refusal(err)
	}
	if next != nil && len(next.claims) > 0 {
		r.Next = &next.claims[0]
	}
	return r, nil
}

// nextRows reads the columns that queen_streams.cycle_next_v2 adds: the
// state's updated_at, and the rows of its pop.
type nextRows struct {
	stateAt pgtype.Timestamptz
	row     popRow
	popRows
}

// CheckOwner gives the ownership verdicts of a cycle on the tenant's query
// and partition, as RunCycle would, without running one: a *Failure, or nil
// when both are the tenant's. A cycle whose state ops the broker refuses
// calls it, so that those verdicts come first.
func (d *DB) CheckOwner(ctx context.Context, tenant string, queryID, partitionID uuid.UUID) error {
	_, err := d.on(partitionID).Exec(ctx, `SELECT FROM queen_streams.cycle_owner(p_tenant => $1, p_query_id => $2, p_partition_id => $3)`,
		tenant, ids.ID(queryID), ids.ID(partitionID))
	if err != nil {
		return refusal(err)
	}
	return nil
}

// refusal turns a refusal the SQL raised into a *Failure; every other
// error stays as it is (a 500, or a 503 when the database is unreachable).
func refusal(err error) error {
	if r, ok := Refusal(err); ok {
		return &Failure{Message: r.Message, Code: r.Code}
	}
	return fmt.Errorf("run cycle: %w", err)
}
