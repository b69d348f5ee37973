package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/regent-mq/regent/broker/segment"
)

// Item is one message to push.
type Item struct {
	Queue     string
	Partition string          // "" means Default
	Payload   json.RawMessage // raw JSON; nil is stored as null
	// TransactionID is the client's id for dedup; "" means the message id,
	// which is not recorded for dedup (it is unique by construction).
	TransactionID string
	TraceID       string
	MessageID     uuid.UUID // zero means a fresh UUIDv7
}

// Segment is the frames of one push request for one partition, packed for
// queen.log_push_one_v1.
type Segment struct {
	Partition                  *Partition
	Items                      []int // index in the request of each frame's item
	Frames                     []segment.Frame
	Body                       []byte
	Checksum                   uint64
	TxIDs                      []string // transaction id of each frame, in frame order
	MinCreatedAt, MaxCreatedAt time.Time
	// The client-supplied transaction ids among the frames, with their
	// message ids: the only ones recorded for dedup.
	DedupTxIDs  []string
	DedupMsgIDs []uuid.UUID

	// Set when a batch that holds Queue(b) is read: the base offset the
	// segment got, or, when it was not stored, the transaction ids already
	// recorded for the partition with their message ids.
	BaseOffset int64
	Dups       map[string]uuid.UUID
}

// Packed is the outcome of Pack.
type Packed struct {
	Segments []*Segment
	// DupOf[i] is the index of the earlier item of the request that item i
	// repeats (same partition, same client transaction id), or -1.
	DupOf []int
	// Parts[i] is item i's partition.
	Parts []*Partition
}

// PushSQL calls the allocator with the arguments of Segment.Args. It does
// not NOTIFY: the caller announces the partition after the commit
// (AfterPush).
const PushSQL = `SELECT base_offset, dup_txids, dup_message_ids
	FROM queen.log_push_one_v1($1, $2, $3, $4, $5, $6, $7, $8, $9, false)`

// Args are the arguments of PushSQL for g.
func (g *Segment) Args() []any {
	return []any{pgUUID(g.Partition.ID), len(g.Frames), g.Body, int64(g.Checksum), g.TxIDs,
		g.MinCreatedAt, g.MaxCreatedAt, g.DedupTxIDs, pgUUIDs(g.DedupMsgIDs)}
}

// Queue adds the call that stores g to b. Reading b's results sets
// g.BaseOffset and g.Dups; a partition deleted since it was resolved fails
// with an error wrapping ErrPartitionGone.
func (g *Segment) Queue(b *pgx.Batch) {
	b.Queue(PushSQL, g.Args()...).QueryRow(g.scan)
}

func (g *Segment) scan(row pgx.Row) error {
	var base *int64
	var txids []string
	var ids []uuid.UUID
	if err := row.Scan(&base, &txids, &ids); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "P0002" {
			return fmt.Errorf("push to partition %s: %w", g.Partition.ID, ErrPartitionGone)
		}
		return fmt.Errorf("push to partition %s: %w", g.Partition.ID, err)
	}
	g.Dups = nil
	if base == nil {
		g.BaseOffset = -1
		g.Dups = make(map[string]uuid.UUID, len(txids))
		for i, t := range txids {
			g.Dups[t] = ids[i]
		}
		return nil
	}
	g.BaseOffset = *base
	return nil
}

// Pack resolves every item's partition (creating what is missing) and packs
// the items into one segment per partition, in order of first appearance.
// producerSub is stamped on every frame.
func (s *Store) Pack(ctx context.Context, tenant, producerSub string, items []Item) (*Packed, error) {
	targets := make([]Target, 0, 1)
	targetOf := make([]int, len(items))
	seen := make(map[Target]int, 1)
	for i := range items {
		t := Target{tenant, items[i].Queue, items[i].Partition}
		if t.Partition == "" {
			t.Partition = DefaultPartition
		}
		j, ok := seen[t]
		if !ok {
			j = len(targets)
			seen[t] = j
			targets = append(targets, t)
		}
		targetOf[i] = j
	}
	parts, err := s.ResolveAll(ctx, targets)
	if err != nil {
		return nil, err
	}

	out := &Packed{
		Segments: make([]*Segment, len(parts)),
		DupOf:    make([]int, len(items)),
		Parts:    make([]*Partition, len(items)),
	}
	type txKey struct {
		seg  int
		txid string
	}
	var firstTx map[txKey]int
	now := time.Now().UnixMicro()
	sealFailed := false
	for i := range items {
		it := &items[i]
		j := targetOf[i]
		out.DupOf[i] = -1
		out.Parts[i] = parts[j]
		if it.TransactionID != "" {
			if firstTx == nil {
				firstTx = make(map[txKey]int)
			}
			k := txKey{j, it.TransactionID}
			if first, dup := firstTx[k]; dup {
				out.DupOf[i] = first
				continue
			}
			firstTx[k] = i
		}
		g := out.Segments[j]
		if g == nil {
			g = &Segment{Partition: parts[j]}
			out.Segments[j] = g
		}
		f := segment.Frame{
			ID:            it.MessageID,
			TransactionID: it.TransactionID,
			TraceID:       it.TraceID,
			ProducerSub:   producerSub,
			CreatedAt:     now,
			Payload:       it.Payload,
		}
		if f.ID == uuid.Nil {
			f.ID = newID()
		}
		if f.TransactionID == "" {
			f.TransactionID = f.ID.String()
		} else {
			g.DedupTxIDs = append(g.DedupTxIDs, f.TransactionID)
			g.DedupMsgIDs = append(g.DedupMsgIDs, f.ID)
		}
		if f.Payload == nil {
			f.Payload = jsonNull
		}
		if parts[j].Queue.EncryptionEnabled {
			if sealed, key, err := s.sealer.Seal(nil, f.Payload); err == nil {
				f.Payload, f.KeyID, f.Flags = sealed, key, segment.FlagSealed
			} else {
				s.metrics.EncryptionFailures.Inc()
				if !sealFailed {
					s.log.Warn("sealing a payload failed; storing it in plaintext",
						"queue", parts[j].Queue.Name, "err", err)
					sealFailed = true
				}
			}
		}
		g.Items = append(g.Items, i)
		g.Frames = append(g.Frames, f)
		g.TxIDs = append(g.TxIDs, f.TransactionID)
	}
	segs := out.Segments[:0]
	for _, g := range out.Segments {
		if g != nil { // nil only when every item of it repeated an earlier one
			g.encode()
			segs = append(segs, g)
		}
	}
	out.Segments = segs
	return out, nil
}

var jsonNull = json.RawMessage("null")

func (g *Segment) encode() {
	g.Body, g.Checksum = segment.Encode(g.Body[:0], g.Frames)
	g.MinCreatedAt, g.MaxCreatedAt = time.UnixMicro(g.Frames[0].CreatedAt), time.UnixMicro(g.Frames[0].CreatedAt)
	for i := range g.Frames {
		t := time.UnixMicro(g.Frames[i].CreatedAt)
		if t.Before(g.MinCreatedAt) {
			g.MinCreatedAt = t
		}
		if t.After(g.MaxCreatedAt) {
			g.MaxCreatedAt = t
		}
	}
}

// Repack drops from g the frames whose transaction ids are in g.Dups and
// re-encodes it. It returns false when no frame is left to push.
func (g *Segment) Repack() bool {
	keep := 0
	for i := range g.Frames {
		if _, dup := g.Dups[g.TxIDs[i]]; dup {
			continue
		}
		g.Frames[keep], g.Items[keep], g.TxIDs[keep] = g.Frames[i], g.Items[i], g.TxIDs[i]
		keep++
	}
	g.Frames, g.Items, g.TxIDs = g.Frames[:keep], g.Items[:keep], g.TxIDs[:keep]
	dk := 0
	for i, t := range g.DedupTxIDs {
		if _, dup := g.Dups[t]; !dup {
			g.DedupTxIDs[dk], g.DedupMsgIDs[dk] = t, g.DedupMsgIDs[i]
			dk++
		}
	}
	g.DedupTxIDs, g.DedupMsgIDs = g.DedupTxIDs[:dk], g.DedupMsgIDs[:dk]
	if keep == 0 {
		return false
	}
	g.encode()
	return true
}

// AfterPush does the bookkeeping of committed segments: per-queue counters,
// and the announcement of their partitions.
func (s *Store) AfterPush(segs []*Segment) {
	for _, g := range segs {
		if g.BaseOffset < 0 || len(g.Frames) == 0 {
			continue
		}
		q := g.Partition.Queue
		s.metrics.Pushed.WithLabelValues(q.Tenant, q.Name).Add(float64(len(g.Frames)))
		s.Announce(q.ID, g.Partition.ID)
	}
}
