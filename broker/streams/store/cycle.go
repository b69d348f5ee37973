package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/regent-mq/regent/broker/queue"
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
	Segments    []*queue.Segment
	Ack         *Ack // nil: an idle-flush cycle
}

// StateOps are a cycle's state_ops folded to their effect: each key once,
// in one of the two lists, with the value of its last upsert.
type StateOps struct {
	Applied      int32 // how many ops the request carried
	UpsertKeys   []string
	UpsertValues []json.RawMessage // UpsertKeys[i]'s value
	DeleteKeys   []string
	// Refusal, when set, is the message the procedure raises where it
	// applies the ops: the first op it must refuse.
	Refusal string
}

// CycleResult is what a committed cycle did.
type CycleResult struct {
	QueueID       uuid.UUID // the source partition's queue
	QueueName     string
	BaseOffsets   []int64 // per segment, in the order of Cycle.Segments
	AckCount      int64
	LeaseReleased bool
	// Announce: the released source partition still holds data to deliver.
	Announce bool
}

// Failure is a cycle the procedure refused: it raised, and the whole
// transaction rolled back. Message is PostgreSQL's, meant for the client.
type Failure struct{ Message string }

func (f *Failure) Error() string { return f.Message }

// Duplicates is a cycle refused because sink segments carried client
// transaction ids already recorded for their partitions: for each partition,
// the duplicate transaction ids and the message ids they were recorded
// with. Nothing committed; the caller repacks without them and runs the
// cycle again.
type Duplicates map[uuid.UUID]map[string]uuid.UUID

func (d Duplicates) Error() string {
	return fmt.Sprintf("duplicate transaction ids in %d sink partitions", len(d))
}

const cycleSQL = `SELECT queue_id, queue_name, base_offsets, ack_count, lease_released, announce
	FROM queen_streams.cycle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)`

// RunCycle runs one cycle in one transaction and one round trip. A refusal
// is a *Failure, or Duplicates; a sink partition deleted behind the cache is
// queue.ErrPartitionGone. Any other error means the call itself failed, and
// nothing of it committed unless the connection died after the commit was
// sent. The caller announces the sink partitions, and the source when
// CycleResult.Announce says so, once it returns.
func RunCycle(ctx context.Context, db DB, c Cycle) (CycleResult, error) {
	n := len(c.Segments)
	segPartitions := make([][16]byte, n)
	segFrames := make([]int32, n)
	segBodies := make([][]byte, n)
	segChecksums := make([]int64, n)
	segMin := make([]time.Time, n)
	segMax := make([]time.Time, n)
	segDedups := make([]int32, n)
	var txids, dedupTxIDs []string
	var dedupMsgIDs [][16]byte
	for i, g := range c.Segments {
		segPartitions[i], segFrames[i], segBodies[i], segChecksums[i] = g.Partition.ID, int32(len(g.Frames)), g.Body, int64(g.Checksum)
		segMin[i], segMax[i], segDedups[i] = g.MinCreatedAt, g.MaxCreatedAt, int32(len(g.DedupTxIDs))
		txids = append(txids, g.TxIDs...)
		dedupTxIDs = append(dedupTxIDs, g.DedupTxIDs...)
		for _, id := range g.DedupMsgIDs {
			dedupMsgIDs = append(dedupMsgIDs, id)
		}
	}
	var opError *string
	if c.Ops.Refusal != "" {
		opError = &c.Ops.Refusal
	}
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

	var r CycleResult
	var ackCount *int64
	// Ids go as [16]byte, which pgx encodes directly; a uuid.UUID would go
	// through its driver.Valuer as a string, at a cost seen in profiles.
	err := db.QueryRow(ctx, cycleSQL,
		c.Tenant, [16]byte(c.QueryID), [16]byte(c.PartitionID), c.Group,
		opError, c.Ops.UpsertKeys, c.Ops.UpsertValues, c.Ops.DeleteKeys,
		segPartitions, segFrames, segBodies, segChecksums, txids, segMin, segMax,
		segDedups, dedupTxIDs, dedupMsgIDs,
		hasAck, lease, ok, count, release,
	).Scan((*[16]byte)(&r.QueueID), &r.QueueName, &r.BaseOffsets, &ackCount, &r.LeaseReleased, &r.Announce)
	if err != nil {
		return CycleResult{}, refusal(err)
	}
	if ackCount != nil {
		r.AckCount = *ackCount
	}
	return r, nil
}

// refusal turns an error the procedure raised into a *Failure or
// Duplicates. Errors that say the call could not run (connection loss,
// shutdown, deadlock, resources) stay as they are: the client may retry.
func refusal(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return fmt.Errorf("run cycle: %w", err)
	}
	switch pg.Code {
	case "RGD01":
		var segs []struct {
			PartitionID uuid.UUID   `json:"partition_id"`
			TxIDs       []string    `json:"txids"`
			MessageIDs  []uuid.UUID `json:"message_ids"`
		}
		if jerr := json.Unmarshal([]byte(pg.Detail), &segs); jerr != nil {
			return fmt.Errorf("run cycle: read duplicates %q: %w", pg.Detail, jerr)
		}
		d := make(Duplicates, len(segs))
		for _, g := range segs {
			m := make(map[string]uuid.UUID, len(g.TxIDs))
			for i, t := range g.TxIDs {
				m[t] = g.MessageIDs[i]
			}
			d[g.PartitionID] = m
		}
		return d
	case "P0002":
		return fmt.Errorf("run cycle: %w", queue.ErrPartitionGone)
	}
	switch pg.Code[:2] {
	case "08", "40", "53", "54", "55", "57", "58", "F0", "XX":
		return fmt.Errorf("run cycle: %w", err)
	}
	return &Failure{Message: pg.Message}
}
