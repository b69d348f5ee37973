package db

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/tracing"
)

// QueueAck is one acknowledgement on the queue's routes.
type QueueAck struct {
	PartitionID   uuid.UUID
	TransactionID string
	Status        string // AckCompleted, AckFailed, AckDLQ or AckRetry
	LeaseID       uuid.UUID
	HasLease      bool // LeaseID was given, the nil UUID too
	Group         string
	Error         *string // kept with a dead letter
}

// AckResult is the outcome of one Ack, as the wire shows it.
type AckResult struct {
	Index         int       `json:"index"`
	TransactionID string    `json:"transactionId"`
	Success       bool      `json:"success"`
	Error         *string   `json:"error"`
	QueueName     *string   `json:"queueName"`
	PartitionName *string   `json:"partitionName"`
	LeaseReleased bool      `json:"leaseReleased"`
	DLQ           bool      `json:"dlq"`
	QueueID       uuid.UUID `json:"-"`
	// Announce: the release left data to deliver, and the database left
	// announcing it to the broker.
	Announce bool `json:"-"`
}

// answerColumns are the columns of the answer to one item, as queen.ack_v2 and
// queen.ack_cursor return them.
const answerColumns = `item, queue_id, success, error, queue_name, partition_name, lease_released, dlq, announce`

// answers scans the answerColumns of rows, then extra, into one reused
// set of destinations: an answer costs no allocation beyond its own, and
// the rows of one partition share their queue's and partition's names
// (an ack of 100 items scanned 400 strings and pointers for two names).
type answers struct {
	txids            []string // the acks' transaction ids, by index
	dest             []any
	r                AckResult
	item             int
	qid              pgtype.UUID
	queue, partition *string // the names of the last row
}

func newAnswers(txids []string, extra ...any) *answers {
	a := &answers{txids: txids}
	// The names are read raw (nil: NULL), not scanned.
	a.dest = append([]any{&a.item, &a.qid, &a.r.Success, &a.r.Error, nil, nil, &a.r.LeaseReleased, &a.r.DLQ, &a.r.Announce}, extra...)
	return a
}

func (a *answers) scan(row pgx.CollectableRow) (AckResult, error) {
	a.r = AckResult{}
	if err := row.Scan(a.dest...); err != nil {
		return AckResult{}, err
	}
	raw := row.RawValues()
	a.queue, a.partition = sameName(a.queue, raw[4]), sameName(a.partition, raw[5])
	r := a.r
	r.QueueName, r.PartitionName = a.queue, a.partition
	r.Index, r.TransactionID = a.item-1, a.txids[a.item-1]
	if a.qid.Valid {
		r.QueueID = a.qid.Bytes
	}
	return r, nil
}

// sameName is the text column raw as a *string: last when it says the same.
func sameName(last *string, raw []byte) *string {
	switch {
	case raw == nil:
		return nil
	case last != nil && *last == string(raw):
		return last
	}
	s := string(raw)
	return &s
}

// AckCursor applies the common case, acks all AckCompleted on one
// partition and group under one lease, set-based in queen.ack_cursor: one
// round trip.
func (d *DB) AckCursor(ctx context.Context, tenant string, acks []QueueAck) ([]AckResult, error) {
	ctx, span := tracing.StartDB(ctx, "ack")
	out, err := d.ackCursor(ctx, tenant, acks)
	tracing.End(span, err)
	return out, err
}

func (d *DB) ackCursor(ctx context.Context, tenant string, acks []QueueAck) ([]AckResult, error) {
	txids := make([]string, len(acks))
	for i, a := range acks {
		txids[i] = a.TransactionID
	}
	rows, err := d.on(acks[0].PartitionID).Query(ctx, `SELECT `+answerColumns+` FROM queen.ack_cursor(p_tenant => $1, p_partition_id => $2,
		p_group => $3, p_lease_id => $4, p_txids => $5)`, tenant, ids.ID(acks[0].PartitionID), acks[0].Group,
		pgtype.UUID{Bytes: acks[0].LeaseID, Valid: acks[0].HasLease}, txids)
	if err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	scan := newAnswers(txids)
	out, err := pgx.AppendRows(make([]AckResult, 0, len(acks)), rows, scan.scan)
	if err != nil {
		return nil, fmt.Errorf("ack: %w", err)
	}
	return out, nil
}

// Ack applies acks in order through queen.ack_v2, item by item in the
// database, for any mix of statuses and cursors: one round trip, and one
// more when some go to the dead letters, whose payloads only the broker can
// decode.
func (d *DB) Ack(ctx context.Context, tenant string, acks []QueueAck) ([]AckResult, error) {
	ctx, span := tracing.StartDB(ctx, "ack")
	out, err := d.ack(ctx, tenant, acks)
	tracing.End(span, err)
	return out, err
}

func (d *DB) ack(ctx context.Context, tenant string, acks []QueueAck) ([]AckResult, error) {
	n := len(acks)
	pids := make([][16]byte, n)
	groups := make([]string, n)
	txids := make([]string, n)
	statuses := make([]string, n)
	// No lease is the zero id and no error text is "": slices of plain
	// values encode without reflection, which NULL elements would need.
	leases := make([][16]byte, n)
	errs := make([]string, n)
	for i, a := range acks {
		pids[i], groups[i], txids[i], statuses[i] = ids.ID(a.PartitionID), a.Group, a.TransactionID, a.Status
		leases[i] = a.LeaseID
		if a.Error != nil {
			errs[i] = *a.Error
		}
	}
	// A call asks only for payloads not passed yet, and a frame found gone
	// is no message for the next one, so each call after the first asks for
	// items never asked for before: the loop ends, after two calls when
	// nothing changes meanwhile.
	key := shard(pids)
	args := []any{key, tenant, pids, groups, txids, statuses, leases, errs}
	on := d.on(key)
	var dl deadLetters
	asked := map[int32]bool{}
	for {
		out, frames, err := ackOnce(ctx, on, txids,
			append(slices.Clip(args), dl.items, ids.IDs(dl.ids), dl.payloads, dl.keys, dl.created))
		if err != nil {
			return nil, err
		}
		if len(frames) == 0 {
			return out, nil
		}
		for _, q := range frames {
			if asked[q.item] {
				return nil, fmt.Errorf("ack: queen.ack_v2 asked twice for the payload of item %d (partition %s offset %d)",
					q.item, acks[q.item-1].PartitionID, q.offset.Int64)
			}
			asked[q.item] = true
		}
		if err := dl.decode(frames, acks); err != nil {
			return nil, err
		}
	}
}

// ackOnce calls queen.ack_v2 once, on node: it answers every item, or asks
// for the payloads of dead letters that args lack.
func ackOnce(ctx context.Context, node Querier, txids []string, args []any) ([]AckResult, []frameRequest, error) {
	rows, err := node.Query(ctx, `SELECT `+answerColumns+`, frame_offset, segment_base, segment_frames, segment_body, segment_checksum
		FROM queen.ack_v2(p_shard => $1, p_tenant => $2, p_partition_ids => $3, p_groups => $4, p_txids => $5,
			p_statuses => $6, p_lease_ids => $7, p_errors => $8, p_dlq_items => $9, p_dlq_message_ids => $10,
			p_dlq_payloads => $11, p_dlq_key_ids => $12, p_dlq_created => $13)`, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("ack: %w", err)
	}
	defer rows.Close()
	var out []AckResult
	var frames []frameRequest
	var q frameRequest
	scan := newAnswers(txids, &q.offset, &q.base, &q.count, &q.body, &q.checksum)
	for rows.Next() {
		q = frameRequest{}
		r, err := scan.scan(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("ack: %w", err)
		}
		if q.offset.Valid {
			q.item = int32(r.Index + 1)
			frames = append(frames, q)
		} else {
			out = append(out, r)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("ack: %w", err)
	}
	return out, frames, nil
}

// frameRequest is queen.ack_v2 asking for the payload of a dead letter: the
// frame at offset, in the segment from base (its body only on the first
// request of each segment). No base: retention removed the segment.
type frameRequest struct {
	item     int32
	offset   pgtype.Int8
	base     pgtype.Int8
	count    pgtype.Int4
	body     []byte
	checksum pgtype.Int8
}

// deadLetters are the payloads of dead letters passed to queen.ack_v2, by item
// (1-based).
type deadLetters struct {
	items    []int32
	ids      []uuid.UUID
	payloads [][]byte
	keys     []pgtype.Int8
	created  []time.Time
}

// decode adds the frames asked for, decoding each segment once.
func (dl *deadLetters) decode(asked []frameRequest, acks []QueueAck) error {
	type segmentKey struct {
		partition uuid.UUID
		base      int64
	}
	segments := map[segmentKey][]segment.Frame{}
	for _, q := range asked {
		if !q.base.Valid {
			continue // the next call finds no message
		}
		pid := acks[q.item-1].PartitionID
		key := segmentKey{pid, q.base.Int64}
		frames, ok := segments[key]
		if !ok {
			var err error
			if frames, err = segment.Decode(q.body, uint64(q.checksum.Int64), int(q.count.Int32)); err != nil {
				return fmt.Errorf("ack: decode the segment of a dead letter (partition %s offset %d): %w", pid, q.offset.Int64, err)
			}
			segments[key] = frames
		}
		i := q.offset.Int64 - q.base.Int64
		if i < 0 || i >= int64(len(frames)) {
			return fmt.Errorf("ack: dead letter (partition %s offset %d) outside its segment", pid, q.offset.Int64)
		}
		f := &frames[i]
		var keyID pgtype.Int8
		if f.Sealed() {
			keyID = pgtype.Int8{Int64: int64(f.KeyID), Valid: true}
		}
		dl.items = append(dl.items, q.item)
		dl.ids = append(dl.ids, f.ID)
		dl.payloads = append(dl.payloads, f.Payload)
		dl.keys = append(dl.keys, keyID)
		dl.created = append(dl.created, time.UnixMicro(f.CreatedAt))
	}
	return nil
}
