package produce

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/segment"
	"github.com/regent-mq/regent/broker/pg/db"
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
	// Traceparent is the W3C trace context the message carries to its
	// consumer; "" for none.
	Traceparent string
}

// Trace stamps traceparent, a W3C trace context, on items, to be stored
// with them and handed to their consumers; "" stamps nothing. Nor does a
// producer without StoreTraceparent: a frame that carries one is corrupt to
// the decoder of a release before it, so a rolling upgrade keeps it off
// until no older broker shares the database.
func (l *Producer) Trace(items []Item, traceparent string) {
	if traceparent == "" || !l.traceparents {
		return
	}
	for i := range items {
		items[i].Traceparent = traceparent
	}
}

// Segment is the frames of one push request for one partition, packed for
// queen.log_push_one_v1.
type Segment struct {
	Partition                  *catalog.Partition
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

	// BaseOffset is the offset the segment was stored at, once it was.
	BaseOffset int64
}

// Packed is the outcome of Pack.
type Packed struct {
	Segments []*Segment
	// DupOf[i] is the index of the earlier item of the request that item i
	// repeats (same partition, same client transaction id), or -1.
	DupOf []int
	// Parts[i] is item i's partition.
	Parts []*catalog.Partition
	// Stored[i] is the message the database already held under item i's
	// transaction id (see Drop).
	Stored map[int]Pushed
}

// args lays segs out for the database. They must be sorted by partition id,
// the lock order (sortSegments).
func args(segs []*Segment) db.Segments {
	n := len(segs)
	a := db.Segments{
		Partitions: make([][16]byte, n), Frames: make([]int32, n), Bodies: make([][]byte, n),
		Checksums: make([]int64, n), MinAt: make([]time.Time, n), MaxAt: make([]time.Time, n),
		Dedups: make([]int32, n),
	}
	for i, g := range segs {
		a.Partitions[i], a.Frames[i], a.Bodies[i], a.Checksums[i] = g.Partition.ID, int32(len(g.Frames)), g.Body, int64(g.Checksum)
		a.MinAt[i], a.MaxAt[i], a.Dedups[i] = g.MinCreatedAt, g.MaxCreatedAt, int32(len(g.DedupTxIDs))
		a.TxIDs = append(a.TxIDs, g.TxIDs...)
		a.DedupTxIDs = append(a.DedupTxIDs, g.DedupTxIDs...)
		for _, id := range g.DedupMsgIDs {
			a.DedupMsgIDs = append(a.DedupMsgIDs, id)
		}
	}
	return a
}

// sortSegments sorts segs by partition id, PostgreSQL's uuid order: the
// order queen.log_push_one_v1 locks their partitions in. It is stable, so
// that one partition's segments of a joined call take their offsets in
// request order.
func sortSegments(segs []*Segment) {
	slices.SortStableFunc(segs, func(a, b *Segment) int { return bytes.Compare(a.Partition.ID[:], b.Partition.ID[:]) })
}

// Pack resolves every item's partition (creating what is missing, beside
// near when it is set: catalog.Target) and packs the items into one
// segment per partition, in order of first appearance. producerSub is
// stamped on every frame.
func (l *Producer) Pack(ctx context.Context, tenant, producerSub string, near uuid.UUID, items []Item) (*Packed, error) {
	targets := make([]catalog.Target, 0, 1)
	targetOf := make([]int, len(items))
	seen := make(map[catalog.Target]int, 1)
	// Each segment's slices are made at their final size: grown by append,
	// they were a fifth of the bytes a push allocates.
	type count struct{ items, txids int }
	var counts []count
	txids := 0
	for i := range items {
		t := catalog.Target{Tenant: tenant, Queue: items[i].Queue, Partition: items[i].Partition, Near: near}
		if t.Partition == "" {
			t.Partition = catalog.DefaultPartition
		}
		j, ok := seen[t]
		if !ok {
			j = len(targets)
			seen[t] = j
			targets = append(targets, t)
			counts = append(counts, count{})
		}
		targetOf[i] = j
		counts[j].items++
		if items[i].TransactionID != "" {
			counts[j].txids++
			txids++
		}
	}
	parts, err := l.catalog.ResolveAll(ctx, targets)
	if err != nil {
		// A new queue past the tenant's maxQueues is refused in the batch.
		return nil, l.quotas.FromSQL(tenant, err)
	}

	out := &Packed{
		Segments: make([]*Segment, len(parts)),
		DupOf:    make([]int, len(items)),
		Parts:    make([]*catalog.Partition, len(items)),
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
				firstTx = make(map[txKey]int, txids)
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
			n := counts[j]
			g = &Segment{Partition: parts[j], Items: make([]int, 0, n.items), Frames: make([]segment.Frame, 0, n.items),
				TxIDs: make([]string, 0, n.items), DedupTxIDs: make([]string, 0, n.txids), DedupMsgIDs: make([]uuid.UUID, 0, n.txids)}
			out.Segments[j] = g
		}
		f := segment.Frame{
			ID:            it.MessageID,
			TransactionID: it.TransactionID,
			TraceID:       it.TraceID,
			Traceparent:   it.Traceparent,
			ProducerSub:   producerSub,
			CreatedAt:     now,
			Payload:       it.Payload,
		}
		if f.ID == uuid.Nil {
			f.ID = ids.New()
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
			if sealed, key, err := l.sealer.Seal(nil, f.Payload); err == nil {
				f.Payload, f.KeyID, f.Flags = sealed, key, segment.FlagSealed
			} else {
				l.metrics.EncryptionFailures.Inc()
				if !sealFailed {
					l.logger.Warn("sealing a payload failed; storing it in plaintext",
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

// Drop takes out of segs the frames whose transaction ids the database
// already holds, dups[partition][transaction id] being the message stored
// under it, records those items in p.Stored, and returns the segments that
// still have frames to push, re-encoded.
func (p *Packed) Drop(segs []*Segment, dups map[uuid.UUID]map[string]uuid.UUID) []*Segment {
	if p.Stored == nil {
		p.Stored = map[int]Pushed{}
	}
	keep := segs[:0]
	for _, g := range segs {
		d := dups[g.Partition.ID]
		if d == nil {
			keep = append(keep, g)
			continue
		}
		n := 0
		for i := range g.Frames {
			if id, dup := d[g.TxIDs[i]]; dup {
				p.Stored[g.Items[i]] = Pushed{MessageID: id, TransactionID: g.TxIDs[i], Partition: g.Partition, Duplicate: true}
				continue
			}
			g.Frames[n], g.Items[n], g.TxIDs[n] = g.Frames[i], g.Items[i], g.TxIDs[i]
			n++
		}
		g.Frames, g.Items, g.TxIDs = g.Frames[:n], g.Items[:n], g.TxIDs[:n]
		dk := 0
		for i, t := range g.DedupTxIDs {
			if _, dup := d[t]; !dup {
				g.DedupTxIDs[dk], g.DedupMsgIDs[dk] = t, g.DedupMsgIDs[i]
				dk++
			}
		}
		g.DedupTxIDs, g.DedupMsgIDs = g.DedupTxIDs[:dk], g.DedupMsgIDs[:dk]
		if n > 0 {
			g.encode()
			keep = append(keep, g)
		}
	}
	clear(segs[len(keep):])
	return keep
}

// Pushed is the outcome of one pushed item.
type Pushed struct {
	MessageID     uuid.UUID
	TransactionID string
	Partition     *catalog.Partition
	Duplicate     bool
	BaseOffset    int64 // of the segment it was stored in; 0 for a duplicate
}

// Results answers every item once the segments stored, after Drop, have
// their BaseOffset: stored, or a duplicate of a message the database held
// or of an earlier item of the request.
func (p *Packed) Results(stored []*Segment) []Pushed {
	out := make([]Pushed, len(p.DupOf))
	for _, g := range stored {
		for i, j := range g.Items {
			out[j] = Pushed{MessageID: g.Frames[i].ID, TransactionID: g.TxIDs[i], Partition: g.Partition, BaseOffset: g.BaseOffset}
		}
	}
	for j, d := range p.Stored {
		out[j] = d
	}
	for j, first := range p.DupOf {
		if first >= 0 {
			out[j] = out[first]
			out[j].Duplicate = true
			out[j].BaseOffset = 0
		}
	}
	return out
}

// afterPush is what committed segments leave to do: their partitions to
// announce, and their queues' counts (the messages, and one request per
// queue).
func afterPush(segs []*Segment) commit.After {
	var a commit.After
	for i, g := range segs {
		if len(g.Frames) == 0 {
			continue
		}
		q := g.Partition.Queue
		a.Pushed = append(a.Pushed, commit.Count{Tenant: q.Tenant, Queue: q.Name, N: len(g.Frames)})
		a.Ops = append(a.Ops, commit.Op{Tenant: q.Tenant, Queue: q.Name, Field: counters.PushMessages, N: int64(len(g.Frames))})
		if !slices.ContainsFunc(segs[:i], func(e *Segment) bool { return len(e.Frames) > 0 && e.Partition.Queue.ID == q.ID }) {
			a.Ops = append(a.Ops, commit.Op{Tenant: q.Tenant, Queue: q.Name, Field: counters.PushRequests, N: 1})
		}
		a.Announce = append(a.Announce, commit.Partition{Queue: q.ID, Partition: g.Partition.ID})
	}
	return a
}
